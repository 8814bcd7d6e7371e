"""Install the peers of bench_peers.py, each in a folder of its own under `bench/.peers/`.

Restate: its server from npm (`@restatedev/restate-server`, whose platform package
carries the binary) in `restate/node_modules`, and the Python SDK with hypercorn in
`restate/venv`. DBOS Transact: `dbos` and psycopg in `dbos/venv`. None of them is a
dependency of the package; the folder is ignored by git. A folder that is there
already is used as it is; one that cannot be made (no network, no version that fits)
makes `install` return the reason, and the bench skips that peer with a line.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

PEERS = Path(__file__).resolve().parent / ".peers"
RESTATE_SERVER = "@restatedev/restate-server@~1.7"
RESTATE_PYTHON = ("restate-sdk>=1.2,<2", "hypercorn>=0.17,<1")
DBOS_PYTHON = ("dbos>=3.4,<4", "psycopg[binary]>=3.2,<4")


def restate_server() -> Path:
    return PEERS / "restate" / "node_modules" / ".bin" / "restate-server"


def restate_python() -> Path:
    return PEERS / "restate" / "venv" / "bin" / "python"


def dbos_python() -> Path:
    return PEERS / "dbos" / "venv" / "bin" / "python"


def _run(command: list[str], cwd: Path) -> str | None:
    """Run an install step; None when it worked, else the last lines it printed."""
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if done.returncode == 0:
        return None
    lines = (done.stdout + done.stderr).strip().splitlines()
    return f"`{' '.join(command[:3])} ...` failed: " + " / ".join(lines[-3:])


def _venv(folder: Path, packages: tuple[str, ...]) -> str | None:
    """A venv in `folder/venv` holding `packages`, unless it imports them already."""
    python = folder / "venv" / "bin" / "python"
    if not python.exists():
        failed = _run([sys.executable, "-m", "venv", str(folder / "venv")], folder)
        if failed:
            return failed
    return _run([str(python), "-m", "pip", "install", "-q", *packages], folder)


def install(peer: str) -> str | None:
    """Make `peer`'s folder ready ("restate" or "dbos"); None, or why it could not be."""
    folder = PEERS / peer
    folder.mkdir(parents=True, exist_ok=True)
    if peer == "dbos":
        return None if _ready(dbos_python(), "dbos") else _venv(folder, DBOS_PYTHON)
    if not restate_server().exists():
        if shutil.which("npm") is None:
            return "npm is not installed (apt-get install npm)"
        npm = ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(folder)]
        failed = _run([*npm, RESTATE_SERVER], folder)
        if failed:
            return failed
    return None if _ready(restate_python(), "restate") else _venv(folder, RESTATE_PYTHON)


def _ready(python: Path, module: str) -> bool:
    """Whether the venv of `python` imports `module` (and hypercorn, for Restate)."""
    if not python.exists():
        return False
    names = f"{module}, hypercorn" if module == "restate" else module
    return (
        subprocess.run([str(python), "-c", f"import {names}"], capture_output=True).returncode == 0
    )


def versions() -> dict[str, str]:
    """The installed versions, for the table's heading."""
    found = {}
    if restate_server().exists():
        out = subprocess.run([str(restate_server()), "--version"], capture_output=True, text=True)
        found["restate-server"] = out.stdout.strip().rsplit(" ", 1)[-1]
    for python, names in (
        (restate_python(), ("restate-sdk", "hypercorn")),
        (dbos_python(), ("dbos",)),
    ):
        if python.exists():
            for name in names:
                code = f"import importlib.metadata as m; print(m.version('{name}'))"
                out = subprocess.run([str(python), "-c", code], capture_output=True, text=True)
                if out.returncode == 0:
                    found[name] = out.stdout.strip()
    return found
