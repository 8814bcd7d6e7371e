"""A control plane in the test's own process: a real SQLite file and a clock the test moves."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import msgspec

from stateous import END, START, Workflow
from stateous.compiler.compile import compile_workflow
from stateous.control.engine import Engine
from stateous.control.graph import Graph
from stateous.control.sqlite import SqliteStore
from stateous.model.graph_file import GraphFile, dump


class Clock:
    """Time that moves only when the test says so."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Item(msgspec.Struct):
    title: str
    amount: int = 0
    tags: list[str] = []


class Verdict(msgspec.Struct):
    approved: bool
    note: str = ""


def orders(review_timeout: str | None = "1h", retries: int = 1) -> Workflow:
    """The orders starter, with a timeout and retries on `review`, and an error path."""
    flow = Workflow("orders", context=Item)
    draft = flow.state("draft")
    review = flow.state("review", timeout=review_timeout, retries=retries)
    held = flow.state("held")
    submitted = flow.event("submitted")
    reviewed = flow.event("reviewed", payload=Verdict)
    remind = flow.event("remind")
    flow.transition(START, draft)
    flow.transition(draft, review, on=submitted)
    flow.transition(draft, draft, on=remind)
    flow.transition(review, END, on=reviewed, when="payload.approved == true")
    flow.transition(review, draft, on=reviewed, otherwise=True)
    flow.transition(review, held, on="error")
    flow.transition(held, END, on=submitted)
    return flow


@dataclass
class Plane:
    """An engine on a real SQLite file, with a hand-moved clock."""

    engine: Engine
    clock: Clock
    store: SqliteStore

    def kinds(self, token: str) -> list[str]:
        return [entry.kind for entry in self.engine.history(token)]

    def entries(self, token: str) -> list[tuple[str, dict]]:
        return [(entry.kind, entry.data) for entry in self.engine.history(token)]

    def tail(self, token: str, since: int) -> list[str]:
        return self.kinds(token)[since:]


def plane_for(
    graph: GraphFile | Workflow, folder: Path, *, lease: float = 120.0, name: str = "db.sqlite"
) -> Plane:
    """Serve a workflow (compiled here) or a graph file from `folder` in this process."""
    document = compile_workflow(graph) if isinstance(graph, Workflow) else graph
    path = folder / "graph.json"
    path.write_bytes(dump(document))
    clock = Clock()
    store = SqliteStore(folder / name, clock=clock)
    return Plane(Engine(Graph.load(path), store, lease=lease), clock, store)
