"""One kept-alive HTTP connection to a control plane, speaking JSON.

The client, the token commands and the supervisor all talk to the control plane
through this: the standard library's `http.client` and `json` (importing msgspec would
cost every command's start some 8 ms), and the API's refusals (`{"error", "code"}`)
turned into exceptions. It retries nothing itself, except reopening a kept-alive
connection that the server had closed, and sending a request to the next of several
control planes (`urls.py`) when the one it went to could not be reached or answered
`not_serving`: in both cases nothing was done with it. An `https://` URL is verified
with the CA file of its `Access`, else with the system's store; every request carries
the access's secret, if it has one.
"""

from __future__ import annotations

import functools
import http.client
import json
import re
import socket
import ssl
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from stateous.client.errors import (
    BadSetting,
    ClientError,
    NotFound,
    NotServing,
    Refused,
    Unreachable,
    Unverified,
    redacted,
)
from stateous.client.urls import Urls
from stateous.model.codes import RefusalCode

if TYPE_CHECKING:
    from stateous.client.access import Access

__all__ = [
    "BadSetting",
    "ClientError",
    "Connection",
    "NotFound",
    "NotServing",
    "Refused",
    "Unreachable",
    "Unverified",
    "segment",
]


def segment(value: str | int) -> str:
    """Quote one part of a path, so an id with odd characters stays one part."""
    return quote(str(value), safe="")


def silent(url: str, seconds: float) -> str:
    """Say that the control plane kept silent for the whole timeout."""
    if seconds == 1:
        return f"the control plane at {url} did not answer within 1 second"
    shown = str(int(seconds)) if float(seconds).is_integer() else repr(float(seconds))
    return f"the control plane at {url} did not answer within {shown} seconds"


#: The longest pause that a `Retry-After` of a control plane is followed for, in seconds.
LONGEST_RETRY_AFTER = 30.0
#: The parts of an OpenSSL message that say nothing to a person: `[SSL: CODE] ` and `(_ssl.c:1006)`.
_SSL_NOISE = re.compile(r"^\[[^\]]*\]\s*|\s*\(_ssl\.c:\d+\)$")


def tls_trouble(url: str, error: ssl.SSLError) -> ClientError:
    """Word a failed TLS handshake: a certificate that did not pass, or another TLS failure."""
    if isinstance(error, ssl.SSLCertVerificationError):
        reason = str(error.verify_message or error.reason or "").rstrip(".")
        return Unverified(
            f"the control plane at {url} could not be verified: certificate verify failed: {reason}"
        )
    reason = _SSL_NOISE.sub("", str(error.strerror or error)) or type(error).__name__
    return Unreachable(f"cannot reach the control plane at {url} (TLS: {reason})")


@functools.cache
def system_tls() -> ssl.SSLContext:
    """The TLS context of the system's CA store, loaded once for every connection."""
    return ssl.create_default_context()


def _encode(body: Any) -> bytes:
    """A request's body as compact JSON; NaN and infinity are refused, as JSON has neither.

    Every character beyond ASCII is escaped, so that text which is no Unicode (half of a
    UTF-16 pair, `\\ud800`, read from JSON) still goes, and the control plane refuses it
    as any other bad JSON.
    """
    return json.dumps(body, separators=(",", ":"), allow_nan=False).encode("ascii")


class _NotSent(Exception):
    """No connection could be opened, so the request was not sent; `error` says why."""

    def __init__(self, error: ClientError) -> None:
        super().__init__(str(error))
        self.error = error


def _unreachable(url: str, ex: OSError | http.client.HTTPException) -> Unreachable:
    """Word a connection that failed for another reason than a timeout or TLS."""
    reason = (
        ex.strerror if isinstance(ex, OSError) and ex.strerror else str(ex) or type(ex).__name__
    )
    return Unreachable(f"cannot reach the control plane at {url} ({reason})")


def retry_after(header: str | None) -> float | None:
    """The seconds of a `Retry-After` header in whole seconds, bounded; None for none, or
    for a date (the control plane sends seconds)."""
    if header is None or not header.strip().isdigit():
        return None
    return min(float(header.strip()), LONGEST_RETRY_AFTER)


class Connection:
    """A kept-alive connection to a control plane; not for several threads at once.

    `urls` is one URL, several (a list, or a string with commas), or a `Urls` that
    other connections share. `timeout` is how many seconds it waits to connect, and
    then for each part of an answer; a control plane that stays silent longer raises
    `Unreachable`. `access` holds the secret to send and the TLS context to verify with.
    """

    def __init__(
        self,
        urls: str | Sequence[str] | Urls,
        timeout: float = 30.0,
        *,
        access: Access | None = None,
    ) -> None:
        self.urls = urls if isinstance(urls, Urls) else Urls(urls)
        self.timeout = timeout
        self._tls = access.tls if access is not None else None
        self._token = access.token if access is not None else None
        self._connection: http.client.HTTPConnection | None = None
        #: The URL that the open connection goes to.
        self._at = self.urls.current
        #: The seconds that the last answer asked to wait before the next request
        #: (`Retry-After`, in whole seconds, at most `LONGEST_RETRY_AFTER`), or None.
        self.retry_after: float | None = None
        #: The `Link` header of the last answer (a listing's next page), or None.
        self.link: str | None = None

    @property
    def url(self) -> str:
        """The URL that requests go to now."""
        return self.urls.current

    def _open(
        self, url: str | None = None, timeout: float | None = None
    ) -> http.client.HTTPConnection:
        """Connect to `url` (by default `self._at`); raise `_NotSent` when that fails."""
        url = self._at if url is None else url
        timeout = self.timeout if timeout is None else timeout
        parts = urlsplit(url)
        assert parts.hostname is not None
        connection: http.client.HTTPConnection
        if parts.scheme == "https":
            context = self._tls or system_tls()
            connection = http.client.HTTPSConnection(
                parts.hostname, parts.port, timeout=timeout, context=context
            )
        else:
            connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
        try:
            connection.connect()
        except TimeoutError:
            connection.close()
            raise _NotSent(Unreachable(silent(url, timeout))) from None
        except ssl.SSLError as ex:
            connection.close()
            raise _NotSent(tls_trouble(url, ex)) from None
        except OSError as ex:
            connection.close()
            raise _NotSent(_unreachable(url, ex)) from None
        connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return connection

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        """Send one request; return (status, JSON answer or None), or raise a ClientError.

        A request that could not be sent, or that was answered `not_serving`, goes to
        the next URL, each URL once; after any other failure the next request goes to
        the next URL. The error of the last URL tried is raised.
        """
        data = b"" if body is None else self._encoded(body)
        sent = {"Content-Type": "application/json", **(headers or {})}
        if self._token is not None:
            sent["Authorization"] = self._token.header()
        for left in range(len(self.urls) - 1, -1, -1):
            url = self.urls.current
            if url != self._at:
                self.close()
                self._at = url
            try:
                return self._answer(*self._send(method, path, data, sent))
            except _NotSent as ex:
                if not left:
                    raise ex.error from None
            except NotServing:
                if not left:
                    raise
            except Unreachable:
                self.urls.move_from(url)
                raise
            self.urls.move_from(url)
        raise AssertionError("unreachable: the last URL raises")

    def open_stream(
        self, path: str, headers: dict[str, str], timeout: float
    ) -> http.client.HTTPResponse:
        """Send a GET whose answer is a stream, on a connection of its own that waits
        `timeout` seconds for each read; return the answer once it is 200. A refusal
        raises as `call` raises it; a URL that fails makes the next try go to the next."""
        url = self.urls.current
        sent = {"Accept": "text/event-stream", **headers}
        if self._token is not None:
            sent["Authorization"] = self._token.header()
        try:
            connection = self._open(url, timeout)
        except _NotSent as ex:
            self.urls.move_from(url)
            raise ex.error from None
        try:
            connection.request("GET", urlsplit(url).path.rstrip("/") + path, headers=sent)
            response = connection.getresponse()
            if response.status != 200:
                self._answer(response, response.read())
                raise Unreachable(f"the control plane at {url} answered {response.status}")
        except (OSError, http.client.HTTPException) as ex:
            connection.close()
            self.urls.move_from(url)
            raise _unreachable(url, ex) from None
        except ClientError:
            connection.close()
            self.urls.move_from(url)
            raise
        return response

    def _send(
        self, method: str, path: str, data: bytes, sent: dict[str, str]
    ) -> tuple[http.client.HTTPResponse, bytes]:
        """Send one request to `self._at`; return its response and its raw body."""
        url, prefix = self._at, urlsplit(self._at).path.rstrip("/")
        for fresh in (False, True):
            try:
                if self._connection is None or fresh:
                    self.close()
                    self._connection = self._open()
                self._connection.request(method, prefix + path, data, sent)
                response = self._connection.getresponse()
                raw = response.read()
                break
            except (
                http.client.RemoteDisconnected,
                ConnectionResetError,
                BrokenPipeError,
                ssl.SSLEOFError,
            ):
                self.close()
                if fresh:
                    raise Unreachable(f"the control plane at {url} closed the connection") from None
            except TimeoutError:
                self.close()
                raise Unreachable(silent(url, self.timeout)) from None
            except ssl.SSLError as ex:
                self.close()
                raise tls_trouble(url, ex) from None
            except (OSError, http.client.HTTPException) as ex:
                self.close()
                raise _unreachable(url, ex) from None
        if response.will_close:
            self.close()
        return response, raw

    def _encoded(self, body: Any) -> bytes:
        """A request's body as JSON, written by the standard library: a command that
        imports no more starts sooner."""
        return _encode(body)

    def _decoded(self, raw: bytes) -> Any:
        """An answer's JSON read; a ValueError when it is none."""
        return json.loads(raw)

    def _answer(self, response: http.client.HTTPResponse, raw: bytes) -> tuple[int, Any]:
        """The status and decoded JSON of an answer; a refusal raised as its exception."""
        self.retry_after = retry_after(response.getheader("Retry-After"))
        self.link = response.getheader("Link")
        answer = None
        if raw:
            try:
                answer = self._decoded(raw)
            except ValueError:
                answer = raw.decode("utf-8", "replace")
        if response.status >= 400:
            message, code = f"HTTP {response.status}", None
            if isinstance(answer, dict):
                message = redacted(str(answer.get("error", message)))
                code = answer.get("code")
            kind = NotFound if response.status == 404 else Refused
            if code == RefusalCode.NOT_SERVING:
                kind = NotServing
            raise kind(response.status, message, code)
        return response.status, answer

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
