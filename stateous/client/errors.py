"""The errors of the clients: a call that failed, and why."""

from __future__ import annotations

import re

#: A secret of Stateous (`stq_...`), or any `Bearer` value, in a text that a server sent.
_SECRET = re.compile(
    r"stq_[A-Za-z0-9_-]+|(?P<scheme>\bBearer\s+)[A-Za-z0-9._~+/-]+=*", re.IGNORECASE
)


def redacted(text: str) -> str:
    """`text` with each secret it holds replaced by `[redacted]`: a refusal's sentence goes
    into logs and error lines, and a proxy may echo the request's `Authorization` in it."""
    return _SECRET.sub(lambda found: f"{found['scheme'] or ''}[redacted]", text)


class ClientError(Exception):
    """A call to the control plane failed."""


class BadSetting(ClientError):
    """A URL, a token file, a secret or a CA file cannot be used; the sentence names it."""


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


class NotServing(Refused):
    """A refusal with the code `not_serving`: a standby, or a control plane that lost its
    database; another control plane may serve it, or soon will."""
