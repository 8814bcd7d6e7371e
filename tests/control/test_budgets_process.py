"""Budgets with real `stateous serve` and `stateous supervise` processes on both backends: a
routine's `ctx.spend` reaches the ledger through the outbox; four children that reserve
0.3 of a 1 usd budget never run more than three at once (read from the ledger); their
spend (or what is left of the budget, too little for the next) pauses the tree, whose graph
does not take `over_budget`; `stateous token budget`
raises it and the tree finishes. A spend whose answer is lost is sent again and counts
once."""

from __future__ import annotations

from pathlib import Path

from stateous import END, START, Workflow
from stateous.compiler.compile import compile_workflow
from stateous.model.graph_file import dump
from tests.conftest import run_stateous
from tests.control.serving import Launcher
from tests.control.support import Backend, connected
from tests.control.test_budgets import fanout
from tests.supervisor.support import ClaimDropper, Supervisors, wait_until, write_settings

#: Each child's routine: it works a little, spends 0.4 usd at once, and is done.
ROUTINE = """\
import time

from stateous import on_state

from contract import events, states


@on_state(states.job{n}.call)
def job{n}_call(ctx) -> events.job{n}.done:
    time.sleep(0.3)
    ctx.spend(usd=0.4, tokens=1000)
    return events.job{n}.done
"""


def held_at_most(backend: Backend) -> int:
    """The most child tasks claimed and not yet ended at one moment, from the ledger."""
    with connected(backend) as run:
        rows = run(
            "SELECT token, kind FROM ledger WHERE token <> 'T' AND kind IN "
            "('task_claimed', 'task_done', 'task_failed', 'task_cancelled') ORDER BY pos"
        )
    held: set[str] = set()
    most = 0
    for token, kind in rows:
        (held.add if kind == "task_claimed" else held.discard)(token)
        most = max(most, len(held))
    return most


def test_a_budget_holds_three_of_four_children_pauses_the_tree_and_a_raise_finishes_it(
    backend: Backend, launcher: Launcher, supervisors: Supervisors
) -> None:
    graph = backend.folder / "fanout.json"
    graph.write_bytes(dump(compile_workflow(fanout(routed=False))))
    served = launcher.serve(graph, None, "--db", backend.db)
    folder: Path = backend.folder / "box"
    made = run_stateous("init", "supervisor", str(graph), str(folder), cwd=backend.folder)
    assert made.returncode == 0, made.stderr
    for number in range(1, 5):
        (folder / f"job{number}_call.py").write_text(ROUTINE.replace("{n}", str(number)))
    write_settings(folder, served.url, "box", tasks=4)
    url = ["--url", served.url]
    started = run_stateous("token", "start", "T", "--budget", "usd=1", *url, cwd=backend.folder)
    assert started.returncode == 0, started.stderr
    supervisors.serving(folder, "box")
    wait_until(lambda: served.ok("GET", "/tokens/T")["status"] == "paused", "T paused", timeout=30)
    # Three children ran (1.2 usd), or two (0.8 usd, and what is left fits no third).
    shown = run_stateous("token", "show", "T", *url, cwd=backend.folder)
    assert "spent: nothing; its tree: tokens=" in shown.stdout
    assert "budget of T: usd=1, spent: no task is granted" in shown.stdout
    assert "over budget: the tree spent tokens=" in shown.stdout
    raised = run_stateous("token", "budget", "T", "--usd", "3", *url, cwd=backend.folder)
    assert raised.returncode == 0, raised.stderr
    assert raised.stdout.startswith("budget of T: usd=3")
    wait_until(lambda: served.ok("GET", "/tokens/T")["status"] == "completed", "T done", timeout=30)
    assert held_at_most(backend) <= 3
    spent = served.ok("GET", "/tokens/T")
    assert spent["spent"]["tree"] == {"usd": 1.6, "tokens": 4000}
    history = served.ok("GET", "/tokens/T/history")
    assert [entry["data"].get("by") for entry in history if entry["kind"] == "budget_raised"]


#: The routine of `spendy`'s one state: it spends 1.5 usd once, and is done.
SPENDS_ONCE = """\
from stateous import on_state

from contract import events, states


@on_state(states.work)
def work(ctx) -> events.done:
    ctx.spend(usd=1.5)
    return events.done
"""


def test_a_spend_whose_answer_is_lost_is_sent_again_and_counts_once(
    backend: Backend, launcher: Launcher, supervisors: Supervisors
) -> None:
    flow = Workflow("spendy", budget={"usd": 100})
    work = flow.state("work", reserve={"usd": 1})
    flow.transition(START, work)
    flow.transition(work, END, on=flow.event("done"))
    graph = backend.folder / "spendy.json"
    graph.write_bytes(dump(compile_workflow(flow)))
    served = launcher.serve(graph, None, "--db", backend.db)
    proxy = ClaimDropper(served.port, losing="spend")
    try:
        folder: Path = backend.folder / "box"
        made = run_stateous("init", "supervisor", str(graph), str(folder), cwd=backend.folder)
        assert made.returncode == 0, made.stderr
        (folder / "work.py").write_text(SPENDS_ONCE)
        write_settings(folder, proxy.url, "box")
        served.ok("POST", "/tokens", {"token": "T"})
        supervisors.serving(folder, "box")
        wait_until(lambda: served.ok("GET", "/tokens/T")["status"] == "completed", "T done")
    finally:
        proxy.close()
    assert len(proxy.dropped) == 1
    history = served.ok("GET", "/tokens/T/history")
    assert [entry["data"]["spent"] for entry in history if entry["kind"] == "spent"] == [
        {"usd": 1.5}
    ]
    assert served.ok("GET", "/tokens/T")["spent"]["tree"] == {"usd": 1.5}
