"""Resources: limits that tasks share, each counted per key ("one agent per repository",
"at most 3 calls in flight to one account", "at most 60 requests a minute").

A resource has `slots` per key and maybe a `rate` (`N/second|minute|hour`, a token
bucket per key that holds N). A state `uses` resources: each by a key expression in the
guard language (`"ctx['repo']"`: one slot of the key it reads) or by a count (`1`: that
many slots of the resource's one key). The checks here are shared by `flow.py`,
`compile` and the routes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import msgspec

from stateous.model.guards import GuardSyntaxError
from stateous.model.keys import key_path, key_value
from stateous.model.names import name_problem

#: The seconds of each unit a rate may name.
RATE_UNITS = {"second": 1.0, "minute": 60.0, "hour": 3600.0}
_RATE = re.compile(r"([1-9][0-9]{0,8})/(second|minute|hour)\Z")
#: The key of a resource that a state uses by a count.
WHOLE = ""


def parse_rate(rate: str) -> tuple[int, float]:
    """`"60/minute"` as (60, 60.0): how many a bucket holds and the seconds it refills in."""
    found = _RATE.match(rate) if isinstance(rate, str) else None
    if found is None:
        raise ValueError(f"{rate!r} is not a rate; write N/second, N/minute or N/hour")
    return int(found[1]), RATE_UNITS[found[2]]


#: The most failed attempts in a row that a breaker may wait for.
BREAKER_LIMIT = 1000


def resource_problems(
    name: object, slots: object, rate: object, breaker: object = None
) -> list[str]:
    """Every problem of a resource's declaration, each naming its field."""
    found = []
    problem = name_problem(name)
    if problem is not None:
        found.append(f"name: {problem}")
    if not isinstance(slots, int) or isinstance(slots, bool) or slots < 1:
        found.append(f"slots: {slots!r} must be a whole number, 1 or more")
    if rate is not None:
        try:
            parse_rate(rate)  # type: ignore[arg-type]
        except ValueError as ex:
            found.append(f"rate: {ex}")
    if breaker is not None and (
        not isinstance(breaker, int)
        or isinstance(breaker, bool)
        or not 1 < breaker <= BREAKER_LIMIT
    ):
        found.append(f"breaker: {breaker!r} must be a whole number from 2 to {BREAKER_LIMIT}")
    return found


def use_problem(resource: str, use: object, declared: Mapping[str, Any]) -> str | None:
    """What is wrong with a state's use of `resource`, or None."""
    if resource not in declared:
        return f"uses {resource!r}, which is not declared; declare it with flow.resource(...)"
    if isinstance(use, bool) or not isinstance(use, (int, str)):
        return f"uses {resource!r}: {use!r} is neither a key expression nor a count"
    if isinstance(use, int):
        slots = declared[resource]
        if use < 1 or use > slots:
            return f"uses {resource!r}: a count is 1 to its slots ({slots}), not {use}"
        return None
    try:
        key_path(use)
    except GuardSyntaxError as ex:
        return f"uses {resource!r}: {use!r} is no key expression: {ex}"
    return None


def key_of(use: str | int, context: Any) -> tuple[str, int]:
    """The key a use takes and how many slots: a key expression takes one slot of the key it
    reads (`keys.key_value`), a count that many of the
    resource's one key."""
    if isinstance(use, int):
        return WHOLE, use
    return key_value(key_path(use), context), 1


def shown(resource: str, key: str) -> str:
    """`repo=acme/api`, or `llm` for the resource's one key."""
    return resource if key == WHOLE else f"{resource}={key}"


def waiting(resource: str, key: str) -> str:
    """What a task that waits for a key keeps in `tasks.waits_for`: `repo=acme/api`, `llm=`.
    It always holds a '=' (never the word `queued`, which the queues' indexes read it
    against), and splits back at the first one, since a resource's name has none."""
    return f"{resource}={key}"


def waits_shown(waits_for: str) -> str:
    """A `waits_for` as a person reads it: `repo=acme/api`, `llm`, or a sentence."""
    resource, equals, key = waits_for.partition("=")
    return shown(resource, key) if equals else waits_for


class Taker(msgspec.Struct, kw_only=True):
    """A task that has taken slots of a key: let in (queued) or claimed."""

    task: int
    token: str
    status: str
    count: int


class Parked(msgspec.Struct, kw_only=True):
    """Why a key is parked (`quota` or `breaker`) and until when (UTC), the failure's
    `fingerprint` for a breaker, and how it reopens: `probe`, `cohort of N`, or null while
    closed."""

    cause: str
    until: str
    reason: str
    fingerprint: str | None
    reopening: str | None


class KeyView(msgspec.Struct, kw_only=True):
    """A key of a resource: its slots in use and by whom, how many tasks wait for it,
    until when it is closed (a rate's empty bucket, a parking: UTC, or null), and its
    parking (null: not parked)."""

    key: str
    in_use: int
    takers: list[Taker]
    waiting: int
    closed_until: str | None
    parked: Parked | None = None


class ResourceView(msgspec.Struct, kw_only=True):
    """A resource as `GET /resources` lists it: slots per key, its rate, paused or not, and
    each key that has slots in use or tasks waiting."""

    name: str
    slots: int
    rate: str | None
    paused: bool
    in_use: int
    waiting: int
    keys: list[KeyView]
    #: Ours (issue 42): how many times its keys were parked since the control plane started
    #: counting (quota reports and breakers).
    parkings: int = 0


class SlotsBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """`POST /resources/{name}/set`: the resource's slots per key from now on."""

    slots: int


class KeyBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """`POST /resources/{name}/open`: the parked key to reopen (`""`: the resource's one key)."""

    key: str
