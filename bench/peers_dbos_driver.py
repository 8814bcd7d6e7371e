"""The DBOS side of bench_peers.py: DBOS Transact in this one process, driven over stdin.

It runs in the DBOS folder's own venv (`bench/.peers/dbos/venv`) and imports nothing of
Stateous. The workflows are those of the other systems: `one` runs one step, `five`
runs five, each a `@DBOS.step` that returns at once; the executor has 8 threads, the
bench's 8 slots. DBOS has no HTTP hop: a start is `DBOS.start_workflow` in this process,
which writes the workflow's row and hands it to an executor thread.
Protocol (one JSON object a line): the first line on stdout is the settings that make
a commit durable; then each command read on stdin is answered by one line
(`peers_starter.py` speaks the same, see there).
Run: python peers_dbos_driver.py SYSTEM_DATABASE_URL
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time
from typing import Any

from dbos import DBOS, DBOSConfig
from dbos._dbos import _get_dbos_instance

STAMPS: dict[str, float] = {}


@DBOS.step()
def step(run: str, number: int) -> int:
    """Do a step's work, which is nothing; note when a pickup run's first step began."""
    if number == 1 and run.startswith("pick"):
        STAMPS[run] = time.time()
    return number


@DBOS.workflow()
def one(run: str) -> str:
    step(run, 1)
    return run


@DBOS.workflow()
def five(run: str) -> str:
    for number in range(1, 6):
        step(run, number)
    return run


FLOWS = {1: one, 5: five}


def durability(url: str) -> dict[str, str]:
    """What DBOS's own connections say about durability of a commit."""
    engine = _get_dbos_instance()._sys_db.engine
    with engine.connect() as connection:
        if url.startswith("sqlite"):
            names = ("journal_mode", "synchronous")
            return {
                name: str(connection.exec_driver_sql(f"PRAGMA {name}").scalar()) for name in names
            }
        names = ("fsync", "synchronous_commit", "wal_sync_method")
        return {name: str(connection.exec_driver_sql(f"SHOW {name}").scalar()) for name in names}


def pickup(command: dict[str, Any]) -> dict[str, Any]:
    """Start runs of one step one at a time, an idle pause between them."""
    began: dict[str, float] = {}
    handles = []
    for number in range(command["runs"]):
        run = f"pick-{command['prefix']}-{number}"
        began[run] = time.time()
        handles.append(DBOS.start_workflow(one, run))
        time.sleep(random.uniform(0.05, 0.1))
    for handle in handles:
        handle.get_result()
    return {"began": began, "ended": {}, "stamps": {run: STAMPS[run] for run in began}}


def sequential(command: dict[str, Any]) -> dict[str, Any]:
    """Run `steps`-step runs one after the other, each to its result."""
    began: dict[str, float] = {}
    ended: dict[str, float] = {}
    for number in range(command["runs"]):
        run = f"seq-{command['prefix']}-{number}"
        began[run] = time.time()
        DBOS.start_workflow(FLOWS[command["steps"]], run).get_result()
        ended[run] = time.time()
    return {"began": began, "ended": ended}


def throughput(command: dict[str, Any]) -> dict[str, Any]:
    """Start `runs` runs from `starters` threads at once, then wait for every result."""
    flow, starters = FLOWS[command["steps"]], command["starters"]
    began: dict[str, float] = {}
    handles: list[Any] = []
    lock = threading.Lock()

    def starter(index: int) -> None:
        for number in range(index, command["runs"], starters):
            run = f"rate-{command['prefix']}-{number}"
            moment = time.time()
            handle = DBOS.start_workflow(flow, run)
            with lock:
                began[run] = moment
                handles.append(handle)

    threads = [threading.Thread(target=starter, args=(index,)) for index in range(starters)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for handle in handles:
        handle.get_result()
    return {"began": began, "ended": {}, "done": time.time()}


def main() -> None:
    url = sys.argv[1]
    config: DBOSConfig = {
        "name": "peers",
        "system_database_url": url,
        "max_executor_threads": 8,
        "log_level": "WARNING",
    }
    DBOS(config=config)
    DBOS.launch()
    print(json.dumps(durability(url)), flush=True)
    workloads = {"pickup": pickup, "sequential": sequential, "throughput": throughput}
    for line in sys.stdin:
        command = json.loads(line)
        print(json.dumps(workloads[command["workload"]](command)), flush=True)
    DBOS.destroy()


if __name__ == "__main__":
    main()
