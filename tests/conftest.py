"""Shared fixtures: the real `stateous` command, and `serve` and `supervise` processes."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.control.serving import Launcher
    from tests.supervisor.support import Supervisors

ROOT = Path(__file__).resolve().parent.parent


def run_stateous(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 60):
    """Run `python -m stateous ARGS` in `cwd` and return the finished process."""
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "stateous", *args],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def launcher(tmp_path: Path) -> Iterator[Launcher]:
    """Real `stateous serve` processes on free ports, all stopped when the test ends."""
    from tests.control.serving import Launcher

    with closing(Launcher(tmp_path)) as started:
        yield started


@pytest.fixture
def supervisors(tmp_path: Path) -> Iterator[Supervisors]:
    """Real `stateous supervise` processes, all stopped when the test ends."""
    from tests.supervisor.support import Supervisors

    with closing(Supervisors(tmp_path)) as started:
        yield started


@pytest.fixture
def stateous(tmp_path: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run the command in a fresh folder: `stateous("compile", "flow.py")`."""

    def run(*args: str, **options) -> subprocess.CompletedProcess[str]:
        options.setdefault("cwd", tmp_path)
        return run_stateous(*args, **options)

    return run
