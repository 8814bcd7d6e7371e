"""The models of the orders workflow: msgspec Structs, checked at the control plane."""

import msgspec


class Item(msgspec.Struct):
    """The context of a token: the business data that every state can read and write."""

    title: str


class Verdict(msgspec.Struct):
    """The payload of `reviewed`: what the review decided."""

    approved: bool
    note: str = ""
