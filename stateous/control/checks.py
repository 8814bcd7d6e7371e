"""What the values of a request must be.

Ids, names, keys, texts, attempts and limits follow the documented patterns;
contexts, payloads and timers follow the graph's models. Each check either
answers the value as the engine keeps it (a model's defaults filled in) or raises
the refusal with its code. Nothing here reads or writes the database.
"""

from __future__ import annotations

import re
from typing import Any

from stateous.control.errors import (
    InvalidArgument,
    InvalidContext,
    InvalidPayload,
    InvalidPriority,
    InvalidTokenId,
    TooManyTimers,
)
from stateous.control.graph import Flow
from stateous.control.validation import Invalid
from stateous.control.waiting_claims import LONGEST_WAIT
from stateous.model.durations import LONGEST, parse_duration
from stateous.model.limits import (
    BATCH_LIMIT,
    CLAIM_NAME_LIMIT,
    IDEMPOTENCY_KEY_LIMIT,
    INTEGER_LIMIT,
    LIST_DEFAULT,
    LIST_LIMIT,
    MEMORY_KEY_LIMIT,
    NOTE_LIMIT,
    PENDING_TIMERS,
    PRIORITY_LIMIT,
    REQUEST_ID_LIMIT,
    SUPERVISOR_NAME_LIMIT,
    TIMERS_PER_REPORT,
    TOKEN_ID_LIMIT,
)
from stateous.model.names import BUILTIN_EVENTS, TOKEN_PATTERN, plain_text
from stateous.model.vocabulary import ReportKind
from stateous.model.wire import Schedule

TOKEN_ID = re.compile(TOKEN_PATTERN)
REQUEST_ID = re.compile(rf"[A-Za-z0-9._-]{{1,{REQUEST_ID_LIMIT}}}\Z")


def token_id(token: object) -> str:
    if not isinstance(token, str) or not TOKEN_ID.match(token):
        raise InvalidTokenId(
            f"{token!r} is not a token id: a letter or a digit, then up to "
            f"{TOKEN_ID_LIMIT - 1} letters, "
            "digits, '.', '_' or '-'"
        )
    return token


def priority(value: int) -> int:
    if abs(value) > PRIORITY_LIMIT:
        raise InvalidPriority(
            f"{value} is no priority: a whole number from -{PRIORITY_LIMIT} to {PRIORITY_LIMIT}"
        )
    return value


def keepable(text: str) -> bool:
    """Whether the database can hold `text` at all: Postgres keeps no NUL. A token id or an
    event name that fails this names nothing, and is not looked up."""
    return "\x00" not in text


def idempotency_key(key: str | None) -> None:
    if key is not None and not plain_text(key, IDEMPOTENCY_KEY_LIMIT):
        raise InvalidPayload(
            f"an idempotency key has 1 to {IDEMPOTENCY_KEY_LIMIT} characters and no control "
            "characters"
        )


def supervisor_name(supervisor: object) -> str:
    if not isinstance(supervisor, str) or not plain_text(supervisor, SUPERVISOR_NAME_LIMIT):
        raise InvalidArgument(
            f"a supervisor's name has 1 to {SUPERVISOR_NAME_LIMIT} characters and no control "
            "characters"
        )
    return supervisor


def attempt(number: int | None) -> None:
    if number is not None and number < 1:
        raise InvalidArgument(f"an attempt is a whole number from 1; {number} is not")


def claimed_states(states: object) -> None:
    """A claim names at most `BATCH_LIMIT` states; a name the graph does not have is no
    refusal (it matches no task), but one longer than any state's name can be is."""
    if not isinstance(states, list) or len(states) > BATCH_LIMIT:
        raise InvalidArgument(f"a claim names at most {BATCH_LIMIT} states")
    if any(len(name) > CLAIM_NAME_LIMIT for name in states):
        raise InvalidArgument(
            f"a state's name in a claim has at most {CLAIM_NAME_LIMIT} characters"
        )


def request_id(request: str | None) -> None:
    if request is not None and not REQUEST_ID.match(request):
        raise InvalidArgument(
            f"a request id has 1 to {REQUEST_ID_LIMIT} letters, digits, '.', '_' or '-'"
        )


def claim(supervisor: str, states: list[str], request: str | None, wait: float) -> None:
    """The parts of a claim, each checked on its own."""
    supervisor_name(supervisor)
    claimed_states(states)
    request_id(request)
    claim_wait(wait)


def claim_wait(wait: float) -> None:
    if not 0 <= wait <= LONGEST_WAIT:
        raise InvalidArgument(f"a claim's wait is 0 to {LONGEST_WAIT:g} seconds")


def retry_after(kind: str, seconds: float | None) -> None:
    """A report may ask for a wait before the next attempt only of a failed attempt, and
    for no longer than the longest duration."""
    if seconds is None:
        return
    if kind not in (ReportKind.FAILED, ReportKind.QUOTA):
        raise InvalidArgument("retry_after goes only with a report of kind 'failed' or 'quota'")
    if not 0 <= seconds <= LONGEST:
        raise InvalidArgument(f"retry_after is 0 to {LONGEST} seconds")


def heartbeat_tasks(tasks: object) -> None:
    if not isinstance(tasks, list) or len(tasks) > BATCH_LIMIT:
        raise InvalidArgument(f"a heartbeat names at most {BATCH_LIMIT} tasks")
    if not all(type(task) is int and 1 <= task <= INTEGER_LIMIT for task in tasks):
        raise InvalidArgument(
            f"the tasks of a heartbeat are ids, whole numbers from 1 to {INTEGER_LIMIT}"
        )


def note_text(text: object) -> str:
    """A note as the history keeps it: without the spaces at its two ends."""
    if not isinstance(text, str) or not 1 <= len(text.strip()) <= NOTE_LIMIT:
        raise InvalidPayload(f"a note has 1 to {NOTE_LIMIT} characters")
    return text.strip()


def memory_key(key: object) -> None:
    if not isinstance(key, str) or not plain_text(key, MEMORY_KEY_LIMIT):
        raise InvalidPayload(
            f"a memory key has 1 to {MEMORY_KEY_LIMIT} characters and no control characters"
        )


def list_limit(limit: str | int | None) -> int:
    """A listing's `limit`: 1 to `LIST_LIMIT`, `LIST_DEFAULT` when not given."""
    if limit is None:
        count = LIST_DEFAULT
    elif isinstance(limit, int):
        count = limit
    else:
        # Only ASCII digits: int() would also read "1_0", " 10", "+10" and Arabic-Indic digits.
        count = int(limit) if limit.isascii() and limit.isdigit() and len(limit) <= 4 else 0
    if not 1 <= count <= LIST_LIMIT:
        raise InvalidArgument(f"limit must be a whole number from 1 to {LIST_LIMIT}")
    return count


def context(flow: Flow, given: Any) -> dict[str, Any]:
    """The context as the token keeps it: checked against the model, its defaults filled."""
    if given is None:
        given = {}
    if not isinstance(given, dict):
        raise InvalidContext("the context must be a JSON object")
    try:
        return flow.context_check(given, "context")  # type: ignore[no-any-return]
    except Invalid as ex:
        raise InvalidContext(f"the context does not fit the model: {ex}") from None


def payload(flow: Flow, event: str, given: Any) -> Any:
    """The payload of `event` as the ledger keeps it: checked against the event's model."""
    if given is not None and not isinstance(given, dict):
        raise InvalidPayload("a payload must be a JSON object")
    check = flow.payload_checks.get(event)
    if check is None:
        if given:
            raise InvalidPayload(f"{event!r} has no payload")
        return None
    try:
        return check(given or {}, "payload")
    except Invalid as ex:
        raise InvalidPayload(f"the payload of {event!r} does not fit its model: {ex}") from None


def schedules(flow: Flow, given: list[Schedule]) -> list[dict[str, Any]]:
    """The timers a report sets, each with its payload checked and its delay in seconds."""
    if len(given) > TIMERS_PER_REPORT:
        raise TooManyTimers(
            f"a report sets at most {TIMERS_PER_REPORT} timers; this one sets {len(given)}"
        )
    checked = []
    for schedule in given:
        if schedule.event in BUILTIN_EVENTS or schedule.event not in flow.spec.events:
            raise InvalidPayload(f"a timer cannot fire {schedule.event!r}")
        try:
            seconds = parse_duration(schedule.after)
        except ValueError as ex:
            raise InvalidPayload(f"a timer of {schedule.event!r}: {ex}") from None
        checked.append(
            {
                "event": schedule.event,
                "payload": payload(flow, schedule.event, schedule.payload),
                "after": seconds,
            }
        )
    return checked


def room_for_timers(pending: int, more: int) -> None:
    """A token keeps at most `PENDING_TIMERS` pending: each one fired is a move to make, so
    a token with too many would hold up every other token's timers."""
    if more and pending + more > PENDING_TIMERS:
        raise TooManyTimers(
            f"the token has {pending} pending timers; {more} more would pass "
            f"{PENDING_TIMERS}, the most"
        )
