"""What the supervisor takes from the control plane: answers bounded in size and time, then typed.

A control plane can be wrong, old, or something else that answers on its port, so
no answer is trusted as it comes. Each one must arrive whole within
`ANSWER_SECONDS` of its request, or the connection is closed and the control plane
counts as not answering; it must be at most `ANSWER_LIMIT` bytes long and nest at
most `ANSWER_DEPTH_LIMIT` levels; a refusal must carry a code; and what the supervisor acts
on (a grant, the lost tasks of a heartbeat, /health) is decoded into the `wire`
types with their bounds. Anything else raises `BadAnswer`, one sentence that names
the request and says what was wrong.
"""

from __future__ import annotations

import contextlib
import http.client
import io
import socket
import time
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec

from stateous.client.http import Connection, Refused, Unreachable
from stateous.model.graph_file import GraphFile, GraphFileError, from_document
from stateous.model.limits import ANSWER_DEPTH_LIMIT, ANSWER_LIMIT, MIB
from stateous.model.wire import ErrorBody, Grant, Health, Lost

#: Seconds from a request to the last byte of its answer, as long as the client's own
#: wait for a silent control plane.
ANSWER_SECONDS = 30.0
TOO_DEEP = f"the answer nests more than {ANSWER_DEPTH_LIMIT} levels"
TOO_LONG = f"the answer is longer than {ANSWER_LIMIT // MIB} MiB"
#: The bytes read from the socket at a time while an answer's length is counted.
_PIECE = 64 * 1024
#: http.client's bounds on an answer's head: the longest line, and the most header lines.
_LINE = 65536
_HEADERS = 100

Shape = TypeVar("Shape")


class BadAnswer(Exception):
    """An answer of the control plane that the supervisor cannot use."""

    def __init__(self, reason: str, request: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.request = request

    def __str__(self) -> str:
        return f"a bad answer from the control plane to {self.request}: {self.reason}"


class _TooLong(Exception):
    """An answer past the limit; no OSError, so the client does not call it a lost connection."""


class _TooSlow(Exception):
    """An answer that did not arrive whole in time."""


class _Timed(io.RawIOBase):
    """The socket under one answer: each read waits at most for the time the answer has left.

    It reads through `raw`, the socket's file that http.client made for the answer (which
    keeps the socket open until the answer is read, even after the connection closed)."""

    def __init__(self, raw: io.RawIOBase, sock: socket.socket, seconds: float) -> None:
        super().__init__()
        self._sock = sock
        self._raw = raw
        self._timeout = sock.gettimeout()
        self._deadline = time.monotonic() + seconds

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise _TooSlow
        self._sock.settimeout(left if self._timeout is None else min(left, self._timeout))
        try:
            return self._raw.readinto(buffer)
        except TimeoutError:
            if time.monotonic() >= self._deadline:
                raise _TooSlow from None
            raise
        finally:
            with contextlib.suppress(OSError):
                self._sock.settimeout(self._timeout)

    def close(self) -> None:
        self._raw.close()
        super().close()


class _Answer(http.client.HTTPResponse):
    """An HTTP answer read against its deadline, and refused past the length limit."""

    def __init__(self, sock: socket.socket, *args: Any, **kwargs: Any) -> None:
        super().__init__(sock, *args, **kwargs)
        # The file under http.client's own buffer, taken from it rather than made anew: each
        # answer's second file of the socket, and the first one's closing, cost some 15,000
        # instructions.
        self.fp = io.BufferedReader(_Timed(self.fp.detach(), sock, ANSWER_SECONDS))

    def begin(self) -> None:
        """Read the status line and the headers as http.client does, within its bounds, but
        not through the `email` package's parser, which cost the supervisor a tenth of its
        instructions per task; refuse an announced length past the limit."""
        version, status, reason = _status(self.fp)
        while status == http.client.CONTINUE:
            _headers(self.fp)
            version, status, reason = _status(self.fp)
        self.code = self.status = status
        self.reason = reason
        self.version = 10 if version == "HTTP/1.0" else 11
        self.headers = self.msg = _headers(self.fp)
        coding = self.headers.get("transfer-encoding", "")
        self.chunked = coding.lower() == "chunked"
        self.chunk_left = None
        kept = self.headers.get("connection", "").lower()
        if self.version == 11:
            self.will_close = "close" in kept
        else:
            self.will_close = "keep-alive" not in kept and "keep-alive" not in self.headers
        length = self.headers.get("content-length", "").strip()
        self.length = int(length) if length.isdecimal() and not self.chunked else None
        if status in (http.client.NO_CONTENT, http.client.NOT_MODIFIED) or status < 200:
            self.length = 0
        if self.length is None and not self.chunked:
            self.will_close = True
        if self.length is not None and self.length > ANSWER_LIMIT:
            raise _TooLong

    def read(self, amt: int | None = None) -> bytes:
        if amt is not None:
            return super().read(amt)
        pieces, size = [], 0
        while piece := super().read(_PIECE):
            size += len(piece)
            if size > ANSWER_LIMIT:
                raise _TooLong
            pieces.append(piece)
        if self.length:
            # http.client returns a body cut short by a closed connection as if it were
            # whole; it is a lost answer (the request is sent again as it was), not a bad one.
            raise http.client.IncompleteRead(b"".join(pieces), self.length)
        return b"".join(pieces)


def _status(fp: io.BufferedReader) -> tuple[str, int, str]:
    """The version, status and reason of an answer's status line."""
    line = fp.readline(_LINE + 1)
    if not line:
        raise http.client.RemoteDisconnected("Remote end closed connection without response")
    if len(line) > _LINE:
        raise http.client.LineTooLong("status line")
    text = line.decode("iso-8859-1")
    version, _, rest = text.strip().partition(" ")
    status, _, reason = rest.partition(" ")
    # Of the characters of ISO-8859-1, only ASCII's digits are decimal.
    if not (version.startswith("HTTP/1.") and status.isdecimal() and 100 <= int(status) <= 999):
        raise http.client.BadStatusLine(text.strip())
    return version, int(status), reason.strip()


def _headers(fp: io.BufferedReader) -> http.client.HTTPMessage:
    """The header lines of an answer, up to the empty line that ends them."""
    headers = http.client.HTTPMessage()
    for count in range(_HEADERS + 1):
        line = fp.readline(_LINE + 1)
        if len(line) > _LINE:
            raise http.client.LineTooLong("header line")
        if line in (b"\r\n", b"\n", b""):
            return headers
        name, colon, value = line.decode("iso-8859-1").partition(":")
        if not colon or count == _HEADERS:
            break
        headers[name] = value.strip()
    raise http.client.HTTPException("the answer's headers are malformed or too many")


def within_depth(value: Any, limit: int = ANSWER_DEPTH_LIMIT) -> bool:
    """Tell whether decoded JSON nests at most `limit` levels (the value's own is 1)."""
    pending = [(value, 1)]
    while pending:
        node, depth = pending.pop()
        if type(node) is not dict and type(node) is not list:
            continue
        if depth > limit:
            return False
        children = node.values() if type(node) is dict else node
        pending.extend((child, depth + 1) for child in children)
    return True


def _coded(refusal: Refused) -> bool:
    """Tell whether a refusal is the control plane's: a sentence and a stable code."""
    try:
        msgspec.convert({"error": refusal.message, "code": refusal.code}, ErrorBody)
    except msgspec.ValidationError:
        return False
    return True


#: Why a request of a stopping supervisor was not sent.
CUT = "the request was cut by the stop"


class BoundedConnection(Connection):
    """A connection to the control plane whose answers are bounded and checked."""

    #: Set by `abort`: no request is sent again on this connection.
    cut = False
    #: The connection opened last, which `abort` cuts: it is kept before `cut` is read
    #: again, so a stop that comes while it connects is seen by one side or the other.
    _opened: http.client.HTTPConnection | None = None

    def _open(
        self, url: str | None = None, timeout: float | None = None
    ) -> http.client.HTTPConnection:
        if self.cut:
            raise Unreachable(CUT)
        connection = super()._open(url, timeout)
        connection.response_class = _Answer
        self._opened = connection
        if self.cut:
            connection.close()
            raise Unreachable(CUT)
        return connection

    def _bounded(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        """Send one request; return (status, answer) within the limits, or raise."""
        try:
            status, answer = self.call(method, path, body)
        except _TooSlow:
            self.close()
            raise Unreachable(
                f"the control plane at {self.url} did not send its whole answer within "
                f"{ANSWER_SECONDS:g} seconds"
            ) from None
        except _TooLong:
            self.close()
            raise BadAnswer(TOO_LONG) from None
        except RecursionError:
            self.close()
            raise BadAnswer(TOO_DEEP) from None
        except Refused as ex:
            if not _coded(ex):
                raise BadAnswer(f"a refusal without a code (HTTP {ex.status})") from None
            raise
        if not within_depth(answer):
            raise BadAnswer(TOO_DEEP)
        return status, answer

    def _encoded(self, body: Any) -> bytes:
        """A request's body, by msgspec, which writes JSON seven times faster than `json`.
        Every value the supervisor sends was read by msgspec before (from the outbox, the
        graph, `stateous.yaml`), so none holds what JSON has no word for (NaN, half of a
        UTF-16 pair), which `json` would refuse or escape."""
        return msgspec.json.encode(body)

    def _decoded(self, raw: bytes) -> Any:
        """An answer's JSON read by msgspec, three times faster than `json`."""
        return msgspec.json.decode(raw)

    def abort(self) -> None:
        """Cut the request in flight, from another thread: a claim that waits ends at once
        (`Unreachable`), and its answer is not read."""
        self.cut = True
        link = self._opened
        if link is not None and link.sock is not None:
            with contextlib.suppress(OSError):
                link.sock.shutdown(socket.SHUT_RDWR)

    def ask(
        self,
        method: str,
        path: str,
        body: Any = None,
        read: Callable[[int, Any], Any] | None = None,
    ) -> Any:
        """Send one request; return its answer as `read` makes it of (status, answer).

        Raise `Unreachable` and `Refused` as the client does, and `BadAnswer`, naming
        the request, for an answer that does not fit.
        """
        try:
            status, answer = self._bounded(method, path, body)
            return (status, answer) if read is None else read(status, answer)
        except BadAnswer as ex:
            ex.request = f"{method} {path}"
            raise


def _typed(answer: Any, shape: type[Shape]) -> Shape:
    try:
        return msgspec.convert(answer, shape)
    except msgspec.ValidationError as ex:
        raise BadAnswer(str(ex)) from None


def read_grant(status: int, answer: Any) -> Grant | None:
    """A claim's answer: None for no task (204), else a grant that fits the wire type."""
    return None if status == 204 else _typed(answer, Grant)


class _Granted(msgspec.Struct):
    """What the supervisor acts on in the answer of a report that asked `next`: its grant
    (absent from the answer of a control plane that does not know `next`: none)."""

    grant: Grant | None = None


def read_next(status: int, answer: Any) -> Grant | None:
    """The grant in the answer of a report that asked `next`; None for none."""
    return _typed(answer, _Granted).grant


def read_lost(status: int, answer: Any) -> list[int]:
    """A heartbeat's answer: the tasks that the supervisor no longer holds."""
    return _typed(answer, Lost).lost


def read_health(status: int, answer: Any) -> Health:
    """The answer of /health: the served workflow and its checksum."""
    try:
        return msgspec.convert(answer, Health)
    except msgspec.ValidationError:
        raise BadAnswer("its /health has no workflow and checksum") from None


def read_graph(status: int, answer: Any) -> GraphFile:
    """The answer of GET /workflow: the graph file that the control plane serves."""
    try:
        return from_document(answer)
    except GraphFileError as ex:
        raise BadAnswer(f"its /workflow is not a graph file: {ex}") from None
