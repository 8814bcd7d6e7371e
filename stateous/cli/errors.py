"""How the command line fails: one `error: <sentence>` line on stderr and exit code 1.

Every part raises a subclass of `Failure` for a mistake that a user can make, so
this module needs to know none of them, and no command prints a traceback for one.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TypeVar

from stateous.model.errors import Failure


class CommandError(Failure):
    """A command cannot do what it was asked; the message says why, in one sentence."""


Result = TypeVar("Result")


def reported(run: Callable[[], Result]) -> Result | int:
    """Run a command; turn an expected failure into an `error:` line and exit code 1."""
    try:
        return run()
    except Failure as ex:
        print(f"error: {ex}", file=sys.stderr)
        return 1
