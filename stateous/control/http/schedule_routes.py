"""`/schedules`: list the schedules, add one, pause, resume or remove one, over HTTP.

Each responder makes one call of `stateous.control.schedules` and answers with its view;
the refusals leave through the API's error table like every other route's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import falcon
import msgspec

from stateous.control import schedules
from stateous.control.http.bodies import read_body, read_shape
from stateous.model.schedule import ScheduleBody

if TYPE_CHECKING:
    from stateous.control.engine import Engine

_encode = msgspec.json.Encoder().encode


def _answer(resp: falcon.Response, value: Any, status: str = falcon.HTTP_200) -> None:
    resp.status = status
    resp.data = _encode(value)


class Schedules:
    """`/schedules` and `/schedules/{name}/pause|resume|remove`."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        _answer(resp, schedules.views(self.engine))

    on_head = on_get

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = read_shape(req, ScheduleBody)
        who = getattr(req.context, "caller", None)
        added = schedules.add(self.engine, body, None if who is None else who.name)
        _answer(resp, added, falcon.HTTP_201)

    def on_post_pause(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        read_body(req)
        _answer(resp, schedules.pause(self.engine, name))

    def on_post_resume(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        read_body(req)
        _answer(resp, schedules.resume(self.engine, name))

    def on_post_remove(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        read_body(req)
        _answer(resp, schedules.remove(self.engine, name))


def add_routes(app: falcon.App[falcon.Request, falcon.Response], engine: Engine) -> None:
    """Route `/schedules` and its verbs to one resource."""
    resource = Schedules(engine)
    app.add_route("/schedules", resource)
    for action in ("pause", "resume", "remove"):
        app.add_route(f"/schedules/{{name}}/{action}", resource, suffix=action)
