# GENERATED from the `sdlc` workflow — do not edit.
from __future__ import annotations

import msgspec
from stateous import Context, Occurrence, StateRef

__workflow__ = "sdlc"
__checksum__ = "sha256:be2f30a5f00a03187ad6c3ba3e3dfeb1704860ff5de28acd955708e30c7448a4"


class Ticket(msgspec.Struct):
    repo: str


class Tests(msgspec.Struct):
    passed: int
    failed: int


TicketContext = Context[Ticket]


class events:
    class done(Occurrence[None]):
        name = "done"

    class stuck(Occurrence[None]):
        name = "stuck"

    class passed(Occurrence[Tests]):
        name = "passed"

    class failed(Occurrence[Tests]):
        name = "failed"


class states:
    coding = StateRef("coding", emits=(events.done, events.stuck))
    testing = StateRef("testing", emits=(events.passed, events.failed))
