"""Mending a token that ended without completing: the retry.

A failed or cancelled token goes back to a state it visited, as active, by the
same step that enters a state on any move (`Moves.enter`): a new visit, a new
task at its first attempt, the state's timeout. Its context (with the changes
given, checked against the model), its memory and its history stay. Each check
runs before anything is written, so a refusal changes nothing. Everything runs
inside the transaction that the engine opened.
"""

from __future__ import annotations

from typing import Any

from stateous.control import checks
from stateous.control.errors import (
    InvalidTokenId,
    ParentMovedOn,
    StateNotVisited,
    TokenCompleted,
    TokenLive,
    TokenNotActive,
    UnknownState,
)
from stateous.control.moves import Moves
from stateous.control.store import TokenRow, Tx
from stateous.model.vocabulary import LIVE_TOKEN, Kind, TokenStatus


def retry(
    tx: Tx, moves: Moves, token: TokenRow, state: str | None, changes: dict[str, Any] | None
) -> None:
    """Enter `state` (the token's last state when None) again, with `changes` merged into
    the context; record `retried` first, so that it names who asked."""
    mendable(token)
    target = token.state if state is None else state
    visited(tx, moves, token, target)
    if token.parent is not None:
        parent_waits(tx, token)
    context = token.context
    if changes:
        context = checks.context(moves.flow(tx, token), {**token.context, **changes})
    visit = token.visits.get(target, 0) + 1
    too_long = moves.child_id_problem(token.token, moves.flow(tx, token), target, visit, context)
    if too_long is not None:
        raise InvalidTokenId(too_long)
    tx.record(
        token.token,
        Kind.RETRIED,
        {"state": target, "was": token.status, "changes": changes or {}},
    )
    token.status, token.context = TokenStatus.ACTIVE, context
    moves.enter(tx, token, target)


def mendable(token: TokenRow) -> None:
    """Only a token that failed or was cancelled can be retried."""
    if token.status in LIVE_TOKEN:
        raise TokenLive(
            f"token {token.token!r} is {token.status}; only a failed or cancelled token "
            "can be retried"
        )
    if token.status == TokenStatus.COMPLETED:
        raise TokenCompleted(f"token {token.token!r} completed; it cannot be retried")


def visited(tx: Tx, moves: Moves, token: TokenRow, state: str) -> None:
    """The state must be one of the token's workflow, and one the token entered."""
    flow = moves.flow(tx, token)
    if state not in flow.spec.states:
        raise UnknownState(f"the workflow {flow.name!r} has no state {state!r}")
    if state not in token.visits:
        raise StateNotVisited(f"token {token.token!r} never entered {state!r}")


def parent_waits(tx: Tx, child: TokenRow) -> None:
    """A child comes back only while its parent is active in the very visit that started it,
    its join still waiting: a parent that moved on has used the child's end already."""
    parent = tx.token(child.parent or "")
    assert parent is not None  # a child's parent is never deleted before it
    if not child.token.startswith(f"{parent.token}.{parent.state}.{parent.visit}.") or (
        parent.status not in LIVE_TOKEN
    ):
        raise ParentMovedOn(
            f"the parent {parent.token!r} of token {child.token!r} has moved on from the "
            "state that started it; retry the parent instead"
        )
    if parent.status != TokenStatus.ACTIVE:
        raise TokenNotActive(
            f"the parent {parent.token!r} of token {child.token!r} is {parent.status}; "
            "resume it first"
        )
