"""A command starts by building the parser of every command, so that parser must not import
what only running a command needs: `stateous --version` and `stateous token show` start
quickly, from a checkout as from the pyz."""

from __future__ import annotations

import json
import subprocess
import sys

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


def test_building_the_parser_of_every_command_imports_nothing_heavy() -> None:
    done = subprocess.run(
        [sys.executable, "-I", "-c", LOADED], capture_output=True, text=True, check=True
    )
    loaded = set(json.loads(done.stdout))
    heavy = sorted(
        name for name in loaded if any(name == h or name.startswith(h + ".") for h in HEAVY)
    )
    assert heavy == []
