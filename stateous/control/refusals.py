"""How the API reads a body's JSON and answers a refusal: the depth and NUL checks of a
decoded body, and the error handlers that turn every refusal into `{"error", "code"}`."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import falcon
import msgspec

from stateous.control.errors import EngineError
from stateous.model import wire
from stateous.model.text import printable

#: The sentence of an unexpected failure; only the log gets the traceback.
FAILED = "the request failed on the control plane; its log tells why"

_log = logging.getLogger("stateous.control.api")
_encode = msgspec.json.Encoder().encode


def _containers(value: Any) -> Iterator[tuple[dict[str, Any] | list[Any], int]]:
    """Every object and array of decoded JSON, with its depth (the value's own is 1),
    walked without recursion."""
    pending = [(value, 1)]
    while pending:
        node, depth = pending.pop()
        yield node, depth
        for child in node.values() if type(node) is dict else node:
            if type(child) is dict or type(child) is list:
                pending.append((child, depth + 1))


def within_depth(value: Any, limit: int) -> bool:
    """Tell whether decoded JSON nests at most `limit` levels."""
    return all(depth <= limit for _, depth in _containers(value))


def holds_nul(value: Any) -> bool:
    """Tell whether a text of decoded JSON, a name or a value, holds a NUL character."""
    return any(
        type(text) is str and "\x00" in text
        for node, _ in _containers(value)
        for text in ([*node, *node.values()] if type(node) is dict else node)
    )


def refuse(resp: falcon.Response, status: int, sentence: str, code: str) -> None:
    """Write a refusal: `{"error", "code"}` with its status."""
    resp.status = falcon.code_to_http_status(status)
    resp.data = _encode(wire.ErrorBody(error=sentence, code=code))


def engine_refused(
    req: falcon.Request, resp: falcon.Response, ex: EngineError, params: dict[str, Any]
) -> None:
    """Answer an engine refusal with its own status and code."""
    refuse(resp, ex.status, str(ex), ex.code)


#: The code of a refusal that Falcon itself raises, by its status; others are `bad_request`.
FALCON_CODES = {404: "not_found", 405: "method_not_allowed"}


def falcon_refused(
    req: falcon.Request, resp: falcon.Response, ex: falcon.HTTPError, params: dict[str, Any]
) -> None:
    """Answer a refusal of the HTTP edge: an unknown path or method, an unreadable body."""
    status = ex.status_code
    if ex.description:
        sentence = ex.description
    elif status == 404:
        sentence = f"the API has no path {req.path!r}"
    elif status == 405:
        sentence = f"the path {req.path!r} does not take {req.method}"
    else:
        sentence = f"the request cannot be read: {ex.title}"
    if ex.headers:
        resp.set_headers(ex.headers)
    code = FALCON_CODES.get(status, "bad_request" if status < 500 else "unexpected")
    refuse(resp, status, sentence, code)


def failed(
    req: falcon.Request, resp: falcon.Response, ex: Exception, params: dict[str, Any]
) -> None:
    """Answer any other exception with a fixed sentence; only the log gets the traceback."""
    _log.exception("%s %s failed", req.method, printable(req.path), exc_info=ex)
    refuse(resp, 500, FAILED, "unexpected")
