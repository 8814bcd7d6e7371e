"""The resources of the HTTP API: one class per noun, one responder per route.

Each responder reads its body (at most 1 MiB, a JSON object at most 64 levels deep),
shapes it into a `wire` Struct, makes one engine call and encodes the answer with
msgspec; a refusal is raised, and leaves through the app's error table. Which route
reaches which responder, and who may call it, is the route table's (`routes.py`). Nothing
here decides or checks values: ranges, patterns and models are the engine's; nothing
here touches a store or a driver.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import falcon
import msgspec

from stateous.control import migration, plans, resource_steering, schedules, spending, stats
from stateous.control.defaults import DEFAULT_STREAMS
from stateous.control.errors import TaskNotFound
from stateous.control.http import metrics, ui
from stateous.control.http.access import Access, Caller, Unauthorized
from stateous.control.http.bodies import read_body, read_shape
from stateous.control.http.exposition import MEDIA_TYPE
from stateous.control.http.graph_layout import layout
from stateous.control.http.hooks import Hooks
from stateous.control.http.streams import HEADERS, Streams, last_event_id
from stateous.control.views import brief_answer, delivered
from stateous.control.waiting_claims import COME_BACK
from stateous.control.webhooks import PING
from stateous.model import wire
from stateous.model.limits import INTEGER_LIMIT
from stateous.model.resources import KeyBody, SlotsBody
from stateous.model.schedule import ScheduleBody
from stateous.model.vocabulary import Role

if TYPE_CHECKING:
    from stateous.control.engine import Engine
    from stateous.control.listings import Page

_encode = msgspec.json.Encoder().encode


def task_id(raw: str) -> int:
    """Return the task id of a path part; anything but a whole number names no task."""
    # A longer number is past INTEGER_LIMIT, and past 4,300 digits int() refuses it.
    if raw.isascii() and raw.isdigit() and len(raw) <= len(str(INTEGER_LIMIT)):
        number = int(raw)
        if number <= INTEGER_LIMIT:
            return number
    raise TaskNotFound(f"no task has the id {raw!r}")


def answer(resp: falcon.Response, value: Any, status: str = falcon.HTTP_200) -> None:
    """Encode `value` as the JSON answer."""
    resp.status = status
    resp.data = _encode(value)


#: The query parameters of each listing, besides `limit` and `after`.
TOKEN_FILTERS = ("status", "state", "parent", "checksum", "since", "until")
TASK_FILTERS = ("status", "state", "supervisor", "older_than")


def query(req: falcon.Request, filters: tuple[str, ...]) -> dict[str, str | None]:
    """The values of a listing's query parameters; a parameter not given is None."""
    return {name: req.get_param(name) for name in (*filters, "limit", "after")}


def answer_page(req: falcon.Request, resp: falcon.Response, page: Page[Any]) -> None:
    """Answer a page of a listing; when more rows follow, `Link` names the next page: the
    same query, with `after` set to the page's cursor (RFC 8288)."""
    if page.after is not None:
        same = {name: req.get_param(name) for name in req.params if name != "after"}
        target = f"{req.path}?{urlencode({**same, 'after': page.after})}"
        resp.set_header("Link", f'<{target}>; rel="next"')
    answer(resp, page.rows)


def caller(req: falcon.Request) -> str | None:
    """The name of the credential the request was made with, if any."""
    who: Caller | None = getattr(req.context, "caller", None)
    return None if who is None else who.name


def act_as(req: falcon.Request, supervisor: str | None) -> None:
    """Refuse a task request that the caller's credential may not make as `supervisor`."""
    who: Caller | None = getattr(req.context, "caller", None)
    if who is not None:
        who.act_as(supervisor)


def start_with(req: falcon.Request, body: wire.StartBody) -> None:
    """Refuse a start whose budget or priority the caller's credential may not set."""
    who: Caller | None = getattr(req.context, "caller", None)
    if who is not None:
        who.start_with(body.budget, body.priority)


def for_caller(
    req: falcon.Request, token: wire.TokenView | wire.Duplicate
) -> wire.TokenView | wire.Duplicate | wire.TokenBrief | wire.DuplicateBrief:
    """The answer to a start or a fire: a webhook may not read a token's context, so it is
    answered the token without it."""
    who: Caller | None = getattr(req.context, "caller", None)
    return brief_answer(token) if who is not None and who.role == Role.WEBHOOK else token


@dataclass(frozen=True, slots=True)
class Parts:
    """What the resources of one app serve with: the engine, and what the app was given or
    made beside it."""

    engine: Engine
    #: What the server that serves the app does beyond WSGI.
    hooks: Hooks
    #: The live streams; None: the app keeps its own.
    streams: Streams | None
    #: The guard's credentials (None: no guard), and the warning that `/health` gives.
    access: Access | None
    warning: str | None
    http: metrics.HttpMetrics
    deliveries: metrics.Deliveries
    #: The OpenAPI document, encoded (`openapi.document`).
    described: Callable[[], bytes]


class Resource:
    """A noun of the API, made once per app from its `Parts`.

    Every `on_get*` responder also answers `HEAD` (Falcon then sends the headers
    of the GET answer without its body), as load balancers and uptime checks expect.
    """

    def __init__(self, parts: Parts) -> None:
        self.parts = parts
        self.engine = parts.engine

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        for name, responder in list(vars(cls).items()):
            if name.startswith("on_get"):
                setattr(cls, "on_head" + name.removeprefix("on_get"), responder)


class Health(Resource):
    """`/health`: the served workflow and its checksum, and what guards it (`access`), open
    to every caller, so that a monitor sees a control plane that no credential protects."""

    def __init__(self, parts: Parts) -> None:
        super().__init__(parts)
        self.warning = parts.warning
        self.access = parts.access

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        health = self.engine.health()
        if self.access is not None:
            health.auth = self.access.state
            health.warning = self.access.warning
        if self.warning is not None:
            health.warning = self.warning
        answer(resp, health)


class WorkflowFile(Resource):
    """`/workflow`: the graph file, as it is (an older one by `?checksum=`); `/workflows`:
    every graph file kept, with its live tokens; `/workflow/layout`: the served workflows laid
    out for drawing, worked out at the first request (the graph does not change while
    served)."""

    def __init__(self, parts: Parts) -> None:
        super().__init__(parts)
        self.drawn: bytes | None = None

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.data = self.engine.graphs.file(req.get_param("checksum"))

    def on_get_versions(self, req: falcon.Request, resp: falcon.Response) -> None:
        answer(resp, self.engine.graphs.listing())

    def on_get_layout(self, req: falcon.Request, resp: falcon.Response) -> None:
        if self.drawn is None:
            self.drawn = _encode(layout(self.engine.graph.document))
        resp.data = self.drawn


class Dashboard(Resource):
    """`/ui/` and `/ui/{file}`: the dashboard's files, open to every caller (they hold no
    data); a name that is not one of them is not found."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.on_get_file(req, resp, ui.INDEX)

    def on_get_file(self, req: falcon.Request, resp: falcon.Response, file: str) -> None:
        data = ui.content(file)
        if data is None:
            raise falcon.HTTPNotFound(description=f"the dashboard has no file {file!r}")
        resp.content_type = ui.FILES[file]
        resp.set_headers(ui.HEADERS)
        resp.data = data


class OpenApi(Resource):
    """`/openapi.json`: the API described, for tools."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.data = self.parts.described()


class Figures(Resource):
    """`/stats` and `/metrics`: how the control plane fares, as JSON and for Prometheus."""

    def __init__(self, parts: Parts) -> None:
        super().__init__(parts)
        self.http = parts.http
        self.deliveries = parts.deliveries

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        answer(resp, stats.stats(self.engine))

    def on_get_metrics(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.content_type = MEDIA_TYPE
        resp.text = metrics.exposition(self.engine, self.http, self.deliveries)


class Tokens(Resource):
    """`/tokens`: start a token, or list tokens."""

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = read_shape(req, wire.StartBody)
        start_with(req, body)
        token, created = self.engine.start(
            body.token, body.context, by=caller(req), priority=body.priority, budget=body.budget
        )
        answer(resp, for_caller(req, token), falcon.HTTP_201 if created else falcon.HTTP_200)

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        page = self.engine.listings.tokens(**query(req, TOKEN_FILTERS))
        answer_page(req, resp, page)


class Token(Resource):
    """`/tokens/{token}`: read one token, fire its events, steer it, move it to another graph."""

    def __init__(self, parts: Parts) -> None:
        super().__init__(parts)
        self.migrations = migration.Migrations(parts.engine)

    def on_get(self, req: falcon.Request, resp: falcon.Response, token: str) -> None:
        answer(resp, self.engine.get(token))

    def on_get_history(self, req: falcon.Request, resp: falcon.Response, token: str) -> None:
        answer(resp, self.engine.history(token))

    def on_post_event(
        self, req: falcon.Request, resp: falcon.Response, token: str, event: str
    ) -> None:
        body = read_shape(req, wire.FireBody)
        key = req.get_header("Idempotency-Key")
        if key is None:
            # GitHub names each delivery, and a redelivery by the same name.
            key = req.get_header("X-GitHub-Delivery")
        fired = self.engine.fire(token, event, body.payload, key, by=caller(req))
        answer(resp, for_caller(req, fired))

    def on_post_pause(self, req: falcon.Request, resp: falcon.Response, token: str) -> None:
        read_body(req)
        answer(resp, self.engine.pause(token, by=caller(req)))

    def on_post_resume(self, req: falcon.Request, resp: falcon.Response, token: str) -> None:
        read_body(req)
        answer(resp, self.engine.resume(token, by=caller(req)))

    def on_post_budget(self, req: falcon.Request, resp: falcon.Response, token: str) -> None:
        body = read_shape(req, wire.BudgetBody)
        answer(resp, spending.raise_budget(self.engine, token, body.budget, caller(req)))

    def on_post_cancel(self, req: falcon.Request, resp: falcon.Response, token: str) -> None:
        read_body(req)
        answer(resp, self.engine.cancel(token, by=caller(req)))

    def on_post_retry(self, req: falcon.Request, resp: falcon.Response, token: str) -> None:
        body = read_shape(req, wire.RetryBody)
        answer(resp, self.engine.retry(token, body.state, body.context, by=caller(req)))

    def on_post_migrate(self, req: falcon.Request, resp: falcon.Response, token: str) -> None:
        body = read_shape(req, wire.MigrateBody)
        moved = self.migrations.migrate(token, body.to, dry_run=body.dry_run, by=caller(req))
        answer(resp, moved)


class Plans(Resource):
    """`/plans`: bulk steering over an exact set of tokens, each acted on once (`plans.py`)."""

    def __init__(self, parts: Parts) -> None:
        super().__init__(parts)
        self.plans = plans.Plans(parts.engine)

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = read_shape(req, wire.PlanBody)
        made = self.plans.make(body.action, body.where, body.state, body.to, by=caller(req))
        answer(resp, made, falcon.HTTP_201)

    def on_get_plan(self, req: falcon.Request, resp: falcon.Response, plan: str) -> None:
        answer(resp, self.plans.get(plan))

    def on_post_apply(self, req: falcon.Request, resp: falcon.Response, plan: str) -> None:
        body = read_shape(req, wire.ApplyBody)
        applied = self.plans.apply(
            plan, body.action, body.state, body.to, body.limit, by=caller(req)
        )
        answer(resp, applied)


class GitHubDeliveries(Resource):
    """`/hooks/{name}`: GitHub's deliveries to the webhook `name`, signed with its key (the
    guard checked it). `ping` changes nothing; a kind the webhook does not take is counted
    and kept nowhere; any other starts or moves the token the webhook's mapping names."""

    def __init__(self, parts: Parts) -> None:
        super().__init__(parts)
        self.deliveries = parts.deliveries

    def on_post(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        who: Caller | None = getattr(req.context, "caller", None)
        if who is None or who.hook is None:
            raise Unauthorized(f"no GitHub webhook named {name!r} signed this delivery")
        hook, body = who.hook, read_body(req)
        kind = req.get_header("X-GitHub-Event") or ""
        if kind == PING:
            answer(resp, wire.Pong())
            return
        event = hook.event_for(kind)
        if event is None:
            self.deliveries.ignore(name, kind)
            said = f"the webhook {name!r} does not take {kind!r} deliveries: ignored, kept nowhere"
            answer(resp, wire.Ignored(ignored=kind, webhook=name, reason=said), falcon.HTTP_202)
            return
        token, started = self.engine.deliver(
            hook.token(body),
            event,
            payload=lambda: hook.payload(body),
            context=(lambda: hook.context(body)) if who.may_start else None,
            key=req.get_header("X-GitHub-Delivery"),
            by=name,
        )
        shown = delivered(token, kind, event, started)
        answer(resp, shown, falcon.HTTP_201 if started else falcon.HTTP_200)


class Tasks(Resource):
    """`/tasks`: the live tasks, and what supervisors (and people, for waiting tasks) send
    about work; a claim that waits is parked by the server's `hooks`."""

    def __init__(self, parts: Parts) -> None:
        super().__init__(parts)
        self.hooks = parts.hooks

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        answer_page(req, resp, self.engine.listings.tasks(**query(req, TASK_FILTERS)))

    def on_post_claim(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = read_shape(req, wire.ClaimBody)
        act_as(req, body.supervisor)
        claimed = self.engine.claim_or_wait(
            body.supervisor,
            body.states,
            body.request,
            checksum=body.checksum,
            by=caller(req),
            wait=body.wait,
            waiter=self.hooks.resumed(req.env),
            labels=body.labels,
        )
        grant, waiter = claimed.grant, claimed.waiter
        # The server parks a claim that waits out of the request threads (`parked_claims.py`),
        # and serves it again, with its waiter, once it is woken or its wait ends.
        if (
            grant is None
            and waiter is not None
            and waiter.may_wait()
            and self.hooks.park(req.env, waiter)
        ):
            req.context.parked = True
            return
        if waiter is not None:
            waiter.leave()
        if grant is not None:
            answer(resp, grant)
            return
        resp.status = falcon.HTTP_204
        if claimed.turned_away:
            # No room to wait: the claims that wait take new tasks at once meanwhile.
            resp.set_header("Retry-After", str(COME_BACK))

    def on_post_heartbeat(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = read_shape(req, wire.HeartbeatBody)
        act_as(req, body.supervisor)
        answer(resp, wire.Lost(lost=self.engine.heartbeat(body.supervisor, body.tasks)))

    def on_post_report(self, req: falcon.Request, resp: falcon.Response, task: str) -> None:
        number = task_id(task)
        body = read_shape(req, wire.ReportBody)
        act_as(req, body.supervisor)
        answer(resp, self.engine.report(number, body, by=caller(req)))

    def on_post_note(self, req: falcon.Request, resp: falcon.Response, task: str) -> None:
        number = task_id(task)
        body = read_shape(req, wire.NoteBody)
        act_as(req, body.supervisor)
        self.engine.note(
            number, body.text, body.attempt, supervisor=body.supervisor, by=caller(req)
        )
        resp.status = falcon.HTTP_204

    def on_post_spend(self, req: falcon.Request, resp: falcon.Response, task: str) -> None:
        number = task_id(task)
        body = read_shape(req, wire.SpendBody)
        act_as(req, body.supervisor)
        if spending.spend(self.engine, number, body, caller(req)):
            resp.status = falcon.HTTP_204
        else:
            answer(resp, wire.SpendDuplicate())

    def on_put_memory(self, req: falcon.Request, resp: falcon.Response, task: str) -> None:
        number = task_id(task)
        body = read_shape(req, wire.MemoryBody)
        act_as(req, body.supervisor)
        self.engine.memory(
            number, body.key, body.value, body.attempt, supervisor=body.supervisor, by=caller(req)
        )
        resp.status = falcon.HTTP_204


class Supervisors(Resource):
    """`/supervisors`: the supervisors seen in the last day, and the tasks they hold."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        answer_page(req, resp, self.engine.listings.supervisors(**query(req, ())))


class Stream(Resource):
    """`/stream`: ledger entries as they commit, as server-sent events (`streams.py`), on
    the socket that the server's `hooks` adopt."""

    def __init__(self, parts: Parts) -> None:
        super().__init__(parts)
        self.given = parts.streams
        self.hooks = parts.hooks

    @functools.cached_property
    def streams(self) -> Streams:
        """The control plane's streams; an app made without them keeps its own."""
        return self.given or Streams(self.engine.store, DEFAULT_STREAMS)

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        token = req.get_param("token")
        last = last_event_id(req.get_header("Last-Event-ID"))
        if token is not None:
            self.engine.get(token)
        resp.content_type = "text/event-stream"
        resp.set_headers(HEADERS)
        if req.method != "HEAD":
            adopt = functools.partial(self.hooks.adopt, req.env)
            resp.stream = self.streams.open(token, last, adopt, caller(req))


class Schedules(Resource):
    """`/schedules` and `/schedules/{name}/pause|resume|remove`: each responder makes one
    call of `stateous.control.schedules` and answers with its view."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        answer(resp, schedules.views(self.engine))

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = read_shape(req, ScheduleBody)
        answer(resp, schedules.add(self.engine, body, caller(req)), falcon.HTTP_201)

    def on_post_pause(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        read_body(req)
        answer(resp, schedules.pause(self.engine, name))

    def on_post_resume(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        read_body(req)
        answer(resp, schedules.resume(self.engine, name))

    def on_post_remove(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        read_body(req)
        answer(resp, schedules.remove(self.engine, name))


class Limits(Resource):
    """`/resources` and `/resources/{name}/pause|resume|set`: each responder makes one call of
    `stateous.control.resource_steering` and answers with its view (named `Limits`: every
    class here is a resource of the API)."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        answer(resp, resource_steering.views(self.engine))

    def on_post_pause(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        read_body(req)
        answer(resp, resource_steering.pause(self.engine, name, caller(req)))

    def on_post_resume(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        read_body(req)
        answer(resp, resource_steering.resume(self.engine, name, caller(req)))

    def on_post_set(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        body = read_shape(req, SlotsBody)
        answer(resp, resource_steering.set_slots(self.engine, name, body.slots, caller(req)))

    def on_post_open(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        body = read_shape(req, KeyBody)
        answer(resp, resource_steering.open_key(self.engine, name, body.key, caller(req)))
