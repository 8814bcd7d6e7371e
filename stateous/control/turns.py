"""When a queued task is due its turn: its priority, its age and its fairness key, folded
into one number, `turn_at`, fixed when the task is queued.

The queues are read in `turn_at` order, so a claim does no more work with priorities
and fairness than without (docs/design.md, "Priorities and fairness").

- Priority: a task's turn comes `AGE_PER_LEVEL` seconds earlier for each level of its
  token's priority. That is also the aging rule: a task of priority 0 queued ten minutes
  ago goes before one of priority 10 queued now, so the lowest still runs under any load.
- Fairness: in a workflow with a fairness key, each key has a clock in each queue. A
  task starts no earlier than `FAIR_QUANTUM` after its key's last task, and no later
  than the head of its queue (start-time fair queueing: the head is the task served
  next), and its key's clock moves to that start. So a key's thousand queued tasks are
  spread one quantum apart, and the ten of a key that joins go in between them.
"""

from __future__ import annotations

from functools import cache

from stateous.control.graph import Flow
from stateous.control.store import TokenRow, Tx
from stateous.control.store.turn_sql import TaskTurn
from stateous.model.durations import parse_duration
from stateous.model.graph_file import StateSpec
from stateous.model.keys import key_path, key_value

#: How many seconds of waiting a level of priority is worth.
AGE_PER_LEVEL = 60.0
#: How far apart, in seconds, the starts of one fairness key's tasks in a queue are.
FAIR_QUANTUM = 0.001
#: How long a task of a state with `prefers` waits for a supervisor with that label when
#: the state names no `prefer_for`.
PREFER_FOR = "30s"


def queued(tx: Tx, flow: Flow, spec: StateSpec, token: TokenRow, queue: str) -> TaskTurn:
    """Where a task of `token` queued now in `queue` (a claim name, of state `spec`) stands:
    its turn, and the label that its state `prefers` (`box=ws-3`, read from the token's
    context) with until when only a supervisor with it may claim the task."""
    turn = turn_at(tx, flow, token, queue)
    if not spec.prefers:
        return TaskTurn(turn)
    [(label, text)] = spec.prefers.items()
    value = key_value(_path(text), token.context)
    return TaskTurn(
        turn, f"{label}={value}", tx.now + parse_duration(spec.prefer_for or PREFER_FOR)
    )


@cache
def _path(text: str) -> tuple[str, ...]:
    return key_path(text)


def turn_at(tx: Tx, flow: Flow, token: TokenRow, queue: str) -> float:
    """The turn of a task of `token` queued now in `queue` (a claim name)."""
    start = tx.now
    if flow.fairness is not None:
        head = tx.head_start(queue, AGE_PER_LEVEL)
        if head is not None:
            start = min(start, head)
        key = key_value(flow.fairness, token.context)
        start = tx.fair_start(queue, key, start, FAIR_QUANTUM)
    return start - token.priority * AGE_PER_LEVEL
