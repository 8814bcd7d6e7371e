"""How the Python files that `stateous init supervisor` writes spell names and values.

Valid identifiers for workflow, state and event names, class names, names that do
not collide, JSON values as Python literals, and the line length the files keep to.
It only makes text: it must know nothing of graphs, schemas or folders.
"""

from __future__ import annotations

import json
import keyword
import re
from typing import Any

#: Longer lines get wrapped where that is easy, and excused where it is not.
LINE_LIMIT = 88


def identifier(name: str) -> str:
    """A valid Python name for a workflow, state or event name: `ship-it` is `ship_it`."""
    text = re.sub(r"\W", "_", name)
    if not text or text[0].isdigit():
        text = f"_{text}"
    return f"{text}_" if keyword.iskeyword(text) else text


def pascal(name: str) -> str:
    """`design-review` as a class name: `DesignReview`."""
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[\W_]+", name) if part)


class Names:
    """Hands out distinct names: the wanted one, else `<wanted>_2`, `<wanted>_3`..."""

    def __init__(self, taken: set[str] | frozenset[str] = frozenset()) -> None:
        self.taken = set(taken)

    def claim(self, wanted: str) -> str:
        name, count = wanted, 1
        while name in self.taken:
            count += 1
            name = f"{wanted}_{count}"
        self.taken.add(name)
        return name


def python_literal(value: Any) -> str:
    """A JSON value as Python source, with double-quoted strings."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return f"[{', '.join(python_literal(item) for item in value)}]"
    if isinstance(value, dict):
        items = (f"{python_literal(key)}: {python_literal(item)}" for key, item in value.items())
        return f"{{{', '.join(items)}}}"
    return repr(value)
