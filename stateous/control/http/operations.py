"""What each route of the API declares (`routes.py` holds the table): its `Operation` (what
it is for, its body, its answers and the codes of its refusals) and its `Route` (method,
path, responder, rule), and the refusals that any request may get (`ALWAYS`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stateous.control.http import resources
from stateous.control.http.access import Rule
from stateous.model import wire
from stateous.model.codes import STATUS, RefusalCode


@dataclass(frozen=True, slots=True)
class Operation:
    """One route's method: what it is for, its body, its answers by status, its refusals."""

    summary: str
    #: The body's shape: a `wire` Struct, `dict[str, Any]` for any object, None for none.
    body: Any = None
    #: The answers by status; a tuple of shapes is one of them (`anyOf`), None no body.
    answers: tuple[tuple[int, Any], ...] = ((200, wire.TokenView),)
    #: The codes of its own refusals; every route may also refuse with `ALWAYS`.
    refusals: tuple[RefusalCode, ...] = ()
    #: The media type of the answers that have a body.
    media: str = "application/json"

    def codes(self) -> tuple[RefusalCode, ...]:
        """Every code this route may refuse with: its own, then `ALWAYS`."""
        return (*self.refusals, *(code for code in ALWAYS if code not in self.refusals))

    def statuses(self) -> dict[int, list[RefusalCode]]:
        """Its refusal codes by status, in the order of `codes()`."""
        found: dict[int, list[RefusalCode]] = {}
        for code in self.codes():
            found.setdefault(STATUS[code], []).append(code)
        return found


@dataclass(frozen=True, slots=True)
class Route:
    """One route of the API: served by `resource`'s responder of `suffix`, called by whom
    `rule` lets, doing `operation`."""

    method: str
    path: str
    resource: type[resources.Resource]
    #: The responder's suffix: `on_get_history` for "history"; None for `on_get`.
    suffix: str | None
    rule: Rule | None
    operation: Operation


#: The media type of the Prometheus text format.
PROMETHEUS = "text/plain; version=0.0.4"
#: The refusals that any request may get: one that cannot be read, a foreign `Host` or
#: `Origin`, a database that cannot take it now, a control plane that lost the database.
ALWAYS = (
    RefusalCode.BAD_REQUEST,
    RefusalCode.FORBIDDEN,
    RefusalCode.DATABASE_BUSY,
    RefusalCode.NOT_SERVING,
)
