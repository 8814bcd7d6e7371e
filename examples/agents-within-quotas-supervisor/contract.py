# GENERATED from the `agents` workflow — do not edit.
from __future__ import annotations

import msgspec
from stateous import Context, Occurrence, StateRef

__workflow__ = "agents"
__checksum__ = "sha256:b350612a5c8e4f0affbdccca6f46fd0285ff79267fa68d2f7dce4d5622ccca42"


class Ask(msgspec.Struct):
    account: str
    prompt: str


AskContext = Context[Ask]


class events:
    class answered(Occurrence[None]):
        name = "answered"


class states:
    answer = StateRef("answer", emits=(events.answered,))
