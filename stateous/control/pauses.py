"""A paused token's clock stands still.

A token's timers are set by its own clock (`clock`): the time now, or, while it is paused,
the moment its pause began. The resume moves every pending timer of the token by the time
it was paused (`Engine.resume_in`), so a timer set before the pause keeps the time it had
left, and one set during it (a retry after a failed attempt, a timer of a `waiting`
report, a timeout that a migration gave) counts its whole delay from the resume. How long
a token has been in its state (`in_state`) is counted on the same clock.
"""

from __future__ import annotations

from stateous.control.store import TokenRow, Tx
from stateous.model.vocabulary import Kind, TokenStatus


def clock(tx: Tx, token: TokenRow) -> float:
    """The time on the token's clock: now, or the moment its pause began while it is paused."""
    if token.status != TokenStatus.PAUSED:
        return tx.now
    paused = tx.last_entry(token.token, (Kind.PAUSED,))
    return tx.now if paused is None else paused.at


def in_state(tx: Tx, token: TokenRow) -> float:
    """How long the token has been in its state by its clock: since it entered it, less
    each pause since (a token enters a state only while active, so the rows after its
    entry pair up as pause, resume, ...)."""
    entered = tx.last_entry(token.token, (Kind.ENTERED,))
    paused = 0.0
    if entered is not None:
        stops = tx.entries_after(token.token, entered.seq, Kind.PAUSED)
        goes = tx.entries_after(token.token, entered.seq, Kind.RESUMED)
        paused = sum(back.at - stop.at for stop, back in zip(stops, goes, strict=False))
    return clock(tx, token) - token.entered_at - paused
