"""How the API reads a request's body: at most 1 MiB of JSON, an object at most 64 levels
deep, sent as `application/json` (a web page of another site cannot send that type without
a CORS preflight, which is refused), read once so that a signed delivery is checked over
the bytes that are then parsed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypeVar

import falcon
import msgspec

from stateous.control.errors import InvalidBody
from stateous.model.limits import BODY_DEPTH_LIMIT, BODY_LIMIT

TOO_DEEP = f"the body nests more than {BODY_DEPTH_LIMIT} levels"
JSON = "application/json"

_decode = msgspec.json.Decoder().decode

Shape = TypeVar("Shape", bound=msgspec.Struct)


def read_body(req: falcon.Request) -> dict[str, Any]:
    """Return the body as a JSON object (`{}` when empty).

    Every POST and PUT says `Content-Type: application/json`, with a body or without: a
    web page of another site can send a form or a bare body, never that type without
    asking first (a CORS preflight, which is refused). A body that cannot be read (too
    large, not JSON, too deep) is a Falcon 400 or 413; JSON of another shape than an
    object is `InvalidBody`.
    """
    kind = (req.content_type or "").partition(";")[0].strip()
    if kind.lower() != JSON:
        said = f"not {kind!r}" if kind else "even without a body"
        raise falcon.HTTPUnsupportedMediaType(
            description=f"a {req.method} says Content-Type: {JSON}, {said}"
        )
    data = raw_body(req)
    if not data:
        return {}
    try:
        value = _decode(data)
    except msgspec.DecodeError as ex:
        raise falcon.HTTPBadRequest(description=f"the body is not valid JSON: {ex}") from None
    except RecursionError:
        raise falcon.HTTPBadRequest(description=TOO_DEEP) from None
    if type(value) is not dict:
        raise InvalidBody(
            "the body does not have the shape of the request: it is not a JSON object"
        )
    # PERF: a body with no more than BODY_DEPTH_LIMIT brackets cannot nest deeper.
    if data.count(b"{") + data.count(b"[") > BODY_DEPTH_LIMIT and not within_depth(
        value, BODY_DEPTH_LIMIT
    ):
        raise falcon.HTTPBadRequest(description=TOO_DEEP)
    # A NUL can only come escaped; Postgres keeps no text that holds one.
    if b"\\u0000" in data and has_nul(value):
        raise InvalidBody("a text in the body holds the NUL character (\\u0000), which is not kept")
    return value


def raw_body(req: falcon.Request) -> bytes:
    """The bytes of the body, read once: a signed delivery is checked over the same bytes
    that are then parsed."""
    kept: bytes | None = getattr(req.context, "raw", None)
    if kept is not None:
        return kept
    length = req.content_length
    if length and length > BODY_LIMIT:
        raise falcon.HTTPContentTooLarge(
            description=f"the body has {length} bytes; the most is {BODY_LIMIT}"
        )
    data = req.bounded_stream.read() if length else b""
    req.context.raw = data
    return data


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


def has_nul(value: Any) -> bool:
    """Tell whether a text of decoded JSON, a name or a value, holds a NUL character."""
    return any(
        type(text) is str and "\x00" in text
        for node, _ in _containers(value)
        for text in ([*node, *node.values()] if type(node) is dict else node)
    )


def read_shape(req: falcon.Request, shape: type[Shape]) -> Shape:
    """Read the body and convert it into `shape`; a shape mismatch is `InvalidBody`."""
    try:
        return msgspec.convert(read_body(req), shape)
    except msgspec.ValidationError as ex:
        raise InvalidBody(f"the body does not fit the request: {ex}") from None
