# GENERATED from the `agents` workflow — do not edit.
from __future__ import annotations

import msgspec
from stateous import Context, Occurrence, StateRef

__workflow__ = "agents"
__checksum__ = "sha256:452148ab51f2f95a962b99c4d84599fa3a4c94bcbcbc1653c792a44f4d9a6c28"


class Ask(msgspec.Struct):
    account: str
    prompt: str


AskContext = Context[Ask]


class events:
    class answered(Occurrence[None]):
        name = "answered"


class states:
    answer = StateRef("answer", emits=(events.answered,))
