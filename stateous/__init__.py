"""Stateous: durable workflows as graphs of states.

Write a workflow with `Workflow`, `START` and `END`; compile it with
`stateous compile`; serve it with `stateous serve`; do its work with
`stateous supervise`, in routines marked with `on_state`; steer tokens with
`Client`. The names load on first use, so a command pays only for what it runs.
"""

from __future__ import annotations

import importlib

from stateous._version import __version__

#: True for type checkers only, which read the names below, as they read `typing`'s own:
#: every start of the command line imports this package, and `typing` would be a sixth of
#: the start of `stateous --version`.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from stateous.client import Client
    from stateous.model.errors import DefinitionError
    from stateous.model.workflow import END, START, Workflow
    from stateous.supervisor.routine import (
        Context,
        Occurrence,
        OutcomeError,
        QuotaExhausted,
        RetryLater,
        StateRef,
        TaskGone,
        on_state,
    )

#: Where each public name lives.
_HOMES = {
    "Client": "stateous.client",
    "DefinitionError": "stateous.model.errors",
    "END": "stateous.model.workflow",
    "START": "stateous.model.workflow",
    "Workflow": "stateous.model.workflow",
    "Context": "stateous.supervisor.routine",
    "Occurrence": "stateous.supervisor.routine",
    "OutcomeError": "stateous.supervisor.routine",
    "QuotaExhausted": "stateous.supervisor.routine",
    "RetryLater": "stateous.supervisor.routine",
    "StateRef": "stateous.supervisor.routine",
    "TaskGone": "stateous.supervisor.routine",
    "on_state": "stateous.supervisor.routine",
}

__all__ = [
    "END",
    "START",
    "Client",
    "Context",
    "DefinitionError",
    "Occurrence",
    "OutcomeError",
    "QuotaExhausted",
    "RetryLater",
    "StateRef",
    "TaskGone",
    "Workflow",
    "__version__",
    "on_state",
]


def __getattr__(name: str) -> Any:
    """Import a public name from its home on first use."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'stateous' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
