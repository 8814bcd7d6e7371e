"""A unit of work: the writes of one block, kept in one transaction, committed as it ends.

`with store.turn() as turn:` opens a turn for the code that runs inside the block, and
only for it: the open turn lives in a `ContextVar`, so another thread, which runs in a
context of its own, never joins it. On SQLite every write inside the block joins the
turn's transaction (begun at its first write), each in a savepoint, so that one that
fails rolls back alone; a read inside sees what the turn wrote; leaving the block
commits them all with one sync, and a turn opened inside another joins it. What must
wait for that commit (a waiting claim to wake, a live stream to send, an answer's time)
is given to `turn.after`, with what to do instead when the turn keeps nothing (its
commit failed, or the block raised); `joined()` answers the turn a write joined, or, outside any,
one whose `after` runs at once, since such a write returned committed. A turn begins at its
first write, or at `turn.begin`, which the server's loop calls so that it never waits for a
write of its own process. On Postgres, where each write commits on its own, `turn()` opens
nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar


class Turn:
    """A turn with nothing left to commit: what was written is on disk already."""

    def after(self, then: Callable[[], None], undone: Callable[[], None] | None = None) -> None:
        """Call `then` once what this turn wrote is committed, or `undone` (if any) when
        the turn keeps none of it: here, `then` at once."""
        then()

    def begin(self, wake: Callable[[], None] | None) -> bool:
        """Take the database for this turn's writes now. With `wake`, when another write of
        this process holds it, answer False at once instead of waiting, nothing begun, and
        call `wake` once it is passed on; the turn opened next goes first then. Here there
        is nothing to take: True."""
        return True


#: The turn outside any block: every write has returned committed.
COMMITTED = Turn()

_open: ContextVar[Turn | None] = ContextVar("stateous_turn", default=None)


def joined() -> Turn:
    """The turn open in this context, or `COMMITTED` outside any."""
    return _open.get() or COMMITTED


@contextmanager
def entered(turn: Turn) -> Iterator[Turn]:
    """Make `turn` the one open in this context for the block."""
    token = _open.set(turn)
    try:
        yield turn
    finally:
        _open.reset(token)
