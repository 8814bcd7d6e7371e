"""`Client`: start, fire, read and steer tokens from a program, over the HTTP API.

Each method sends one request on a kept-alive `Connection` and returns the decoded
JSON answer. A refusal raises `Refused` (or `NotFound`), a silent control plane
`Unreachable`. Given several URLs (a primary and its standbys), it sends to the
one that answered last and moves on past one that cannot be reached or answers
`not_serving` (`urls.py`). Only a `database_busy` answer is sent again, a few times: nothing
was written then, so sending it again cannot apply a change twice.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from stateous.client.access import Access
from stateous.client.http import Connection, Refused, segment
from stateous.client.urls import Urls
from stateous.client.watch import watch
from stateous.model.codes import RefusalCode
from stateous.model.limits import LIST_LIMIT


def next_cursor(link: str | None) -> str | None:
    """The cursor of the next page that a listing's `Link: <...>; rel="next"` names."""
    if link is None or 'rel="next"' not in link:
        return None
    target = link.partition("<")[2].partition(">")[0]
    found = parse_qs(urlsplit(target).query).get("after")
    return found[0] if found else None


#: How many times a `database_busy` answer is sent again before it is raised.
BUSY_RETRIES = 3
#: The pause before the first retry, in seconds; each next pause is twice as long.
BUSY_PAUSE = 0.1


class Client:
    """A connection to a control plane; use it from one thread at a time.

    `url` is one URL, a list of them, or a string of them separated by commas (as
    `STATEOUS_URL` may hold): the control plane and its standbys, tried in order.
    Every request carries the secret of `token`, of the file `token_file`, or else
    of `STATEOUS_TOKEN`, as `Authorization: Bearer ...`. An `https://` URL is
    verified with the CA certificates of `ca_file`, else of `STATEOUS_CA_FILE`,
    else of the system. A setting that cannot be used raises `BadSetting` here.
    """

    def __init__(
        self,
        url: str | Sequence[str],
        *,
        timeout: float = 30.0,
        token: str | None = None,
        token_file: str | os.PathLike[str] | None = None,
        ca_file: str | os.PathLike[str] | None = None,
    ) -> None:
        access = Access.read(token=token, token_file=token_file, ca_file=ca_file)
        self._connection = Connection(Urls(url), timeout, access=access)

    @property
    def url(self) -> str:
        """The URL that requests go to now: the first, else the one that answered last."""
        return self._connection.url

    @property
    def urls(self) -> tuple[str, ...]:
        """Every URL given, in order, without a trailing `/`."""
        return self._connection.urls.all

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection; a later call opens a new one."""
        self._connection.close()

    def _call(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """Send one request and return its JSON object; send it again while the database is
        busy."""
        answer: dict[str, Any] = self._exchange(method, path, body, headers)[1]
        return answer

    def _rows(self, path: str) -> list[dict[str, Any]]:
        """GET `path`, whose answer is a JSON array of objects, and return it."""
        rows: list[dict[str, Any]] = self._exchange("GET", path)[1]
        return rows

    def _exchange(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        """Send one request and return its status and JSON; send it again while the
        database is busy."""
        retry = 0
        while True:
            try:
                return self._connection.call(method, path, body, headers)
            except Refused as ex:
                if ex.code != RefusalCode.DATABASE_BUSY or retry == BUSY_RETRIES:
                    raise
            time.sleep(BUSY_PAUSE * 2**retry)
            retry += 1

    # tokens

    def start(self, token: str, context: dict[str, Any] | None = None) -> dict[str, Any]:
        """Start a token, or return the token that has this id already."""
        return self.start_token(token, context)[0]

    def start_token(
        self,
        token: str,
        context: dict[str, Any] | None = None,
        priority: int = 0,
        budget: dict[str, float] | None = None,
    ) -> tuple[dict[str, Any], bool]:
        """Start a token, or find the one that has this id already; tell which (True when
        this call started it: the control plane answered 201, not 200). `priority` and
        `budget` are sent only when given, so an older control plane takes the start as
        before."""
        body: dict[str, Any] = {"token": token, "context": context or {}}
        if priority:
            body["priority"] = priority
        if budget:
            body["budget"] = budget
        status, answer = self._exchange("POST", "/tokens", body)
        return answer, status == 201

    def fire(
        self,
        token: str,
        event: str,
        payload: dict[str, Any] | None = None,
        *,
        key: str | None = None,
    ) -> dict[str, Any]:
        """Fire an event; with a used `key`, return `{"duplicate": true, "token": ...}`."""
        headers = None if key is None else {"Idempotency-Key": key}
        body = {} if payload is None else {"payload": payload}
        path = f"/tokens/{segment(token)}/events/{segment(event)}"
        return self._call("POST", path, body, headers)

    def get(self, token: str) -> dict[str, Any]:
        """Return one token."""
        return self._call("GET", f"/tokens/{segment(token)}")

    def history(self, token: str) -> list[dict[str, Any]]:
        """Return the ledger entries of a token, in order."""
        return self._rows(f"/tokens/{segment(token)}/history")

    def watch(
        self, token: str | None = None, *, after: int | None = None, retry_for: float = 60.0
    ) -> Iterator[dict[str, Any]]:
        """Yield the ledger entries of `token` (None: of every token) as they commit, each
        with its `token`; without `after` (an event id), a token's from its first entry,
        every token's from now. A cut is mended with `Last-Event-ID`, losing and repeating
        nothing; a token's stream ends after its ending entry. It raises `Unreachable` when
        the control plane cannot be reached for `retry_for` seconds. The stream has a
        connection of its own."""
        return watch(self._connection, token, after, retry_for)

    def tokens(
        self,
        status: str | None = None,
        parent: str | None = None,
        limit: int | None = None,
        **filters: str | None,
    ) -> list[dict[str, Any]]:
        """List tokens, the most recently moved first: by status, children of a parent, and by
        `state`, `checksum`, `since` and `until` (ISO times); one page of up to `limit` (at
        most 1000)."""
        return self.page("/tokens", status=status, parent=parent, limit=limit, **filters)[0]

    def tasks(self, **filters: str | int | None) -> list[dict[str, Any]]:
        """List live tasks, the oldest queued first, by `status`, `state`, `supervisor` and
        `older_than` (a duration such as `1h`); one page of up to `limit`."""
        return self.page("/tasks", **filters)[0]

    def supervisors(self, most: int = 100_000) -> list[dict[str, Any]]:
        """The supervisors seen in the last day, by name: their last claim and heartbeat, their
        tasks; up to `most`, read page after page."""
        return self.listed("/supervisors", most)

    def page(self, path: str, **query: str | int | None) -> tuple[list[dict[str, Any]], str | None]:
        """One page of a listing (`/tokens`, `/tasks`) and the cursor of the next page, to pass
        as `after`, or None when it is the last."""
        given = urlencode({name: value for name, value in query.items() if value is not None})
        rows = self._rows(f"{path}?{given}" if given else path)
        return rows, next_cursor(self._connection.link)

    def listed(
        self, path: str, most: int, *, per_page: int = LIST_LIMIT, **query: str | None
    ) -> list[dict[str, Any]]:
        """Up to `most` rows of a listing, read page after page of up to `per_page` rows."""
        rows: list[dict[str, Any]] = []
        after = None
        while len(rows) < most:
            page, after = self.page(
                path, **query, limit=min(most - len(rows), per_page), after=after
            )
            rows += page
            if after is None:
                break
        return rows

    def pause(self, token: str) -> dict[str, Any]:
        """Pause an active token and its children."""
        return self._call("POST", f"/tokens/{segment(token)}/pause")

    def resume(self, token: str) -> dict[str, Any]:
        """Resume a paused token; its held events apply in the order they arrived."""
        return self._call("POST", f"/tokens/{segment(token)}/resume")

    def raise_budget(self, token: str, budget: dict[str, float]) -> dict[str, Any]:
        """Raise limits of the budget of the token's tree; its tasks are granted again."""
        return self._call("POST", f"/tokens/{segment(token)}/budget", {"budget": budget})

    def cancel(self, token: str) -> dict[str, Any]:
        """Cancel an active or paused token for good."""
        return self._call("POST", f"/tokens/{segment(token)}/cancel")

    def retry(
        self, token: str, state: str | None = None, context: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Bring a failed or cancelled token back, active, in `state` (its last state when
        None), with the `context` changes merged."""
        body: dict[str, Any] = {}
        if state is not None:
            body["from"] = state
        if context is not None:
            body["context"] = context
        return self._call("POST", f"/tokens/{segment(token)}/retry", body)

    def migrate(
        self, token: str, to: str | None = None, *, dry_run: bool = False
    ) -> dict[str, Any]:
        """Move a live top token, with its children, to the graph file of checksum `to` (the
        served one when None); a dry run answers what would move and changes nothing."""
        body: dict[str, Any] = {"dry_run": dry_run}
        if to is not None:
            body["to"] = to
        return self._call("POST", f"/tokens/{segment(token)}/migrate", body)

    # plans

    def make_plan(
        self, action: str, where: str, state: str | None = None, to: str | None = None
    ) -> dict[str, Any]:
        """Plan `action` (pause, resume, cancel, retry, migrate) for the tokens that `where`
        selects now (`status=failed state=review`); a retry enters `state` when given, a
        migration moves to `to` (the served graph when None)."""
        body: dict[str, Any] = {"action": action, "where": where}
        if state is not None:
            body["from"] = state
        if to is not None:
            body["to"] = to
        return self._call("POST", "/plans", body)

    def plan(self, plan: str) -> dict[str, Any]:
        """A plan: its action, filter and tokens, each with its outcome."""
        return self._call("GET", f"/plans/{segment(plan)}")

    def apply_plan(
        self,
        plan: str,
        action: str,
        state: str | None = None,
        limit: int | None = None,
        to: str | None = None,
    ) -> dict[str, Any]:
        """Act on each token of a plan not acted on yet (at most `limit`), once; `action`,
        `state` and `to` must be those the plan was made with."""
        body: dict[str, Any] = {"action": action}
        if state is not None:
            body["from"] = state
        if to is not None:
            body["to"] = to
        if limit is not None:
            body["limit"] = limit
        return self._call("POST", f"/plans/{segment(plan)}/apply", body)

    # tasks and the workflow

    def report(
        self,
        task: int,
        event: str,
        payload: dict[str, Any] | None = None,
        *,
        attempt: int | None = None,
    ) -> dict[str, Any]:
        """Report the event that ends a waiting task; `attempt` guards against a stale report."""
        body: dict[str, Any] = {"kind": "event", "event": event}
        if payload is not None:
            body["payload"] = payload
        if attempt is not None:
            body["attempt"] = attempt
        return self._call("POST", f"/tasks/{segment(task)}/report", body)

    def workflow(self, checksum: str | None = None) -> dict[str, Any]:
        """Return the served graph file, or the older one kept for `checksum`."""
        query = "" if checksum is None else "?" + urlencode({"checksum": checksum})
        return self._call("GET", f"/workflow{query}")

    def workflows(self) -> list[dict[str, Any]]:
        """Return every graph file the database keeps, with its live tokens."""
        return self._rows("/workflows")

    def health(self) -> dict[str, Any]:
        """Return the served workflow's name and its checksum."""
        return self._call("GET", "/health")

    # schedules

    def schedules(self) -> list[dict[str, Any]]:
        """Every schedule, with its next and last occurrences and its last skip."""
        return self._rows("/schedules")

    def add_schedule(self, name: str, cron: str, **options: Any) -> dict[str, Any]:
        """Add a schedule; `options` are `tz`, `context`, `overlap` and `catch_up`."""
        return self._call("POST", "/schedules", {"name": name, "cron": cron, **options})

    def schedule_action(self, name: str, action: str) -> dict[str, Any]:
        """Pause, resume or remove a schedule."""
        return self._call("POST", f"/schedules/{segment(name)}/{action}")

    # resources

    def resources(self) -> list[dict[str, Any]]:
        """Every resource: its slots, rate, paused or not, and its keys in use."""
        return self._rows("/resources")

    def resource_action(self, name: str, action: str, **body: Any) -> dict[str, Any]:
        """Pause or resume a resource, or `set` its `slots`."""
        return self._call("POST", f"/resources/{segment(name)}/{action}", body or None)

    #: Another name of `tokens`.
    list = tokens
