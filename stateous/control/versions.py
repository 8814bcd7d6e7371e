"""The graphs that tokens move by: the one served, and the older ones the database keeps.

Each token is pinned to the graph file it started on (by its checksum) and moves by that
file's rules to its end. A graph file never changes for a checksum, so an older one is read
from the database the first time a token of it moves, and kept in memory after that.
"""

from __future__ import annotations

from stateous.control.graph import Graph
from stateous.control.store import GraphVersion, Tx
from stateous.model import graph_file


class Graphs:
    """The served graph, and every older graph read so far, by checksum."""

    def __init__(self, served: Graph) -> None:
        self.served = served
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
            return self.served
        raw = document.encode()
        graph = self._known[checksum] = Graph(graph_file.load(raw), raw)
        return graph

    def record(self, tx: Tx) -> None:
        """Keep the served graph file, and say it is served now."""
        tx.keep_graph(self.served.checksum, self.served.raw.decode())


def in_use(versions: list[GraphVersion]) -> list[GraphVersion]:
    """The versions that live tokens still run on."""
    return [version for version in versions if version.live]
