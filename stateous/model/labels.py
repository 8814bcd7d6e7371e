"""Supervisor labels and a state's needs: what a box offers (`os: macos`, `gpu: "true"`) and
what a state's work requires of the box that claims it.

Both sides check labels with the same rule: a mapping of names to strings, each name and
value plain text of at most `LABEL_LIMIT` characters, at most `LABELS_LIMIT` of them. A
state's needs are met when the supervisor's labels hold each of them with the same value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stateous.model.limits import LABEL_LIMIT, LABELS_LIMIT
from stateous.model.names import plain_text


def labels_problem(labels: Any) -> str | None:
    """Why `labels` are not labels (a sentence), or None when they are."""
    if not isinstance(labels, Mapping):
        return f"labels are a mapping of names to strings, not {labels!r}"
    if len(labels) > LABELS_LIMIT:
        return f"at most {LABELS_LIMIT} labels, not {len(labels)}"
    for name, value in labels.items():
        if not isinstance(name, str) or not plain_text(name, LABEL_LIMIT):
            return f"a label's name has 1 to {LABEL_LIMIT} characters, not {name!r}"
        if not isinstance(value, str) or not plain_text(value, LABEL_LIMIT):
            return (
                f"{name!r} must be a string of 1 to {LABEL_LIMIT} characters, not {value!r} "
                '(quote it: "true")'
            )
    return None


def met(needs: Mapping[str, str] | None, labels: Mapping[str, str]) -> bool:
    """Whether a supervisor with these labels may take the work of a state with `needs`."""
    return not needs or all(labels.get(name) == value for name, value in needs.items())


def needs_text(needs: Mapping[str, str]) -> str:
    """Needs as people read them: `os=macos, gpu=true`."""
    return ", ".join(f"{name}={value}" for name, value in needs.items())
