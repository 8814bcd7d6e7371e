"""The lines of `stateous token show`: a token's line, the events it accepts, its history.

Each ledger kind reads as a short sentence (`stateous.model.sentences`, the table that
the dashboard's history shows too), after the entry's time of day in UTC and its
number: `HH:MM:SS  #N  sentence`, the line that scripts written against the documented
shape read. The date stands on a line of its own before the first entry and wherever
the day changes, so a token that waits for days still shows its dates.
Which events a token accepts now comes from the served graph: the events of the
transitions out of its state that can be fired from outside. A queued task of a token
of another version than the one served says which supervisors it waits for. An entry of a kind
this version does not know, or with fields it does not expect, still shows: its
kind and its data as JSON. This module only formats what the control plane
answered; it sends nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

from stateous.model.budgets import amounts_text
from stateous.model.names import BUILTIN_EVENTS
from stateous.model.sentences import Narrator, state_name
from stateous.model.vocabulary import LIVE_TOKEN, TokenStatus

#: The ledger kinds that leave a task waiting to be claimed.
QUEUED = ("task_queued", "task_retrying")
#: The line of a day, before its first entry of the history.
DAY = "-- {day}, times in UTC --"
#: The line under a failure's entry: its fingerprint, which the same failure shares.
FINGERPRINT = "          fingerprint {fingerprint}"

Data = dict[str, Any]


def token_line(token: Data) -> str:
    """Say where a token is: `TICKET-1: coding (visit 2), active`."""
    state, status = state_name(token["state"]), token["status"]
    if token["visit"] > 1:
        return f"{token['token']}: {state} (visit {token['visit']}), {status}"
    return f"{token['token']}: {state}, {status}"


def in_utc(moment: str) -> datetime:
    """An ISO 8601 moment of the API, in UTC."""
    return datetime.fromisoformat(moment).astimezone(UTC)


def accepted_events(token: Data, document: Data) -> list[str]:
    """The events of the transitions out of the token's state, in the graph file's order.

    `document` is the graph file as `GET /workflow` answers it: the top workflow, and its
    child workflows under `workflows`. A child's id, `<parent>.<state>.<visit>.<workflow>`,
    names its workflow. Read as JSON values, not as the typed graph file, since decoding
    that imports msgspec, a tenth of this command's start. Raises KeyError or TypeError
    when `document` is not a graph file.
    """
    if token.get("parent") is None:
        workflow = document
    else:
        workflow = document["workflows"][token["token"].rsplit(".", 1)[1]]
    moves = workflow["transitions"]
    return list(
        dict.fromkeys(
            move["on"] for move in moves if move["from"] == token["state"] and move.get("on")
        )
    )


def accepts_line(token: Data, events: list[str]) -> str:
    """Say which events the token's state accepts now, of the `events` out of its state
    (`accepted_events`): `accepts now: passed, failed`."""
    status = token["status"]
    if status not in LIVE_TOKEN:
        return "accepts now: no events; the token has ended"
    outside = ", ".join(event for event in events if event not in BUILTIN_EVENTS)
    if not outside:
        own = " or ".join(events)
        return f"accepts now: no events from outside; {state_name(token['state'])} moves on {own}"
    if status == TokenStatus.PAUSED:
        return f"accepts now: {outside} (held until the token is resumed)"
    return f"accepts now: {outside}"


def task_queued(token: Data, entries: list[Data]) -> bool:
    """Whether the active token's task waits to be claimed: its last task entry queued it
    (`task_queued`, or `task_retrying` for its next attempt)."""
    if token["status"] != TokenStatus.ACTIVE:
        return False
    kinds = (entry["kind"] for entry in reversed(entries))
    return next((kind for kind in kinds if kind.startswith("task_")), None) in QUEUED


def waits_line(token: Data) -> str:
    """Say which supervisors a queued task of a token of an older version waits for: one
    built for the token's graph, or one whose state has the same contract."""
    return (
        f"waits for a supervisor of {token['checksum']} or one whose "
        f"{state_name(token['state'])} has the same contract"
    )


def shown_lines(
    token: Data,
    children: Iterable[Data],
    events: list[str],
    entries: Iterable[Data],
    served: Callable[[], str] | None = None,
) -> list[str]:
    """The lines of `token show ID` (and of `archive show`): the token, each child indented
    under it, the events it accepts now (of `events`, the ones out of its state), which
    supervisors its queued task waits for when its graph is not the one `served` names (asked
    only then), the resource or the supervisor it waits for, then its history."""
    entries = list(entries)
    lines = [token_line(token)]
    lines += [f"  {token_line(child)}" for child in children]
    lines.append(accepts_line(token, events))
    checksum = token.get("checksum")
    if (
        served is not None
        and checksum is not None
        and task_queued(token, entries)
        and checksum != served()
    ):
        lines.append(waits_line(token))
    if token.get("waits_for"):
        lines.append(f"its task {token['waits_for']}")
    if token.get("waits"):
        lines.append(f"its task waits: {token['waits']}")
    if token.get("spent"):
        lines.append(spent_line(token["spent"]))
    lines += history_lines(entries)
    return lines


def spent_line(spent: Data) -> str:
    """What `token show` says of a token's spend: its own, its tree's, its tree's budget."""
    line = f"spent: {amounts_text(spent['token'])}; its tree: {amounts_text(spent['tree'])}"
    budget = spent.get("budget")
    return line if budget is None else f"{line}; {budget_line(budget)}"


def budget_line(budget: Data) -> str:
    """A tree's budget in one line: its limits, what is reserved, whether it is spent."""
    line = f"budget of {budget['token']}: {amounts_text(budget['limits'])}"
    if budget["reserved"]:
        line += f", reserved {amounts_text(budget['reserved'])}"
    return line + (", spent: no task is granted" if budget["over"] else "")


def history_lines(entries: Iterable[Data]) -> Iterator[str]:
    """Yield one `HH:MM:SS  #seq  sentence` line per entry, in UTC, each day's `DAY` line
    before its first entry, and a failure's `FINGERPRINT` line under it.

    The first day's line comes with the first entry, so that entries which cannot be read
    (the stream of `token watch` refused) leave no line without a history under it.
    """
    narrator = Narrator()
    day = ""
    for entry in entries:
        told = narrator.say(entry["kind"], entry.get("data") or {})
        moment = in_utc(entry["at"])
        if moment.date().isoformat() != day:
            day = moment.date().isoformat()
            yield DAY.format(day=day)
        yield f"{moment:%H:%M:%S}  #{entry['seq']}  {told}"
        fingerprint = (entry.get("data") or {}).get("fingerprint")
        if isinstance(fingerprint, str):
            yield FINGERPRINT.format(fingerprint=fingerprint)
