"""The graphs that tokens move by: the one served, and the older ones the database keeps.

Each token is pinned to the graph file it started on (by its checksum) and moves by that
file's rules to its end. A graph file never changes for a checksum, so an older one is read
from the database the first time a token of it moves, and kept in memory after that.
"""

from __future__ import annotations

from stateous.control import checks
from stateous.control.errors import GraphNotFound
from stateous.control.graph import Graph
from stateous.control.store import GraphVersion, Store, Tx, to_iso
from stateous.model import graph_file
from stateous.model.wire import VersionView


def not_kept(checksum: str) -> str:
    """The refusal's sentence for a checksum of no graph file kept."""
    return f"this database keeps no graph file of checksum {checksum!r}"


class Graphs:
    """The served graph, and every older graph read so far, by checksum."""

    def __init__(self, served: Graph, store: Store) -> None:
        self.served = served
        self.store = store
        self._known: dict[str, Graph] = {served.checksum: served}

    def of(self, tx: Tx, checksum: str | None) -> Graph:
        """The graph of a checksum, read in `tx` the first time. A token that names no graph
        kept (one from before any graph was on record) moves by the served graph."""
        if checksum is None:
            return self.served
        graph = self._known.get(checksum)
        if graph is not None:
            return graph
        document = tx.graph_document(checksum)
        if document is None:
            # Never kept, so never kept later either: only the served graph is recorded.
            graph = self.served
        else:
            raw = document.encode()
            graph = Graph(graph_file.load(raw), raw)
        self._known[checksum] = graph
        return graph

    def record(self, tx: Tx) -> None:
        """Keep the served graph file, and say it is served now; name in each live task kept
        before version 0017 the contract of its state in its token's graph."""
        tx.keep_graph(self.served.checksum, self.served.raw.decode())
        for checksum, state in tx.uncontracted():
            contract = self.of(tx, checksum).contract(state)
            if contract is not None:
                tx.set_contract(checksum, state, contract)

    def kept(self, checksum: str, tx: Tx | None = None) -> Graph:
        """The graph file of `checksum`, served or kept, read the first time (in `tx` when
        given); `GraphNotFound` when the database keeps none: a token's moves fall back on
        the served graph, but a migration's target and a claim's contracts cannot."""
        known = self._known.get(checksum)
        if known is not None and known.checksum == checksum:
            return known
        document: str | None = None
        if checks.keepable(checksum):  # Postgres holds no NUL: no file is kept by one
            if tx is None:
                document = self.store.read(lambda read: read.graph_document(checksum))
            else:
                document = tx.graph_document(checksum)
        if document is None:
            raise GraphNotFound(not_kept(checksum))
        raw = document.encode()
        graph = self._known[checksum] = Graph(graph_file.load(raw), raw)
        return graph

    def contracts(self, checksum: str, states: list[str]) -> list[str]:
        """The contracts of `states` in the graph of `checksum`, of those that are task states
        there: what a supervisor built for that graph can run."""
        graph = self.kept(checksum)
        return [found for state in states if (found := graph.contract(state)) is not None]

    def file(self, checksum: str | None) -> bytes:
        """The graph file served (no checksum), or the one kept for `checksum`."""
        if checksum is None or checksum == self.served.checksum:
            return self.served.raw
        found: str | None = None
        if checks.keepable(checksum):  # Postgres holds no NUL: no file is kept by one
            found = self.store.read(lambda tx: tx.graph_document(checksum))
        if found is None:
            raise GraphNotFound(not_kept(checksum))
        return found.encode()

    def listing(self) -> list[VersionView]:
        """Every graph file kept, the first served first, with its live tokens."""
        return [self.shown(version) for version in self.store.read(lambda tx: tx.graph_versions())]

    def shown(self, version: GraphVersion) -> VersionView:
        """A version as `GET /workflows` shows it."""
        workflow = graph_file.load(version.document.encode()).workflow
        return VersionView(
            checksum=version.checksum,
            workflow=workflow,
            first_served_at=to_iso(version.first_served_at),
            last_served_at=to_iso(version.last_served_at),
            live=version.live,
            served=version.checksum == self.served.checksum,
        )
