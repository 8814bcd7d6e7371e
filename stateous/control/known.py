"""The states of tokens as this control plane last committed them, to be proven, not trusted.

One control plane serves a database, so the changes it commits are the only
ones a token sees: a write can start from the state it left last time instead
of asking for it first. The store still proves the copy inside the transaction,
after the token's lock, before any write runs; a copy that differs stops the
transaction, which then runs again from what the database says. So a wrong or
old copy costs time, never a wrong move.
"""

from __future__ import annotations

import threading
from typing import Any

from stateous.control.sql import STATE_LAST, STATE_TASK

#: How many tokens' states are kept; the oldest goes first.
SIZE = 2048


class KnownStates:
    """Token states (rows of `token_state_sql`) by token, at most `size` of them, and the
    token of each state's live task."""

    def __init__(self, size: int = SIZE) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._states: dict[str, tuple[Any, ...]] = {}
        self._tokens: dict[int, str] = {}

    def get(self, token: str) -> tuple[Any, ...] | None:
        return self._states.get(token)

    def token_of(self, task: int) -> str | None:
        """The token whose kept state has `task` as its live task."""
        return self._tokens.get(task)

    def put(self, token: str, state: tuple[Any, ...]) -> None:
        """Keep a token's state, unless the one kept already has a later ledger row: two
        transactions on a token commit in turn, but may come here the other way round."""
        with self._lock:
            kept = self._states.get(token)
            if kept is not None and (kept[STATE_LAST] or 0) > (state[STATE_LAST] or 0):
                return
            self._pop(token)
            self._states[token] = state
            if state[STATE_TASK] is not None:
                self._tokens[state[STATE_TASK]] = token
            if len(self._states) > self._size:
                self._pop(next(iter(self._states)))

    def drop(self, tokens: set[str]) -> None:
        with self._lock:
            for token in tokens:
                self._pop(token)

    def _pop(self, token: str) -> None:
        state = self._states.pop(token, None)
        if state is not None and self._tokens.get(state[STATE_TASK]) == token:
            del self._tokens[state[STATE_TASK]]
