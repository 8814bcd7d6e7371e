"""`stateous init supervisor SOURCE FOLDER`: a supervisor's folder, from a workflow.

SOURCE is a control plane's URL (the graph comes from `GET /workflow`), a graph
file, or a `flow.py` compiled in memory. The graph is read in full before the
folder is touched, so a bad source writes nothing. Which files to write is the
compiler's decision (`stateous.compiler.supervisor_folder`); this module fetches,
writes and prints one line per file.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from stateous.cli.access import access_of, add_access_options
from stateous.cli.errors import CommandError
from stateous.cli.folders import add_stateous_path, shown, stateous_checkout
from stateous.control.defaults import DEFAULT_URL
from stateous.model.invocation import invoked_as

if TYPE_CHECKING:
    from stateous.model.graph_file import GraphFile


def _from_url(url: str, args: argparse.Namespace) -> GraphFile:
    """Get the graph that a control plane serves."""
    import msgspec

    from stateous.client.http import ClientError, Connection, Refused
    from stateous.model.graph_file import GraphFileError, load

    access = access_of(args)
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


def run_init_supervisor(args: argparse.Namespace) -> int:
    """Read the workflow, then write the folder's files and say what happened to each."""
    from stateous.compiler.supervisor_folder import plan

    source: str = args.source
    if "://" in source:
        url = source.rstrip("/")
        graph = _from_url(url, args)
    else:
        url = DEFAULT_URL
        graph = _from_file(Path(source))
    folder = Path(args.folder)
    stateous_path = stateous_checkout(args)
    try:
        steps = plan(graph, folder, url, stateous_path)
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


def add_command(init: argparse._SubParsersAction) -> None:
    """Add `init supervisor` to the `init` command."""
    command = init.add_parser(
        "supervisor",
        help="write a supervisor's folder: contract.py, a stub per state, settings",
        description=(
            "Write FOLDER/contract.py from the workflow in SOURCE, a stub for each state "
            "that no file of FOLDER implements, and stateous.yaml, pyproject.toml and "
            ".gitignore when they are absent."
        ),
    )
    command.add_argument(
        "source",
        metavar="SOURCE",
        help="a control plane's URL, a graph file, or a flow.py",
    )
    command.add_argument("folder", metavar="FOLDER", help="the supervisor's folder")
    add_stateous_path(command)
    add_access_options(command)
    command.set_defaults(run=run_init_supervisor)
