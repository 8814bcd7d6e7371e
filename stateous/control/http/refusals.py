"""How the API answers a refusal: the error handlers that turn every refusal, the engine's,
Falcon's and an unexpected failure, into `{"error", "code"}`."""

from __future__ import annotations

import logging
from typing import Any

import falcon
import msgspec

from stateous.control.errors import EngineError
from stateous.model import wire
from stateous.model.codes import RefusalCode
from stateous.model.text import printable

#: The sentence of an unexpected failure; only the log gets the traceback.
FAILED = "the request failed on the control plane; its log tells why"

_log = logging.getLogger("stateous.control.api")
_encode = msgspec.json.Encoder().encode


def refuse(resp: falcon.Response, status: int, sentence: str, code: RefusalCode) -> None:
    """Write a refusal: `{"error", "code"}` with its status."""
    resp.status = falcon.code_to_http_status(status)
    resp.data = _encode(wire.ErrorBody(error=sentence, code=code))


def engine_refused(
    req: falcon.Request, resp: falcon.Response, ex: EngineError, params: dict[str, Any]
) -> None:
    """Answer an engine refusal with its own status and code."""
    refuse(resp, ex.status, str(ex), ex.code)


#: The code of a refusal that Falcon itself raises, by its status; others are `bad_request`.
FALCON_CODES = {404: RefusalCode.NOT_FOUND, 405: RefusalCode.METHOD_NOT_ALLOWED}


def falcon_refused(
    req: falcon.Request, resp: falcon.Response, ex: falcon.HTTPError, params: dict[str, Any]
) -> None:
    """Answer a refusal of the HTTP server: an unknown path or method, an unreadable body."""
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
    fallback = RefusalCode.BAD_REQUEST if status < 500 else RefusalCode.UNEXPECTED
    code = FALCON_CODES.get(status, fallback)
    refuse(resp, status, sentence, code)


def failed(
    req: falcon.Request, resp: falcon.Response, ex: Exception, params: dict[str, Any]
) -> None:
    """Answer any other exception with a fixed sentence; only the log gets the traceback."""
    _log.exception("%s %s failed", req.method, printable(req.path), exc_info=ex)
    refuse(resp, 500, FAILED, RefusalCode.UNEXPECTED)
