"""What the commands that write a folder (`init workflow`, `init supervisor`) share."""

from __future__ import annotations

import argparse
import os
from pathlib import Path


def shown(path: Path) -> str:
    """Show a path relative to the current folder when it is inside it."""
    try:
        return os.path.relpath(path)
    except ValueError:
        return str(path)


def add_stateous_path(command: argparse.ArgumentParser) -> None:
    """Add `--stateous-path`, for a folder whose pyproject.toml depends on a local checkout."""
    command.add_argument(
        "--stateous-path",
        metavar="PATH",
        help="a local Stateous checkout for the folder's pyproject.toml to depend on",
    )


def stateous_checkout(args: argparse.Namespace) -> Path | None:
    """The checkout that `--stateous-path` named, if any."""
    return Path(args.stateous_path) if args.stateous_path else None
