"""The HTTP API of the control plane: a Falcon WSGI app over one engine.

`create_app` routes each path of the route table (`routes.py`) to its resource
(`resources.py`), behind middleware that refuses what no route takes and checks each
request against its route's rule; every refusal leaves through one table of error handlers
as `{"error", "code"}`. The app reaches the server that serves it only through the `Hooks`
it is made with. It decides nothing and checks no values: ranges, patterns and models are
the engine's; it never touches a store or a driver.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import falcon
import msgspec

from stateous.control.errors import EngineError, NotServing
from stateous.control.http import metrics, openapi
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
    signed_by,
    target_host,
)
from stateous.control.http.bodies import raw_body
from stateous.control.http.hooks import PLAIN, Hooks
from stateous.control.http.refusals import engine_refused, failed, falcon_refused
from stateous.control.http.resources import Parts
from stateous.control.http.routing import has_rule, methods_of, paths, rule_of
from stateous.control.http.streams import Streams

if TYPE_CHECKING:
    from stateous.control.engine import Engine

_encode = msgspec.json.Encoder().encode


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
    http = metrics.HttpMetrics(hooks)
    parts = Parts(
        engine=engine,
        hooks=hooks,
        streams=streams,
        access=None if guard is None else guard.access,
        warning=warning,
        http=http,
        deliveries=metrics.Deliveries(),
        described=lambda: _encode(openapi.document()),
    )
    # `Paths` before routing; `Methods` before the guard, which looks up the rule of a
    # method that the path takes.
    middleware = (http, Paths(), Methods())
    app = falcon.App(middleware=middleware if guard is None else (*middleware, guard))
    made: dict[type, object] = {}
    for path, (resource, suffix) in paths().items():
        if resource not in made:
            made[resource] = resource(parts)
        app.add_route(path, made[resource], suffix=suffix)
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
