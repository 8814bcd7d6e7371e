"""The `stateous` command: parse the command line and run the command it names.

`stateous --version` is answered before the parser is built: importing argparse and
building a parser take longer than the rest of that start (`parser.py` says how a
command's run builds only what it needs).
"""

from __future__ import annotations

import os
import sys

from stateous._version import __version__

#: True for type checkers only: `typing` is not imported for `stateous --version`
#: (see `stateous/__init__.py`).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

#: The exit code when stdout's reader has gone: what a shell reports for a process
#: that SIGPIPE ended (128 + 13), as `seq 100000 | head -n 1` ends `seq`.
CLOSED_PIPE = 141


def dispatch(argv: Sequence[str] | None) -> int:
    """Parse the command line and run the command it names."""
    words = sys.argv[1:] if argv is None else list(argv)
    if words == ["--version"]:
        # The line of the parser's own --version (parser.py).
        print(f"stateous {__version__}")
        return 0
    from stateous.cli.errors import reported
    from stateous.cli.parser import build_parser, command_named

    args = build_parser(command_named(words)).parse_args(words)
    try:
        code = reported(lambda: args.run(args))
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
        return 130
    return int(code or 0)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command and return its exit code; a closed stdout ends it quietly.

    When the reader of stdout has gone (`stateous token show ID | head -n 1`), the
    command stops where it is, prints nothing more, and exits with 141, the code
    that a shell reports for a Unix tool that the closed pipe ended.
    """
    try:
        try:
            return dispatch(argv)
        finally:
            sys.stdout.flush()
    except BrokenPipeError:
        quiet_stdout()
        return CLOSED_PIPE


def quiet_stdout() -> None:
    """Point stdout at the null device, so that the flush at exit has nowhere to fail."""
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, sys.stdout.fileno())
    os.close(null)
