"""The SQL that writes a state's memory: a token's values by state and key, which a grant
shows its routine (`SqlTx.grant_reads` reads them with the event that brought the token)."""

from __future__ import annotations

from typing import Any

from stateous.control.store.columns import json_text
from stateous.control.store.statements import Statements


class MemorySql(Statements):
    """The verbs of `Tx` that write memory."""

    def set_memory(self, token: str, state: str, key: str, value: Any) -> None:
        self.change(
            "INSERT INTO memory (token, state, key, value) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (token, state, key) DO UPDATE SET value = excluded.value",
            (token, state, key, json_text(value)),
        )

    def delete_memory(self, token: str, state: str, key: str) -> None:
        self.change(
            "DELETE FROM memory WHERE token = ? AND state = ? AND key = ?", (token, state, key)
        )

    def drop_memory(self, token: str) -> None:
        self.change("DELETE FROM memory WHERE token = ?", (token,))
