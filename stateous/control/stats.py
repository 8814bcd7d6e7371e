"""The figures the database holds: what `GET /stats` answers, from one read that
`GET /metrics` shares, and when each supervisor was last heard from (`last_seen`).

The read takes the counts (`store/counts.py`), among them the live tokens and
tasks by status and state and the pending timers, then the oldest queued task
of each state, all on one snapshot: a few rows of the counts table and a
look into an index per state, so that it costs the same with a thousand tokens
or a million. A state is named as a supervisor claims it: `state`, or
`workflow/state` in a child workflow.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from stateous.control.graph import Graph
from stateous.control.listings import SEEN_FOR
from stateous.control.store import Counter, Tx, to_column
from stateous.model.vocabulary import ENDING
from stateous.model.wire import LastHour, Stats

if TYPE_CHECKING:
    from stateous.control.engine import Engine


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The figures of one read; times are the read's own."""

    now: float
    #: Live tokens: (state, status, how many).
    tokens: list[tuple[str, str, int]]
    #: Live tasks: (state, status, how many).
    tasks: list[tuple[str, str, int]]
    #: When each state's oldest queued task was queued.
    oldest: dict[str, float]
    timers_pending: int
    #: Every count since the database was made, by counter and label.
    counters: dict[tuple[str, str], int]
    #: The counts of the last hour, by counter.
    last_hour: dict[str, int]

    def total(self, counter: Counter, label: str = "") -> int:
        return self.counters.get((counter.value, label), 0)

    def labels(self, counter: Counter) -> dict[str, int]:
        """A counter's counts by label."""
        return {label: n for (name, label), n in self.counters.items() if name == counter}

    def ages(self) -> dict[str, float]:
        """The age in seconds of each state's oldest queued task."""
        return {state: max(0.0, self.now - queued) for state, queued in self.oldest.items()}


def task_states(graph: Graph) -> list[str]:
    """Every state that queues a task, by the name a supervisor claims it by."""
    return [
        flow.claim_name(name)
        for flow in graph.flows.values()
        for name, spec in flow.spec.states.items()
        if not spec.parallel
    ]


def gauge(counters: dict[tuple[str, str], int], name: Counter) -> list[tuple[str, str, int]]:
    """A gauge kept as counts (labels `status state`) as rows of (state, status, how many),
    without the states and statuses it has none of."""
    found = []
    for (counted, label), n in sorted(counters.items()):
        if counted == name and n:
            status, _, state = label.partition(" ")
            found.append((state, status, n))
    return found


def read(engine: Engine) -> Snapshot:
    """Read every figure on one snapshot of the database."""
    states = task_states(engine.graph)

    def operation(tx: Tx) -> Snapshot:
        counters = tx.counters()
        return Snapshot(
            now=tx.now,
            tokens=gauge(counters, Counter.LIVE_TOKENS),
            tasks=gauge(counters, Counter.LIVE_TASKS),
            oldest=tx.oldest_queued(states),
            timers_pending=counters.get((Counter.TIMERS_PENDING.value, ""), 0),
            counters=counters,
            last_hour=tx.last_hour(),
        )

    return engine.store.read(operation)


def nested(rows: list[tuple[str, str, int]]) -> dict[str, dict[str, int]]:
    """Rows of (state, status, how many) as {state: {status: how many}}."""
    found: dict[str, dict[str, int]] = {}
    for state, status, n in rows:
        found.setdefault(state, {})[status] = n
    return found


def stats(engine: Engine) -> Stats:
    """The answer of `GET /stats`."""
    shot = read(engine)
    hour = shot.last_hour
    return Stats(
        tokens=nested(shot.tokens),
        tasks=nested(shot.tasks),
        oldest_queued={state: round(age, 3) for state, age in shot.ages().items()},
        timers_pending=shot.timers_pending,
        last_hour=LastHour(
            events_fired=hour.get(Counter.EVENTS_FIRED, 0),
            leases_ended=hour.get(Counter.LEASES_ENDED, 0),
            attempts_failed=hour.get(Counter.ATTEMPTS_FAILED, 0),
        ),
        ended={status.value: shot.total(Counter.TOKENS_ENDED, status) for status in ENDING},
    )


def last_seen(engine: Engine, most: int) -> list[tuple[str, float]]:
    """When each supervisor of the last day (at most `most`, the first by name) last
    claimed or sent a heartbeat, as a Unix time; one never heard from is left out."""
    rows = engine.store.read(lambda tx: tx.supervisors_seen(to_column(tx.now - SEEN_FOR), most))
    found = []
    for row in rows:
        moments = [moment for moment in (row.claimed_at, row.heartbeat_at) if moment is not None]
        if moments:
            found.append((row.supervisor, max(moments)))
    return found
