"""The naming rules shared by workflows, states and events.

A name is what a person types in `token fire` and reads in the history, and it
ends up in token ids and file names, so it is kept to a small safe alphabet.
"""

import re
from typing import Final

from stateous.model.limits import NAME_LIMIT, TOKEN_ID_LIMIT
from stateous.model.text import has_control

#: A token id: a letter or a digit, then up to 127 letters, digits, '.', '_' or '-'.
TOKEN_PATTERN = rf"^[A-Za-z0-9][A-Za-z0-9._-]{{0,{TOKEN_ID_LIMIT - 1}}}\Z"
_NAME = re.compile(r"[a-z][a-z0-9_-]*\Z")


# The events of Stateous itself: transitions use them, nobody declares or fires them.
#: A state's `timeout` passed.
TIMEOUT_EVENT: Final = "timeout"
#: A task's attempts are spent.
ERROR_EVENT: Final = "error"
#: Every child of a parallel state ended.
JOINED_EVENT: Final = "joined"
#: The spend of the token's tree reached its budget (`stateous.model.budgets`).
OVER_BUDGET_EVENT: Final = "over_budget"
BUILTIN_EVENTS: Final = (TIMEOUT_EVENT, ERROR_EVENT, JOINED_EVENT, OVER_BUDGET_EVENT)
#: The event that moves a new token out of START.
STARTED = "__started__"
START_NAME = "__start__"
END_NAME = "__end__"


def name_problem(name: object) -> str | None:
    """Say what is wrong with a workflow, state or event name, or None if it is good."""
    if not isinstance(name, str):
        return f"{name!r} is not a name; a name is a string"
    if not _NAME.match(name):
        return (
            f"{name!r} is not a valid name; use lower-case letters, digits, '_' and '-', "
            "starting with a letter"
        )
    if len(name) > NAME_LIMIT:
        return f"{name!r} is longer than {NAME_LIMIT} characters"
    return None


def plain_text(text: object, limit: int) -> bool:
    """Whether `text` is a string of 1 to `limit` characters with no control character
    (C0, DEL, C1, U+2028 or U+2029; see `stateous.model.text`).

    Supervisor names, memory keys and idempotency keys follow this rule on both
    sides of the API; Postgres could not keep a NUL in them anyway.
    """
    return isinstance(text, str) and 1 <= len(text) <= limit and not has_control(text)
