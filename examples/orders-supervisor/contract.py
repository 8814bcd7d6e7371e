# GENERATED from the `orders` workflow — do not edit.
from __future__ import annotations

import msgspec
from stateous import Context, Occurrence, StateRef

__workflow__ = "orders"
__checksum__ = "sha256:c731ad8cbd2f0d134aa87de8c230d030747a1c5b6582f6e68155e0d3091e4158"


class Item(msgspec.Struct):
    title: str


class Verdict(msgspec.Struct):
    approved: bool
    note: str = ""


ItemContext = Context[Item]


class events:
    class submitted(Occurrence[None]):
        name = "submitted"

    class reviewed(Occurrence[Verdict]):
        name = "reviewed"


class states:
    draft = StateRef("draft", emits=(events.submitted,))
    review = StateRef("review", emits=(events.reviewed,))
