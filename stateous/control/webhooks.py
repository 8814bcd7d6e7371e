"""GitHub's deliveries to `POST /hooks/{name}`: what a webhook credential made for GitHub
keeps (`Hook`), and how a delivery's body gives the token id, the payload and the context.

GitHub's body is its own, not our event's payload: a hook maps the parts a workflow reads
(`--token-from pull_request.head.ref`, `--payload-from pull_request`) by dotted paths into
the body, and the payload so taken is checked against the event's model like any other.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from stateous.control.checks import TOKEN_ID
from stateous.control.errors import EngineError
from stateous.model.codes import RefusalCode

#: The kind of GitHub's first delivery to a new hook, which only checks that it arrives.
PING = "ping"
#: What an `X-GitHub-Event` may be: GitHub's kinds are lower-case words joined by `_`.
KIND = re.compile(r"[a-z][a-z0-9_]{0,63}\Z")
#: A dotted path into a body: keys of letters, digits, `_` and `-`, joined by dots.
PATH = re.compile(r"[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*\Z")
#: How `--token-from` names one fixed token instead of a path: `=ID`.
FIXED = "="


class InvalidDelivery(EngineError, ValueError):
    code, status = RefusalCode.INVALID_DELIVERY, 422


class Hook(msgspec.Struct, frozen=True, omit_defaults=True):
    """How a webhook's deliveries become a start or a fire; kept on its credential."""

    #: The GitHub kinds it takes, and the workflow event that each fires.
    kinds: dict[str, str]
    #: A dotted path to the token id in the body, or `=ID` for one fixed token.
    token_from: str
    #: A dotted path to the object given as the payload; None gives the whole body.
    payload_from: str | None = None
    #: A dotted path to the object given as a new token's context; None starts with none.
    start_context_from: str | None = None

    def event_for(self, kind: str) -> str | None:
        """The event that a delivery of `kind` fires; None for a kind not taken."""
        if not KIND.match(kind):
            raise InvalidDelivery(
                f"X-GitHub-Event {kind!r} is not a GitHub event kind (lower-case letters, "
                "digits and '_')"
            )
        return self.kinds.get(kind)

    def token(self, body: dict[str, Any]) -> str:
        """The id of the token that a delivery is for."""
        if self.token_from.startswith(FIXED):
            return self.token_from.removeprefix(FIXED)
        value = at(body, self.token_from)
        if not isinstance(value, str):
            raise InvalidDelivery(
                f"the delivery has no text at {self.token_from!r}, where --token-from "
                "finds the token's id"
            )
        return value

    def payload(self, body: dict[str, Any]) -> dict[str, Any]:
        """The payload of the event fired: the object at `payload_from`, or the body."""
        if self.payload_from is None:
            return body
        return object_at(body, self.payload_from, "--payload-from")

    def context(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """The context of a token that a delivery starts."""
        if self.start_context_from is None:
            return None
        return object_at(body, self.start_context_from, "--start-context-from")


def at(body: dict[str, Any], path: str) -> Any:
    """The value at a dotted path of a body; None when a step is missing."""
    value: Any = body
    for key in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def object_at(body: dict[str, Any], path: str, option: str) -> dict[str, Any]:
    value = at(body, path)
    if not isinstance(value, dict):
        raise InvalidDelivery(f"the delivery has no object at {path!r}, which {option} names")
    return value


def hook_of(value: dict[str, Any] | None) -> Hook | None:
    """The hook a credential's row keeps."""
    return None if value is None else msgspec.convert(value, Hook)


def kept(hook: Hook | None) -> dict[str, Any] | None:
    """What a credential's row keeps of a hook."""
    return None if hook is None else msgspec.to_builtins(hook)


def hook_problem(hook: Hook, may_start: bool) -> str | None:
    """What is wrong with a hook's settings, in a sentence; None when nothing is."""
    bad_kind = next((kind for kind in hook.kinds if not KIND.match(kind)), None)
    if not hook.kinds or bad_kind is not None:
        return f"--github-events: {bad_kind!r} is not a GitHub event kind (lower-case, '_')"
    token = hook.token_from
    if not (TOKEN_ID.match(token[1:]) if token.startswith(FIXED) else PATH.match(token)):
        return (
            f"--token-from {token!r} is neither a dotted path into the body "
            "(pull_request.head.ref) nor a fixed token id (=ID)"
        )
    for option, path in (
        ("--payload-from", hook.payload_from),
        ("--start-context-from", hook.start_context_from),
    ):
        if path is not None and not PATH.match(path):
            return f"{option} {path!r} is not a dotted path into the body (pull_request.head.ref)"
    if hook.start_context_from is not None and not may_start:
        return "--start-context-from is for a webhook that may start tokens: --may-start"
    return None
