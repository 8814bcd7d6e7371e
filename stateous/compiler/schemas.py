"""The models of a workflow tree, by name, with their JSON Schemas.

Each model appears in the graph file and the contract under its class name, so
two different classes with one name, or a name that cannot be a Python class
name, are problems of the workflow.
"""

from __future__ import annotations

import keyword
from typing import Any

from stateous.model.models import json_schema, model_name
from stateous.model.workflow import Workflow

#: Names that the generated contract uses for itself.
RESERVED = frozenset({"events", "states", "Context", "Occurrence", "StateRef", "on_state"})


class Models:
    """Collects the models of a workflow tree and their schemas, once each."""

    def __init__(self) -> None:
        self.classes: dict[str, type] = {}
        self.schemas: dict[str, dict[str, Any]] = {}
        self.problems: list[str] = []

    def add(self, model: type | None) -> str | None:
        """Record a model and return its name; None stays None."""
        if model is None:
            return None
        name = model_name(model)
        known = self.classes.get(name)
        if known is model:
            return name
        if known is not None:
            self.problems.append(
                f"two different models are named {name!r}; give each model its own name"
            )
            return name
        if not name.isidentifier() or keyword.iskeyword(name) or name in RESERVED:
            self.problems.append(
                f"the model name {name!r} cannot be a class of contract.py; rename the model"
            )
        self.classes[name] = model
        try:
            self.schemas[name] = json_schema(model)
        except Exception as ex:
            self.problems.append(f"the model {name!r} has no JSON Schema: {ex}")
            self.schemas[name] = {}
        return name

    @classmethod
    def of(cls, workflows: list[Workflow]) -> Models:
        """Collect the context and payload models of every workflow, in declaration order."""
        models = cls()
        for workflow in workflows:
            models.add(workflow.context)
            for event in workflow.events.values():
                models.add(event.payload)
        return models
