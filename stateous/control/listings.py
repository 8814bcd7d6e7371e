"""The listings of the API: tokens, live tasks and supervisors, paged with opaque cursors.

A listing checks its query's values (a bad one is `invalid_argument`, naming the
parameter), reads one page on one snapshot, and answers the page with the cursor
of the next one when more rows follow. A cursor is the sort key of the page's
last row, as URL-safe base64 of JSON: the next page starts strictly after that
key, so a page boundary inside a run of equal times neither repeats nor skips a
row, and a row that moves while the pages are read is found where it now sorts
(docs/reference/http.md says what that means for each listing). Nothing here
speaks HTTP or SQL: the API asks, the store reads.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

import msgspec

from stateous.control import checks, resource_steering
from stateous.control.errors import InvalidArgument
from stateous.control.store import (
    Store,
    SupervisorRow,
    TaskQuery,
    TaskRow,
    TokenQuery,
    Tx,
    to_column,
    to_iso,
)
from stateous.control.views import view
from stateous.model.durations import parse_duration
from stateous.model.limits import INTEGER_LIMIT, SUPERVISOR_NAME_LIMIT, TOKEN_ID_LIMIT
from stateous.model.names import plain_text
from stateous.model.vocabulary import LIVE_TASK, TaskStatus, TokenStatus
from stateous.model.wire import SupervisorView, TaskView, TokenView

#: How long a supervisor stays in `GET /supervisors` after its last claim or heartbeat.
SEEN_FOR = 86400.0
#: A time as a column keeps it, the first half of a cursor's key.
_COLUMN_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}\Z")
#: The longest cursor read: a time, a token id of 128 characters, JSON and base64.
_CURSOR_LIMIT = 512

Row = TypeVar("Row")


@dataclass(frozen=True, slots=True)
class Page(Generic[Row]):
    """The rows of one page, and the cursor of the next page (None when none follows)."""

    rows: list[Row]
    after: str | None


def encode_cursor(key: list[Any]) -> str:
    """The opaque cursor of a sort key."""
    return base64.urlsafe_b64encode(msgspec.json.encode(key)).decode().rstrip("=")


def decode_cursor(cursor: str, second: type) -> tuple[str, Any]:
    """The sort key of a cursor: a column time and a value of type `second` (a token id, a
    task id); anything else is a cursor of no page of this listing."""
    try:
        if len(cursor) > _CURSOR_LIMIT:
            raise ValueError(cursor)
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        moment, key = msgspec.json.decode(raw, type=tuple[str, second])  # type: ignore[valid-type]
    except (ValueError, binascii.Error, msgspec.DecodeError):
        raise InvalidArgument("after is not a cursor of this listing") from None
    if not _COLUMN_TIME.match(moment) or not valid_key(key):
        raise InvalidArgument("after is not a cursor of this listing")
    return moment, key


def decode_name_cursor(cursor: str) -> str:
    """The supervisor's name of a cursor of `GET /supervisors`."""
    try:
        if len(cursor) > _CURSOR_LIMIT:
            raise ValueError(cursor)
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        (name,) = msgspec.json.decode(raw, type=tuple[str])
    except (ValueError, binascii.Error, msgspec.DecodeError):
        raise InvalidArgument("after is not a cursor of this listing") from None
    if not plain_text(name, SUPERVISOR_NAME_LIMIT):
        raise InvalidArgument("after is not a cursor of this listing")
    return name


def valid_key(key: object) -> bool:
    """Whether the second half of a cursor's key can name a row: a token id, a task id."""
    if isinstance(key, str):
        return checks.keepable(key) and len(key) <= TOKEN_ID_LIMIT
    return isinstance(key, int) and 1 <= key <= INTEGER_LIMIT


def moment(name: str, text: str | None) -> str | None:
    """A query's ISO time (with `Z` or an offset) as a column keeps it."""
    if text is None:
        return None
    try:
        parsed = datetime.fromisoformat(text)
        if parsed.tzinfo is None:
            raise ValueError(text)
        return to_column(parsed.astimezone(UTC).timestamp())
    except (ValueError, OverflowError, OSError):
        raise InvalidArgument(
            f"{name} must be a time in ISO 8601 with its zone, like 2026-11-30T18:33:50Z"
        ) from None


def one_of(name: str, value: str | None, allowed: tuple[str, ...]) -> str | None:
    if value is not None and value not in allowed:
        raise InvalidArgument(f"{name} must be one of {', '.join(allowed)}")
    return value


def token_query(
    limit: int,
    *,
    status: str | None = None,
    state: str | None = None,
    parent: str | None = None,
    checksum: str | None = None,
    since: str | None = None,
    until: str | None = None,
    after: tuple[str, str] | None = None,
) -> TokenQuery:
    """The query of the tokens that these filters select, each value checked: the one set of
    token filters, of `GET /tokens` and of plans."""
    return TokenQuery(
        limit=limit,
        status=one_of("status", status, tuple(TokenStatus)),
        state=state,
        parent=parent,
        checksum=checksum,
        since=moment("since", since),
        until=moment("until", until),
        after=after,
    )


def matches_nothing(query: TokenQuery) -> bool:
    """Whether the query names a state, parent or checksum that no token can have (one
    holding NUL)."""
    named = (query.state, query.parent, query.checksum)
    return not all(map(checks.keepable, filter(None, named)))


#: Of a state (its claim name), the sentence that no live supervisor could take its work.
Unmet = Callable[[str], str | None] | None


def task_view(task: TaskRow, now: float, checksum: str | None, unmet: Unmet = None) -> TaskView:
    """Show a live task as `GET /tasks` does; only a claimed task has its supervisor.
    `checksum` is its token's graph: the version whose supervisors it waits for; `unmet`
    says, of a queued task's state, what no live supervisor offers."""
    held = task.status == TaskStatus.CLAIMED
    return TaskView(
        task=task.id,
        token=task.token,
        state=task.state,
        status=task.status,
        attempt=task.attempt,
        supervisor=task.claimed_by if held else None,
        lease_until=None if task.lease_until is None else to_iso(task.lease_until),
        queued_at=to_iso(task.queued_at),
        age=round(max(now - task.queued_at, 0.0), 1),
        checksum=checksum,
        waits=unmet(task.state) if unmet and task.status == TaskStatus.QUEUED else None,
    )


def supervisor_view(row: SupervisorRow) -> SupervisorView:
    return SupervisorView(
        supervisor=row.supervisor,
        last_claim=None if row.claimed_at is None else to_iso(row.claimed_at),
        last_heartbeat=None if row.heartbeat_at is None else to_iso(row.heartbeat_at),
        tasks=row.tasks,
    )


class Listings:
    """The listings, read from one store; each page is one read transaction."""

    def __init__(self, store: Store, unmet: Unmet = None) -> None:
        self.store = store
        #: What no live supervisor offers that a state needs (`fleet.Fleet.unmet`).
        self.unmet = unmet

    def tokens(
        self,
        *,
        status: str | None = None,
        state: str | None = None,
        parent: str | None = None,
        checksum: str | None = None,
        since: str | None = None,
        until: str | None = None,
        limit: str | int | None = None,
        after: str | None = None,
    ) -> Page[TokenView]:
        """A page of tokens, the most recently moved first."""
        query = token_query(
            checks.list_limit(limit) + 1,
            status=status,
            state=state,
            parent=parent,
            checksum=checksum,
            since=since,
            until=until,
            after=None if after is None else decode_cursor(after, str),
        )
        if matches_nothing(query):
            return Page([], None)
        rows = self.store.read(lambda tx: tx.token_page(query))
        more = len(rows) == query.limit
        rows = rows[: query.limit - 1]
        cursor = encode_cursor([rows[-1][1], rows[-1][0].token]) if more else None
        return Page([view(row) for row, _ in rows], cursor)

    def tasks(
        self,
        *,
        status: str | None = None,
        state: str | None = None,
        supervisor: str | None = None,
        older_than: str | None = None,
        limit: str | int | None = None,
        after: str | None = None,
    ) -> Page[TaskView]:
        """A page of live tasks (queued, claimed, waiting), the oldest queued first."""
        live = one_of("status", status, tuple(LIVE_TASK))
        if supervisor is not None and not plain_text(supervisor, SUPERVISOR_NAME_LIMIT):
            raise InvalidArgument(
                f"supervisor must be a name of 1 to {SUPERVISOR_NAME_LIMIT} characters "
                "without control characters"
            )
        age = None
        if older_than is not None:
            try:
                age = parse_duration(older_than)
            except ValueError as ex:
                raise InvalidArgument(f"older_than: {ex}") from None
        count = checks.list_limit(limit) + 1
        key = None if after is None else decode_cursor(after, int)
        if state is not None and not checks.keepable(state):
            return Page([], None)

        def read(
            tx: Tx,
        ) -> tuple[float, list[tuple[TaskRow, str, str | None]], dict[int, str]]:
            query = TaskQuery(
                limit=count,
                status=None if live is None else TaskStatus(live),
                state=state,
                supervisor=supervisor,
                queued_by=None if age is None else to_column(tx.now - age),
                after=key,
            )
            rows = tx.task_page(query)
            queued = [row.id for row, _, _ in rows if row.status == TaskStatus.QUEUED]
            return tx.now, rows, resource_steering.waits_lines(tx, queued)

        now, rows, waits = self.store.read(read)
        more = len(rows) == count
        rows = rows[: count - 1]
        cursor = encode_cursor([rows[-1][1], rows[-1][0].id]) if more else None
        views = [
            msgspec.structs.replace(
                task_view(row, now, checksum, self.unmet), waits_for=waits.get(row.id)
            )
            for row, _, checksum in rows
        ]
        return Page(views, cursor)

    def supervisors(
        self, *, limit: str | int | None = None, after: str | None = None
    ) -> Page[SupervisorView]:
        """A page of the supervisors that claimed or sent a heartbeat in the last `SEEN_FOR`
        seconds, by name, with the tasks each holds now."""
        count = checks.list_limit(limit) + 1
        name = "" if after is None else decode_name_cursor(after)
        rows = self.store.read(
            lambda tx: tx.supervisors_seen(to_column(tx.now - SEEN_FOR), count, name)
        )
        more = len(rows) == count
        rows = rows[: count - 1]
        cursor = encode_cursor([rows[-1].supervisor]) if more else None
        return Page([supervisor_view(row) for row in rows], cursor)
