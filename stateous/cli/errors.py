"""How the command line fails: one `error: <sentence>` line on stderr and exit code 1.

Every expected failure of every part is listed here once, so no command prints a
traceback for a mistake that a user can make.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TypeVar

from stateous.compiler.compile import CompileError, WriteError
from stateous.compiler.load import LoadError
from stateous.control.hold import HoldRefused
from stateous.control.migrations import SchemaError
from stateous.control.serve import ServeError


class CommandError(Exception):
    """A command cannot do what it was asked; the message says why, in one sentence."""


EXPECTED: tuple[type[BaseException], ...] = (
    CommandError,
    LoadError,
    CompileError,
    WriteError,
    ServeError,
    HoldRefused,
    SchemaError,
)

Result = TypeVar("Result")


def reported(run: Callable[[], Result]) -> Result | int:
    """Run a command; turn an expected failure into an `error:` line and exit code 1."""
    try:
        return run()
    except EXPECTED as ex:
        print(f"error: {ex}", file=sys.stderr)
        return 1
