"""Stateous: durable workflows as graphs of states.

Write a workflow with `Workflow`, `START` and `END`; compile it with
`stateous compile`; serve it with `stateous serve`; do its work with
`stateous supervise`.
"""

from stateous._version import __version__
from stateous.client import Client
from stateous.model.errors import DefinitionError
from stateous.model.workflow import END, START, Workflow
from stateous.supervisor.routine import Context, Occurrence, OutcomeError, StateRef, on_state

__all__ = [
    "END",
    "START",
    "Client",
    "Context",
    "DefinitionError",
    "Occurrence",
    "OutcomeError",
    "StateRef",
    "Workflow",
    "__version__",
    "on_state",
]
