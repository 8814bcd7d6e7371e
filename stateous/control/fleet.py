"""The supervisors' labels: which states a claim may take from, and which needs no
supervisor seen lately meets.

A state's needs are in the graph file, so a claim drops the states whose needs its
supervisor's labels do not meet before it reads any queue: labels cost a claim no SQL.
The labels of each supervisor that claimed are kept here, in memory, with the time of
its last claim, so that a listing can say that a task waits for a box that no live
supervisor is ("no supervisor with os=macos seen in the last hour"). They are kept in the
supervisor's claim row too, written by a claim only when they differ from those the row
holds, and a control plane that starts reads the rows of the last hour's claims: what it
says survives a restart. A row of before the labels were kept has none, and while such a
supervisor counts as live, nothing is said (it might offer what a task needs).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from stateous.control.errors import InvalidArgument
from stateous.control.graph import Graph
from stateous.control.store import Seen
from stateous.model.graph_file import StateSpec
from stateous.model.labels import labels_problem, met, needs_text

#: How long a supervisor counts as live after its last claim, in seconds.
SEEN_FOR = 3600.0


class Fleet:
    """The labels of the supervisors that claimed, and when each last did."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        #: Each supervisor's labels (None: unknown) and the time of its last claim.
        self._seen: dict[str, tuple[dict[str, str] | None, float]] = {}
        #: The labels that each supervisor's claim row holds, as far as known here.
        self._kept: dict[str, dict[str, str] | None] = {}
        self._lock = threading.Lock()

    def load(self, seen: list[Seen]) -> None:
        """Take what the claim rows say of the supervisors that claimed lately."""
        with self._lock:
            for supervisor, labels, at in seen:
                self._seen.setdefault(supervisor, (labels, at))
                self._kept.setdefault(supervisor, labels)

    def to_keep(self, supervisor: str) -> dict[str, str] | None:
        """The labels of the supervisor's last claim when its claim row may not hold them
        (the claim writes them, then says so with `kept`); None when it holds them."""
        offered = self._seen[supervisor][0]
        return None if self._kept.get(supervisor, ...) == offered else offered

    def kept(self, supervisor: str, labels: dict[str, str]) -> None:
        """Note that the supervisor's claim row holds these labels now."""
        self._kept[supervisor] = labels

    def fitting(
        self,
        graph: Graph,
        supervisor: str,
        states: list[str],
        labels: Mapping[str, Any] | None,
    ) -> list[str]:
        """Keep the supervisor's labels; answer the states of `states` whose needs they meet
        (a state the graph does not have is kept: its queue is empty). Labels that are not
        labels are refused (`InvalidArgument`)."""
        if labels is not None and (problem := labels_problem(labels)) is not None:
            raise InvalidArgument(f"a claim's labels: {problem}")
        offered = dict(labels or {})
        with self._lock:
            self._seen[supervisor] = (offered, self.clock())
        if not graph.needs_labels:
            return list(states)
        return [state for state in states if met(needs_of(graph, state), offered)]

    @staticmethod
    def preferring(
        graph: Graph, states: list[str], labels: Mapping[str, Any] | None
    ) -> list[str] | None:
        """The claim's labels as `name=value`, when a state of `states` `prefers` a label
        (the claim then passes over the tasks preferred for another); None otherwise."""
        if not graph.prefers_labels:
            return None
        specs = [spec_of(graph, state) for state in states]
        if not any(spec.prefers for spec in specs if spec is not None):
            return None
        return [f"{name}={value}" for name, value in (labels or {}).items()]

    def unmet(self, needs: Mapping[str, str] | None) -> str | None:
        """The sentence for work with `needs` that no supervisor seen in the last hour could
        take, or None when one could (or one whose labels are unknown might)."""
        if not needs:
            return None
        now = self.clock()
        with self._lock:
            live = [labels for labels, at in self._seen.values() if now - at < SEEN_FOR]
        if any(labels is None or met(needs, labels) for labels in live):
            return None
        return f"no supervisor with {needs_text(needs)} seen in the last hour"


def spec_of(graph: Graph, state: str) -> StateSpec | None:
    """A state of `graph` by its claim name (`state` or `workflow/state`), if it has it."""
    workflow, _, name = state.rpartition("/")
    flow = graph.flows.get(workflow or graph.name)
    return None if flow is None else flow.spec.states.get(name)


def needs_of(graph: Graph, state: str) -> dict[str, str] | None:
    """The needs of a state by its claim name in `graph`."""
    spec = spec_of(graph, state)
    return None if spec is None else spec.needs
