"""One kept-alive HTTP connection to a control plane, speaking JSON.

The client, the token commands and the supervisor all talk to the control plane
through this: the standard library's `http.client`, msgspec for JSON, and the
API's refusals (`{"error", "code"}`) turned into exceptions. It retries nothing
itself, except reopening a kept-alive connection that the server had closed.
An `https://` URL is verified with the CA file of its `Access`, else with the
system's store; every request carries the access's secret, if it has one.
"""

from __future__ import annotations

import functools
import http.client
import re
import socket
import ssl
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

import msgspec

if TYPE_CHECKING:
    from stateous.client.access import Access


class ClientError(Exception):
    """A call to the control plane failed."""


class BadSetting(ClientError):
    """A token file, a secret or a CA file cannot be used; the sentence names it."""


class Unreachable(ClientError):
    """The control plane did not answer: no connection, a timeout, a dropped answer."""


class Unverified(Unreachable):
    """The control plane's certificate did not pass: no trusted CA signed it, or another host's.

    It is a kind of `Unreachable`, so a supervisor tries again as it does when the
    control plane is down: the certificate may be put right meanwhile.
    """


class Refused(ClientError):
    """The control plane answered with a refusal; programs read `code`, people `message`."""

    def __init__(self, status: int, message: str, code: str | None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code


class NotFound(Refused):
    """A refusal with the status 404: no such token, task or path."""


def segment(value: str | int) -> str:
    """Quote one part of a path, so an id with odd characters stays one part."""
    return quote(str(value), safe="")


def silent(url: str, seconds: float) -> str:
    """Say that the control plane kept silent for the whole timeout."""
    if seconds == 1:
        return f"the control plane at {url} did not answer within 1 second"
    shown = str(int(seconds)) if float(seconds).is_integer() else repr(float(seconds))
    return f"the control plane at {url} did not answer within {shown} seconds"


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


_decode = msgspec.json.decode
_encode = msgspec.json.encode


class Connection:
    """A kept-alive connection to one control plane; not for several threads at once.

    `timeout` is how many seconds it waits to connect, and then for each part of
    an answer; a control plane that stays silent longer raises `Unreachable`.
    `access` holds the secret to send and the TLS context to verify with.
    """

    def __init__(self, url: str, timeout: float = 30.0, *, access: Access | None = None) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ClientError(f"{url!r} is not an http:// or https:// URL")
        self.url = url.rstrip("/")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        self._prefix = parts.path.rstrip("/")
        self.timeout = timeout
        self._tls = access.tls if access is not None else None
        self._token = access.token if access is not None else None
        self._connection: http.client.HTTPConnection | None = None

    def _open(self) -> http.client.HTTPConnection:
        connection: http.client.HTTPConnection
        if self._https:
            context = self._tls or system_tls()
            connection = http.client.HTTPSConnection(
                self._host, self._port, timeout=self.timeout, context=context
            )
        else:
            connection = http.client.HTTPConnection(self._host, self._port, timeout=self.timeout)
        connection.connect()
        connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return connection

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        """Send one request; return (status, JSON answer or None), or raise a ClientError."""
        data = b"" if body is None else _encode(body)
        sent = {"Content-Type": "application/json", **(headers or {})}
        if self._token is not None:
            sent["Authorization"] = self._token.header()
        for fresh in (False, True):
            try:
                if self._connection is None or fresh:
                    self.close()
                    self._connection = self._open()
                self._connection.request(method, self._prefix + path, data, sent)
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
                    raise Unreachable(
                        f"the control plane at {self.url} closed the connection"
                    ) from None
            except TimeoutError:
                self.close()
                raise Unreachable(silent(self.url, self.timeout)) from None
            except ssl.SSLError as ex:
                self.close()
                raise tls_trouble(self.url, ex) from None
            except (OSError, http.client.HTTPException) as ex:
                self.close()
                reason = (
                    ex.strerror
                    if isinstance(ex, OSError) and ex.strerror
                    else str(ex) or type(ex).__name__
                )
                raise Unreachable(
                    f"cannot reach the control plane at {self.url} ({reason})"
                ) from None
        if response.will_close:
            self.close()
        answer = None
        if raw:
            try:
                answer = _decode(raw)
            except msgspec.DecodeError:
                answer = raw.decode("utf-8", "replace")
        if response.status >= 400:
            message, code = f"HTTP {response.status}", None
            if isinstance(answer, dict):
                message = str(answer.get("error", message))
                code = answer.get("code")
            kind = NotFound if response.status == 404 else Refused
            raise kind(response.status, message, code)
        return response.status, answer

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
