"""A command line that argparse cannot read: the usage of the command that was typed.

Each case runs the real `python -m stateous` and reads what a person sees: the
usage of the command at the depth it was typed, one `error:` line, exit code 2.
"""

from __future__ import annotations

import pytest

CASES = [
    (
        ("token", "show", "--bogus", "TICKET-1"),
        "usage: stateous token show ",
        "stateous token show: error: unrecognized arguments: --bogus",
    ),
    (
        ("init", "workflow"),
        "usage: stateous init workflow ",
        "stateous init workflow: error: the following arguments are required: NAME",
    ),
    (
        ("init", "supervisor", "flow.py", "box", "--bogus"),
        "usage: stateous init supervisor ",
        "stateous init supervisor: error: unrecognized arguments: --bogus",
    ),
    (
        ("serve", "orders.json", "--bogus"),
        "usage: stateous serve ",
        "stateous serve: error: unrecognized arguments: --bogus",
    ),
    (
        ("compile", "flow.py", "extra"),
        "usage: stateous compile ",
        "stateous compile: error: unrecognized arguments: extra",
    ),
    (
        ("token", "fire", "TICKET-1", "done", "--key"),
        "usage: stateous token fire ",
        "stateous token fire: error: argument --key: expected one argument",
    ),
    (
        ("token", "pause", "--timeout", "0", "TICKET-1"),
        "usage: stateous token pause ",
        "stateous token pause: error: argument --timeout: '0' is not a number of seconds above 0",
    ),
    (
        ("token", "bogus"),
        "usage: stateous token ",
        "stateous token: error: argument VERB: invalid choice: 'bogus' "
        "(choose from 'start', 'fire', 'show', 'watch', 'pause', 'resume', 'cancel', 'budget', "
        "'retry', 'migrate', 'list')",
    ),
    (
        ("--bogus", "token", "show"),
        "usage: stateous [-h] [--version] COMMAND ...",
        "stateous: error: unrecognized arguments: --bogus",
    ),
]


@pytest.mark.parametrize(("args", "usage", "error"), CASES, ids=[" ".join(c[0]) for c in CASES])
def test_a_usage_error_shows_the_usage_of_the_command_that_was_typed(
    stateous, args: tuple[str, ...], usage: str, error: str
) -> None:
    result = stateous(*args)
    assert (result.returncode, result.stdout) == (2, "")
    lines = result.stderr.splitlines()
    assert lines[0].startswith(usage), result.stderr
    assert [line for line in lines if "error:" in line] == [error]
    assert lines[-1] == error
