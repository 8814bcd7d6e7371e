"""The HTTP API of the control plane: a Falcon WSGI app over one engine.

Each route reads its body (at most 1 MiB, a JSON object at most 64 levels deep),
shapes it into a `wire` Struct, makes one engine call and encodes the answer with
msgspec. Every refusal leaves through one table of error handlers as
`{"error", "code"}`. This module decides nothing and checks no values: ranges,
patterns and models are the engine's; it never touches a store or a driver.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import falcon
import msgspec

from stateous.control import migration, plans, stats
from stateous.control.defaults import DEFAULT_STREAMS
from stateous.control.errors import EngineError, NotServing, TaskNotFound
from stateous.control.http import metrics, openapi, schedule_routes, ui
from stateous.control.http.access import (
    SIGNATURES,
    Access,
    Caller,
    Forbidden,
    Unauthorized,
    allow,
    check_fetch_site,
    check_host,
    check_origin,
    has_rule,
    methods_of,
    rule_of,
    signed_by,
    target_host,
)
from stateous.control.http.bodies import raw_body, read_body, read_shape
from stateous.control.http.exposition import MEDIA_TYPE
from stateous.control.http.graph_layout import layout
from stateous.control.http.hooks import PLAIN, Hooks
from stateous.control.http.refusals import engine_refused, failed, falcon_refused
from stateous.control.http.streams import HEADERS, Streams, last_event_id
from stateous.control.views import brief_answer, delivered
from stateous.control.waiting_claims import COME_BACK
from stateous.control.webhooks import PING
from stateous.model import wire
from stateous.model.limits import INTEGER_LIMIT
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


def for_caller(
    req: falcon.Request, token: wire.TokenView | wire.Duplicate
) -> wire.TokenView | wire.Duplicate | wire.TokenBrief | wire.DuplicateBrief:
    """The answer to a start or a fire: a webhook may not read a token's context, so it is
    answered the token without it."""
    who: Caller | None = getattr(req.context, "caller", None)
    return brief_answer(token) if who is not None and who.role == Role.WEBHOOK else token


class Paths:
    """Falcon middleware: a path that holds an encoded slash (`%2F`) is refused. The server
    decodes it before routing, so `/tokens/A%2Fcancel` would reach `/tokens/A/cancel`; no
    token id, event or file name holds a slash, so none is lost."""

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        path = req.env.get("REQUEST_URI", "").partition("?")[0]
        if "%2f" in path.lower():
            raise falcon.HTTPBadRequest(
                description="the path holds an encoded slash (%2F), which no name of the API holds"
            )


class Methods:
    """Falcon middleware: a method that the path does not take is 405 `method_not_allowed`,
    whatever the method (Falcon itself answers OPTIONS with 200, and a method it does not
    know with 400), so that each route takes exactly the methods of the route table."""

    def process_resource(
        self, req: falcon.Request, resp: falcon.Response, resource: object, params: dict[str, Any]
    ) -> None:
        # Falcon calls this only for a request routed to a resource, which has a template.
        assert req.uri_template is not None
        if not has_rule(req.method, req.uri_template):
            raise falcon.HTTPMethodNotAllowed(methods_of(req.uri_template))


class Guard:
    """Falcon middleware: the browser's limits on every request, then the caller's credential
    against the rule of the route it reached."""

    def __init__(
        self, access: Access, hosts: frozenset[str], origins: frozenset[str] = frozenset()
    ) -> None:
        self.access = access
        self.hosts = hosts
        #: The origins of the proxies in front, whose pages may call (`served_origins`).
        self.origins = origins

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        if req.method == "OPTIONS" and req.get_header("Access-Control-Request-Method"):
            raise Forbidden("this control plane answers no web page of another origin")
        host = req.get_header("Host")
        check_host(host, self.hosts)
        named = target_host(req.env.get("REQUEST_URI", "/"))
        if named is not None:
            check_host(named, self.hosts)
        check_fetch_site(req.method, req.get_header("Sec-Fetch-Site"))
        check_origin(req.get_header("Origin"), host, self.origins)

    def process_resource(
        self, req: falcon.Request, resp: falcon.Response, resource: object, params: dict[str, Any]
    ) -> None:
        assert req.uri_template is not None  # routed, as in `Methods`
        rule = rule_of(req.method, req.uri_template)
        if rule is None:
            return
        signature = next(filter(None, map(req.get_header, SIGNATURES)), None)
        authorization = req.get_header("Authorization")
        who: Caller | None
        if rule.webhook == "hook":
            # Only the named webhook's key is tried, with or without authentication: its
            # settings are on its credential.
            who = self.access.identify_hook(params["name"], raw_body(req), signature)
        elif authorization is None and signature is not None and rule.webhook is not None:
            who = self.access.identify_signed(raw_body(req), signature, rule, params)
            if who is None and self.access.enabled:
                raise Unauthorized("the delivery's signature matches no webhook's key")
        else:
            who = self.access.identify(authorization)
            if (
                who is not None
                and who.hmac_key is not None
                and (signature is None or not signed_by(who.hmac_key, raw_body(req), signature))
            ):
                raise Unauthorized(f"a delivery of {who.name!r} must carry its signature")
        req.context.caller = who
        allow(who, rule, params)


class Resource:
    """A noun of the API, served by one engine.

    Every `on_get*` responder also answers `HEAD` (Falcon then sends the headers
    of the GET answer without its body), as load balancers and uptime checks expect.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        for name, responder in list(vars(cls).items()):
            if name.startswith("on_get"):
                setattr(cls, "on_head" + name.removeprefix("on_get"), responder)


class Health(Resource):
    """`/health`: the served workflow and its checksum, and what guards it (`access`), open
    to every caller, so that a monitor sees a control plane that no credential protects."""

    def __init__(
        self, engine: Engine, warning: str | None = None, access: Access | None = None
    ) -> None:
        super().__init__(engine)
        self.warning = warning
        self.access = access

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

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
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
        resp.data = _encode(openapi.document())


class Figures(Resource):
    """`/stats` and `/metrics`: how the control plane fares, as JSON and for Prometheus."""

    def __init__(
        self, engine: Engine, http: metrics.HttpMetrics, deliveries: metrics.Deliveries
    ) -> None:
        super().__init__(engine)
        self.http = http
        self.deliveries = deliveries

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        answer(resp, stats.stats(self.engine))

    def on_get_metrics(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.content_type = MEDIA_TYPE
        resp.text = metrics.exposition(self.engine, self.http, self.deliveries)


class Tokens(Resource):
    """`/tokens`: start a token, or list tokens."""

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = read_shape(req, wire.StartBody)
        token, created = self.engine.start(body.token, body.context, by=caller(req))
        answer(resp, for_caller(req, token), falcon.HTTP_201 if created else falcon.HTTP_200)

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        page = self.engine.listings.tokens(**query(req, TOKEN_FILTERS))
        answer_page(req, resp, page)


class Token(Resource):
    """`/tokens/{token}`: read one token, fire its events, steer it, move it to another graph."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        self.migrations = migration.Migrations(engine)

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

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        self.plans = plans.Plans(engine)

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

    def __init__(self, engine: Engine, deliveries: metrics.Deliveries) -> None:
        super().__init__(engine)
        self.deliveries = deliveries

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

    def __init__(self, engine: Engine, hooks: Hooks) -> None:
        super().__init__(engine)
        self.hooks = hooks

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

    def __init__(self, engine: Engine, streams: Streams | None, hooks: Hooks) -> None:
        super().__init__(engine)
        self.given = streams
        self.hooks = hooks

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


def create_app(
    engine: Engine,
    guard: Guard | None = None,
    warning: str | None = None,
    streams: Streams | None = None,
    hooks: Hooks = PLAIN,
) -> falcon.App[falcon.Request, falcon.Response]:
    """Build the WSGI app that serves `engine`, behind `guard` when given; `warning` goes
    out with every `/health`; `streams` holds the live streams; `hooks` are what the server
    that serves the app does beyond WSGI (adopt a stream, park a claim)."""
    http, deliveries = metrics.HttpMetrics(hooks), metrics.Deliveries()
    # `Paths` before routing; `Methods` before the guard, which looks up the rule of a
    # method that the path takes.
    middleware = (http, Paths(), Methods())
    app = falcon.App(middleware=middleware if guard is None else (*middleware, guard))
    tokens, token, tasks = Tokens(engine), Token(engine), Tasks(engine, hooks)
    figures = Figures(engine, http, deliveries)
    app.add_route("/health", Health(engine, warning, None if guard is None else guard.access))
    app.add_route("/stats", figures)
    app.add_route("/metrics", figures, suffix="metrics")
    workflow, dashboard = WorkflowFile(engine), Dashboard(engine)
    app.add_route("/workflow", workflow)
    app.add_route("/workflow/layout", workflow, suffix="layout")
    app.add_route("/workflows", workflow, suffix="versions")
    app.add_route("/openapi.json", OpenApi(engine))
    app.add_route("/tokens", tokens)
    app.add_route("/tokens/{token}", token)
    app.add_route("/tokens/{token}/history", token, suffix="history")
    app.add_route("/tokens/{token}/events/{event}", token, suffix="event")
    for action in ("pause", "resume", "cancel", "retry", "migrate"):
        app.add_route(f"/tokens/{{token}}/{action}", token, suffix=action)
    plan_routes = Plans(engine)
    app.add_route("/plans", plan_routes)
    app.add_route("/plans/{plan}", plan_routes, suffix="plan")
    app.add_route("/plans/{plan}/apply", plan_routes, suffix="apply")
    app.add_route("/tasks", tasks)
    app.add_route("/supervisors", Supervisors(engine))
    app.add_route("/ui/", dashboard)
    app.add_route("/ui/{file}", dashboard, suffix="file")
    app.add_route("/stream", Stream(engine, streams, hooks))
    app.add_route("/hooks/{name}", GitHubDeliveries(engine, deliveries))
    schedule_routes.add_routes(app, engine)
    app.add_route("/tasks/claim", tasks, suffix="claim")
    app.add_route("/tasks/heartbeat", tasks, suffix="heartbeat")
    for action in ("report", "note", "memory"):
        app.add_route(f"/tasks/{{task}}/{action}", tasks, suffix=action)
    app.add_error_handler(Exception, failed)
    app.add_error_handler(falcon.HTTPError, falcon_refused)
    app.add_error_handler(EngineError, engine_refused)
    return app


#: What a standby answers to every request, `/health` first.
STANDBY = (
    "this control plane is a standby: it waits for the database, which another control plane serves"
)


def standing_by(req: falcon.Request, resp: falcon.Response, **params: str) -> None:
    """Every path of a standby, with every method: `not_serving`, saying why."""
    raise NotServing(STANDBY)


def create_standby_app() -> falcon.App[falcon.Request, falcon.Response]:
    """Build the WSGI app of a standby: 503 `not_serving` to every request, until it holds
    the database and serves the API instead."""
    app = falcon.App()
    app.add_sink(standing_by)
    app.add_error_handler(Exception, failed)
    app.add_error_handler(EngineError, engine_refused)
    return app
