"""Shared fixtures: running the real `stateous` command as a separate process."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

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
def stateous(tmp_path: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run the command in a fresh folder: `stateous("compile", "flow.py")`."""

    def run(*args: str, **options) -> subprocess.CompletedProcess[str]:
        options.setdefault("cwd", tmp_path)
        return run_stateous(*args, **options)

    return run
