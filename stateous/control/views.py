"""How the API shows what the store keeps: a token, an entry of its history."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import msgspec

from stateous.control import resource_steering, spending
from stateous.control.store import Entry, TokenRow, Tx, to_iso
from stateous.model.sentences import Narrator
from stateous.model.vocabulary import LIVE_TOKEN, TaskStatus
from stateous.model.wire import (
    Delivered,
    Duplicate,
    DuplicateBrief,
    HistoryEntry,
    TokenBrief,
    TokenView,
)

if TYPE_CHECKING:
    from stateous.control.engine import Engine


def view(token: TokenRow) -> TokenView:
    """Show a token as the API does."""
    return TokenView(
        token=token.token,
        state=token.state,
        status=token.status,
        visit=token.visit,
        context=token.context,
        entered_at=to_iso(token.entered_at),
        parent=token.parent,
    )


def detail(token: TokenRow, waits_for: str | None = None, waits: str | None = None) -> TokenView:
    """Show one token asked for by its id: its view, with the graph it moves by and what its
    task waits for, if anything: a resource (`waits_for`), a supervisor (`waits`)."""
    shown = view(token)
    return msgspec.structs.replace(shown, checksum=token.checksum, waits_for=waits_for, waits=waits)


def live_detail(token: TokenRow, tx: Tx, engine: Engine) -> TokenView:
    """`_live_detail`, with what the token and its tree spent (`spending.spent_view`)."""
    shown = _live_detail(token, tx, engine)
    return msgspec.structs.replace(shown, spent=spending.spent_view(engine, tx, token))


def _live_detail(token: TokenRow, tx: Tx, engine: Engine) -> TokenView:
    """`detail` of a token read in `tx`: its queued task is read only where its state uses a
    resource, or needs labels that no supervisor seen in the last hour has (`Fleet.unmet`,
    asked of the state's claim name as `GET /tasks` asks it)."""
    moves, unmet = engine.moves, engine.listings.unmet
    if token.status not in LIVE_TOKEN:
        return detail(token)
    uses = moves.uses(tx, token)
    waits = unmet(moves.flow(tx, token).claim_name(token.state)) if unmet else None
    task = tx.live_task(token.token) if uses or waits else None
    if task is None or task.status != TaskStatus.QUEUED:
        return detail(token)
    waits_for = resource_steering.waits_lines(tx, [task.id]).get(task.id) if uses else None
    return detail(token, waits_for, waits)


def brief(token: TokenView) -> TokenBrief:
    """Show a token as a webhook is answered it: without its context."""
    return TokenBrief(
        token=token.token,
        state=token.state,
        status=token.status,
        visit=token.visit,
        entered_at=token.entered_at,
        parent=token.parent,
    )


def brief_answer(answer: TokenView | Duplicate) -> TokenBrief | DuplicateBrief:
    """The answer to a start or a fire, as a webhook is answered it."""
    if isinstance(answer, Duplicate):
        return DuplicateBrief(token=brief(answer.token))
    return brief(answer)


def delivered(answer: TokenView | Duplicate, kind: str, event: str, started: bool) -> Delivered:
    """The answer to a GitHub delivery that started a token, fired its event, or repeated
    one already applied; never the context."""
    token = answer.token if isinstance(answer, Duplicate) else answer
    duplicate = token is not answer
    return Delivered(
        token=token.token,
        state=token.state,
        status=token.status,
        kind=kind,
        event=None if started else event,
        started=started,
        fired=not started and not duplicate,
        duplicate=duplicate,
    )


def history_entries(entries: Iterable[Entry]) -> list[HistoryEntry]:
    """Show the ledger rows of one token, in order, as the API does: each with its sentence,
    which can hang on the rows before it."""
    narrator = Narrator()
    return [
        HistoryEntry(
            seq=entry.seq,
            at=to_iso(entry.at),
            kind=entry.kind,
            data=entry.data,
            text=narrator.say(entry.kind, entry.data),
        )
        for entry in entries
    ]
