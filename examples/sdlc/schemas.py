"""The models of the `sdlc` example: a ticket as the context, test counts as a payload."""

import msgspec


class Ticket(msgspec.Struct):
    """What a token of `sdlc` carries from state to state."""

    repo: str  # the checkout's path, on the computer where the supervisor runs


class Tests(msgspec.Struct):
    """The outcome of one test run."""

    passed: int
    failed: int
