"""A command starts by building its parser, so that parser must not import what only running a
command needs, and a run of one command imports no other command's module: `stateous
--version` and `stateous token show` start quickly, from a checkout as from the pyz. What
each start must leave out is pinned by module name; the times are bench/bench_pyz.py's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.control.serving import Launcher, orders, write_graph

#: Modules that no command's options need; each costs a start several milliseconds or more.
HEAVY = (
    "apsw",
    "falcon",
    "http.client",
    "logging",
    "msgspec",
    "ssl",
    "subprocess",
    "waitress",
    "yaml",
    "stateous.client",
    "stateous.compiler",
    "stateous.control.engine",
    "stateous.control.store",
    "stateous.model.graph_file",
    "stateous.supervisor",
)

LOADED = """
import json, sys
from stateous.cli.parser import build_parser
build_parser()
print(json.dumps(sorted(sys.modules)))
"""

#: Run the command line in this process, then print every module it loaded, one a line
#: (after what the command printed), importing nothing more to do so.
RUN = """
import sys
from stateous.cli.main import main
code = main(sys.argv[1:])
print("--- modules")
print("\\n".join(sorted(sys.modules)))
"""

#: What `stateous --version` leaves out: it prints one line before any parser is built.
NOT_FOR_VERSION = (
    "argparse",
    "json",
    "typing",
    "stateous.cli.errors",
    "stateous.cli.parser",
    "stateous.cli.tokens",
)
#: What `stateous token show` leaves out: every other command's module and what they need,
#: the server side, dataclasses (which imports inspect) and sysconfig.
NOT_FOR_TOKEN_SHOW = (
    "apsw",
    "dataclasses",
    "falcon",
    "logging",
    "subprocess",
    "sysconfig",
    "waitress",
    "yaml",
    "stateous.cli.auth",
    "stateous.cli.backup",
    "stateous.cli.demo",
    "stateous.cli.init_supervisor",
    "stateous.cli.serving",
    "stateous.cli.supervising",
    "stateous.cli.workflows",
    "stateous.compiler",
    "stateous.control.engine",
    "stateous.control.store",
    "stateous.supervisor",
)


def loaded_by(*argv: str) -> set[str]:
    """Return the modules that `stateous ARGV` loads, beyond what the interpreter loads for
    `python -I -c pass` (a virtual environment's .pth files load some of their own)."""
    done = subprocess.run(
        [sys.executable, "-I", "-c", RUN, *argv], capture_output=True, text=True, check=True
    )
    modules = set(done.stdout.split("--- modules\n", 1)[1].split())
    bare = subprocess.run(
        [sys.executable, "-I", "-c", "import sys; print(' '.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return modules - set(bare.stdout.split())


def among(loaded: set[str], names: tuple[str, ...]) -> list[str]:
    """Return the loaded modules that are one of names or inside one of them."""
    return sorted(
        module
        for module in loaded
        if any(module == name or module.startswith(name + ".") for name in names)
    )


def test_building_the_parser_of_every_command_imports_nothing_heavy() -> None:
    done = subprocess.run(
        [sys.executable, "-I", "-c", LOADED], capture_output=True, text=True, check=True
    )
    loaded = set(json.loads(done.stdout))
    assert among(loaded, HEAVY) == []


def test_version_is_printed_before_argparse_or_typing_is_imported() -> None:
    assert among(loaded_by("--version"), NOT_FOR_VERSION) == []


def test_token_show_imports_neither_another_command_nor_the_server_nor_dataclasses() -> None:
    # Port 1 refuses: the command fails with one line, after it has loaded what it runs.
    loaded = loaded_by("token", "show", "--url", "http://127.0.0.1:1", "--timeout", "1", "T-1")
    assert "stateous.client" in loaded
    assert among(loaded, NOT_FOR_TOKEN_SHOW) == []


def test_a_token_shown_with_what_it_accepts_imports_no_msgspec_and_no_graph_file(
    launcher: Launcher, tmp_path: Path
) -> None:
    # msgspec imports its inspect and JSON Schema modules: some 8 ms of a 70 ms command.
    graph = tmp_path / "orders.json"
    write_graph(graph, orders())
    served = launcher.serve(graph, tmp_path / "orders.sqlite")
    served.ok("POST", "/tokens", {"token": "ORDER-1", "context": {"title": "bench"}})
    loaded = loaded_by("token", "show", "--url", served.url, "ORDER-1")
    assert "stateous.client" in loaded
    assert among(loaded, ("msgspec", "stateous.model.graph_file")) == []


def test_the_help_of_every_command_reads_the_same_when_only_one_command_is_built() -> None:
    from stateous.cli.parser import COMMANDS, build_parser

    whole = build_parser().format_help()
    for name in COMMANDS:
        assert build_parser(name).format_help() == whole, name
    assert build_parser("bogus").format_help() == whole
