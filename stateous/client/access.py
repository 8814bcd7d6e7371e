"""What a connection carries besides its URL: a bearer secret, and the CAs it trusts.

The secret comes from a token file, from `STATEOUS_TOKEN`, or from a program; the
trusted CAs from a CA file, from `STATEOUS_CA_FILE`, or else the system's store.
Both are read and checked once, when a client starts, so a file that cannot be
used stops it with one sentence that names the file and never what the file
holds. A `Secret` shows as a placeholder in every repr, log line and error.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from typing import NamedTuple

from stateous.client.errors import BadSetting

#: The environment variables that the clients read when nothing else is given.
TOKEN_VARIABLE = "STATEOUS_TOKEN"
CA_VARIABLE = "STATEOUS_CA_FILE"
#: The characters of a secret: what a bearer credential may hold, and more, without spaces.
VISIBLE = frozenset(chr(code) for code in range(0x21, 0x7F))


class Secret:
    """A bearer secret; it shows as `Secret(<hidden>)`, so no repr or message gives it away."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def header(self) -> str:
        """The value of the `Authorization` header that carries it."""
        return f"Bearer {self._value}"

    def __repr__(self) -> str:
        return "Secret(<hidden>)"

    __str__ = __repr__


def checked(text: str, source: str) -> Secret:
    """Turn one line of text into a Secret, without one trailing newline; say what is wrong.

    `source` names where the text came from, for the sentence: `the token file
    PATH`, `STATEOUS_TOKEN` or `the token`. The sentence never quotes the text.
    """
    for newline in ("\r\n", "\n"):
        if text.endswith(newline):
            text = text[: -len(newline)]
            break
    if not text:
        raise BadSetting(f"{source} is empty")
    if "\n" in text or "\r" in text:
        raise BadSetting(f"{source} holds more than one line")
    if not VISIBLE.issuperset(text):
        raise BadSetting(
            f"{source} holds characters that cannot go in an HTTP header; "
            "a secret is one line of printable ASCII without spaces"
        )
    return Secret(text)


def read_token_file(path: str | os.PathLike[str]) -> Secret:
    """Read the secret in a token file: one line, whose one trailing newline is dropped."""
    source = f"the token file {os.fspath(path)}"
    try:
        with open(path, "rb") as file:
            raw = file.read()
    except OSError as ex:
        raise BadSetting(f"{source} cannot be read: {ex.strerror or type(ex).__name__}") from None
    # A byte beyond ASCII becomes U+FFFD, which `checked` refuses like any other.
    return checked(raw.decode("ascii", "replace"), source)


def tls_context(ca_file: str | os.PathLike[str]) -> ssl.SSLContext:
    """A TLS context that trusts only the CA certificates of `ca_file` and checks host names."""
    source = f"the CA file {os.fspath(ca_file)}"
    try:
        return ssl.create_default_context(cafile=os.fspath(ca_file))
    except ssl.SSLError:
        raise BadSetting(f"{source} holds no certificate in PEM form") from None
    except OSError as ex:
        raise BadSetting(f"{source} cannot be read: {ex.strerror or type(ex).__name__}") from None


class Access(NamedTuple):
    """The secret to send (or None) and the TLS context to verify with (None: the system's).

    A named tuple, not a dataclass: `dataclasses` imports `inspect`, a sixth of the start of
    `stateous token show` (and files are read with `open`, since `pathlib` is another 2 ms).
    """

    token: Secret | None = None
    tls: ssl.SSLContext | None = None

    @classmethod
    def read(
        cls,
        *,
        token: str | None = None,
        token_file: str | os.PathLike[str] | None = None,
        ca_file: str | os.PathLike[str] | None = None,
        environ: Mapping[str, str] = os.environ,
    ) -> Access:
        """Read and check the settings; what is not given comes from the environment.

        A token file wins over `STATEOUS_TOKEN`, and a CA file over
        `STATEOUS_CA_FILE`; a variable that is empty counts as not set.
        """
        if token is not None and token_file is not None:
            raise BadSetting("give token or token_file, not both")
        secret: Secret | None = None
        if token is not None:
            secret = checked(token, "the token")
        elif token_file is not None:
            secret = read_token_file(token_file)
        elif environ.get(TOKEN_VARIABLE):
            secret = checked(environ[TOKEN_VARIABLE], TOKEN_VARIABLE)
        trusted = ca_file if ca_file is not None else environ.get(CA_VARIABLE) or None
        return cls(secret, None if trusted is None else tls_context(trusted))
