"""The `graphs` table: every graph file served, kept whole by its checksum (version 0015).

A graph file never changes for a checksum, so a row is written once and then only its
`last_served_at` moves. Each token names the checksum of the graph it moves by.
"""

from __future__ import annotations

from stateous.control.store.columns import any_word, word
from stateous.control.store.rows import GraphVersion, from_column
from stateous.control.store.statements import Statements
from stateous.model.vocabulary import LIVE_TASK, TokenStatus

#: A token that is active or paused, in SQL.
_LIVE = f"status IN ({word(TokenStatus.ACTIVE)}, {word(TokenStatus.PAUSED)})"
VERSIONS = (
    "SELECT g.checksum, g.document, g.first_served_at, g.last_served_at, "
    f"(SELECT count(*) FROM tokens k WHERE k.checksum = g.checksum AND {_LIVE}) "
    "FROM graphs g ORDER BY g.first_served_at, g.checksum"
)


class GraphsSql(Statements):
    """The verbs of `Tx` over the graph files kept, on the `execute` of a transaction."""

    def keep_graph(self, checksum: str, document: str) -> None:
        """Record that the graph file of `checksum` is served now; keep it if it is new."""
        self.execute(
            "INSERT INTO graphs (checksum, document, first_served_at, last_served_at) "
            "VALUES (?, ?, ?, ?) ON CONFLICT (checksum) "
            "DO UPDATE SET last_served_at = excluded.last_served_at",
            (checksum, document, self.stamp, self.stamp),
        )

    def graph_document(self, checksum: str) -> str | None:
        """The graph file kept for `checksum`, as served; None when none is kept."""
        rows = self.execute("SELECT document FROM graphs WHERE checksum = ?", (checksum,))
        return str(rows[0][0]) if rows else None

    def graph_versions(self) -> list[GraphVersion]:
        """Every graph file kept, the first served first, each with its live tokens."""
        return [
            GraphVersion(checksum, document, from_column(first), from_column(last), live)
            for checksum, document, first, last, live in self.execute(VERSIONS)
        ]

    def live_unkept(self) -> list[tuple[str | None, int]]:
        """The checksums of live tokens whose graph file is not kept, with their counts:
        tokens of a database upgraded from before version 0015 (or of no graph at all)."""
        return [
            (checksum, int(count))
            for checksum, count in self.execute(
                f"SELECT checksum, count(*) FROM tokens WHERE {_LIVE} AND (checksum IS NULL "
                "OR checksum NOT IN (SELECT checksum FROM graphs)) GROUP BY checksum"
            )
        ]

    def uncontracted(self) -> list[tuple[str, str]]:
        """The checksums of the tokens and the states of the live tasks that name no
        contract (kept before version 0017), each pair once."""
        return [
            (str(checksum), str(state))
            for checksum, state in self.execute(
                "SELECT DISTINCT k.checksum, t.state FROM tasks t "
                "JOIN tokens k ON k.token = t.token "
                f"WHERE {any_word('t.status', LIVE_TASK)} AND t.contract IS NULL "
                "AND k.checksum IS NOT NULL"
            )
        ]

    def set_contract(self, checksum: str, state: str, contract: str) -> None:
        """Name `contract` in the live tasks of `state` that name none, of the tokens of the
        graph `checksum`."""
        self.execute(
            f"UPDATE tasks SET contract = ? WHERE {any_word('status', LIVE_TASK)} "
            "AND contract IS NULL AND state = ? "
            "AND token IN (SELECT token FROM tokens WHERE checksum = ?)",
            (contract, state, checksum),
        )

    def repin(self, old: str | None, new: str) -> None:
        """Pin the tokens of checksum `old` (kept by no graph file) to the graph `new`."""
        if old is None:
            self.execute("UPDATE tokens SET checksum = ? WHERE checksum IS NULL", (new,))
        else:
            self.execute("UPDATE tokens SET checksum = ? WHERE checksum = ?", (new, old))
