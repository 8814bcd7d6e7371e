"""`stateous init supervisor SOURCE FOLDER`: a supervisor's folder, from a workflow.

SOURCE is a control plane's URL (the graph comes from `GET /workflow`), a graph
file, or a `flow.py` compiled in memory. The graph is read in full before the
folder is touched, so a bad source writes nothing. `--ca-file` and `--token-file`
go into a new `stateous.yaml`; a folder made again reaches the control plane with
the files its `stateous.yaml` names, and `--refresh FOLDER` takes the URL from there
too, so the command works as printed behind TLS and credentials. Which files to write is the
compiler's decision (`stateous.compiler.supervisor_folder`); this module fetches,
writes and prints one line per file.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from stateous.cli.access import access_of, add_access_options
from stateous.cli.errors import CommandError
from stateous.cli.folders import add_stateous_path, shown, stateous_checkout
from stateous.cli.parser import Commands
from stateous.control.defaults import DEFAULT_URL
from stateous.model.invocation import invoked_as

if TYPE_CHECKING:
    from stateous.client.access import Access
    from stateous.model.graph_file import GraphFile

#: The settings of stateous.yaml that name a file; the options `--ca-file` and
#: `--token-file` give them, under the same names in the parsed arguments.
FILE_SETTINGS = ("ca_file", "token_file")


class Saved(NamedTuple):
    """What a folder's stateous.yaml says of how to reach the control plane."""

    url: str
    access: Access


def _saved(folder: Path) -> Saved:
    """Read the folder's stateous.yaml: its URLs (comma-separated) and its CA and token
    files; name what is wrong in one sentence."""
    from stateous.supervisor.folder import FolderError, read_settings

    try:
        settings = read_settings(folder)
    except FolderError as ex:
        raise CommandError(str(ex)) from None
    return Saved(",".join(settings.urls), settings.access)


def _access(args: argparse.Namespace, folder: Path) -> Access:
    """The files of the options when any is given; else those of a folder made before;
    else the environment's."""
    given = any(getattr(args, key) for key in FILE_SETTINGS)
    if not given and (folder / "stateous.yaml").is_file():
        return _saved(folder).access
    return access_of(args)


def _files(args: argparse.Namespace, folder: Path) -> dict[str, str]:
    """The file options as stateous.yaml keeps them: a relative path made relative to the
    folder, since supervise reads it from there; an absolute one as it is."""
    files = {}
    for key in FILE_SETTINGS:
        path = getattr(args, key)
        if path:
            relative = os.path.relpath(os.path.abspath(path), os.path.abspath(folder))
            files[key] = path if os.path.isabs(path) else relative
    return files


def _from_url(url: str, access: Access) -> GraphFile:
    """Get the graph that a control plane serves."""
    import msgspec

    from stateous.client.http import ClientError, Connection, Refused
    from stateous.model.graph_file import GraphFileError, load

    try:
        connection = Connection(url, access=access)
    except ClientError as ex:
        raise CommandError(str(ex)) from None
    try:
        _, answer = connection.call("GET", "/workflow")
    except Refused as ex:
        raise CommandError(f"the control plane at {url} refused GET /workflow: {ex}") from None
    except ClientError as ex:
        raise CommandError(str(ex)) from None
    finally:
        connection.close()
    try:
        return load(msgspec.json.encode(answer))
    except GraphFileError as ex:
        raise CommandError(f"GET /workflow of {url} is not a graph file: {ex}") from None


def _from_file(path: Path) -> GraphFile:
    """Compile a flow.py in memory, or read a graph file."""
    from stateous.compiler.compile import compile_flow
    from stateous.model.graph_file import GraphFileError, load

    if not path.is_file():
        raise CommandError(f"{shown(path)} is not a file, nor an http:// or https:// URL")
    if path.suffix == ".py":
        return compile_flow(path)
    try:
        return load(path.read_bytes())
    except OSError as ex:
        raise CommandError(f"cannot read {shown(path)}: {ex.strerror or ex}") from None
    except GraphFileError as ex:
        raise CommandError(f"{shown(path)} is not a graph file: {ex}") from None


def _source(args: argparse.Namespace) -> tuple[str, Path]:
    """SOURCE and FOLDER, or the folder of `--refresh` with the URL of its stateous.yaml."""
    if args.refresh is not None:
        if args.source is not None:
            raise CommandError("give either SOURCE FOLDER or --refresh FOLDER, not both")
        folder = Path(args.refresh)
        return _saved(folder).url, folder
    if args.folder is None:
        raise CommandError("give SOURCE and FOLDER, or --refresh FOLDER")
    return args.source, Path(args.folder)


def run_init_supervisor(args: argparse.Namespace) -> int:
    """Read the workflow, then write the folder's files and say what happened to each."""
    from stateous.compiler.supervisor_folder import plan

    source, folder = _source(args)
    if "://" in source:
        url = source.rstrip("/")
        graph = _from_url(url, _access(args, folder))
    else:
        url = DEFAULT_URL
        graph = _from_file(Path(source))
    stateous_path = stateous_checkout(args)
    try:
        steps = plan(graph, folder, url, stateous_path, _files(args, folder))
        folder.mkdir(parents=True, exist_ok=True)
        for step in steps:
            if step.path is not None and step.text is not None:
                step.path.write_text(step.text, encoding="utf-8")
            where = shown(step.path) if step.path is not None else ""
            print(f"{step.verb:<8} {where}{step.note}")
    except OSError as ex:
        raise CommandError(f"cannot write in {shown(folder)}: {ex.strerror or ex}") from None
    print()
    print(f"Write the routines, then run: {invoked_as()} supervise {shown(folder)}")
    return 0


def add_command(init: Commands) -> None:
    """Add `init supervisor` to the `init` command."""
    command = init.add_parser(
        "supervisor",
        help="write a supervisor's folder: contract.py, a stub per state, settings",
        description=(
            "Write FOLDER/contract.py from the workflow in SOURCE, a stub for each state "
            "that no file of FOLDER implements, and stateous.yaml (with --ca-file and "
            "--token-file), pyproject.toml and .gitignore when they are absent."
        ),
    )
    command.add_argument(
        "source",
        metavar="SOURCE",
        nargs="?",
        help="a control plane's URL, a graph file, or a flow.py",
    )
    command.add_argument("folder", metavar="FOLDER", nargs="?", help="the supervisor's folder")
    command.add_argument(
        "--refresh",
        metavar="FOLDER",
        help="make FOLDER again from the control plane that its stateous.yaml names, "
        "with the CA and token files named there",
    )
    add_stateous_path(command)
    add_access_options(command)
    command.set_defaults(run=run_init_supervisor)
