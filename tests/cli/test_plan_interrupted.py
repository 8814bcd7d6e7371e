"""A bulk plan cut short by kill -9 and applied again, with real processes, on both backends.

`stateous token cancel --where` plans a thousand tokens; a first apply of a hundred stands
for an earlier apply cut short; `stateous token cancel --apply PLAN` runs as a process of
its own, and the control plane under it is killed with SIGKILL while it applies (the CLI
applies a hundred tokens to a request, each of which a live control plane would finish
without its client). After
a restart the same command acts on the rest. The ledger, read in the database itself, then
holds exactly one row naming the plan and one `cancelled` row per token of the plan, and
none for a token that started to match after the plan was made.

Where the kill lands: Postgres commits each token apart, so the kill comes once the first
tokens of the CLI's apply are marked (`GET /plans/{id}`), and some of them are left
pending. On SQLite the kill comes while the apply holds the file's write lock, so the
restart finds a part of the CLI's tokens acted on at most, the rest pending.
"""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import subprocess
import time
from collections import Counter
from contextlib import closing
from pathlib import Path
from typing import Any

import psycopg

from tests.cli.test_token_commands import database
from tests.control.serving import Launcher, Served, command, environment, orders, write_graph
from tests.supervisor.support import wait_until

__all__ = ["database"]

#: The tokens of the plan, and how many an earlier apply acted on.
TOKENS, FIRST = 1000, 100
#: How long a write transaction must stay open on SQLite to be the apply's, not a tick's.
HELD = 0.02


def token(served: Served, *args: str) -> subprocess.CompletedProcess[str]:
    """Run `stateous token ARGS` against the served control plane, to its end."""
    return subprocess.run(
        applier_command(served, *args),
        env=environment(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def applier_command(served: Served, *args: str) -> list[str]:
    return command("token", *args, "--url", served.url)


def start_tokens(served: Served, names: list[str]) -> None:
    with closing(served.connect()) as connection:
        for name in names:
            body = {"token": name, "context": {"title": "x"}}
            status, answer = served.request("POST", "/tokens", body, connection=connection)
            assert status == 201, answer


def writing(path: Path) -> bool:
    """Whether a write transaction holds the SQLite file's lock for `HELD` seconds: a probe
    that takes the lock lets it go at once."""
    deadline = time.monotonic() + HELD
    with closing(sqlite3.connect(path, timeout=0, isolation_level=None)) as probe:
        while time.monotonic() < deadline:
            try:
                probe.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError:
                time.sleep(0.002)
                continue
            probe.execute("ROLLBACK")
            return False
    return True


def ledger(database: str) -> list[tuple[str, str, dict[str, Any]]]:
    """Every ledger row, as token, kind and data, read in the database itself."""
    sql = "SELECT token, kind, data FROM ledger ORDER BY token, seq"
    if "://" in database:
        with psycopg.connect(database) as connection:
            rows = connection.execute(sql).fetchall()
    else:
        with closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as connection:
            rows = connection.execute(sql).fetchall()
    return [
        (name, kind, data if isinstance(data, dict) else json.loads(data))
        for name, kind, data in rows
    ]


def test_a_plan_killed_half_way_and_applied_again_acts_on_each_token_once(
    launcher: Launcher, tmp_path: Path, database: str
) -> None:
    graph = tmp_path / "orders.json"
    write_graph(graph, orders())
    on_postgres = "://" in database
    where = ["--db", database if on_postgres else f"sqlite:///{database}"]
    served = launcher.serve(graph, None, *where)
    names = [f"ORDER-{number:04d}" for number in range(TOKENS)]
    start_tokens(served, names)
    planned = token(served, "cancel", "--where", "status=active")
    assert (planned.returncode, planned.stderr) == (0, "")
    found = re.fullmatch(
        rf"plan ([0-9a-f]{{16}}): cancel {TOKENS} token\(s\) where status=active",
        planned.stdout.splitlines()[0],
    )
    assert found, planned.stdout.splitlines()[0]
    plan = found[1]
    start_tokens(served, ["LATE"])
    first = served.ok("POST", f"/plans/{plan}/apply", {"action": "cancel", "limit": FIRST})
    assert first["pending"] == TOKENS - FIRST

    applier = subprocess.Popen(
        applier_command(served, "cancel", "--apply", plan),
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    with applier:
        if on_postgres:
            pending = lambda: served.ok("GET", f"/plans/{plan}")["pending"]  # noqa: E731
            wait_until(lambda: pending() < TOKENS - FIRST, "the CLI's first tokens", 60, 0.005)
        else:
            wait_until(lambda: writing(Path(database)), "the apply's transaction", 60, 0.001)
        assert served.kill() == -signal.SIGKILL
        out, err = applier.communicate(timeout=60)
    assert (applier.returncode, out) == (1, ""), err
    # The CLI sends its request once more on a new connection, which the dying process
    # may still accept and drop, or which finds nobody listening.
    assert err in (
        f"error: the control plane at {served.url} closed the connection\n",
        f"error: cannot reach the control plane at {served.url} (Connection refused)\n",
    )

    again = launcher.serve(graph, None, *where)
    cut = again.ok("GET", f"/plans/{plan}")
    outcomes = Counter(one["outcome"] for one in cut["tokens"])
    assert outcomes["refused"] == 0 and outcomes["done"] == TOKENS - cut["pending"]
    if on_postgres:
        assert 0 < cut["pending"] < TOKENS - FIRST
    else:
        assert 0 < cut["pending"] <= TOKENS - FIRST
    applied = token(again, "cancel", "--apply", plan)

    assert (applied.returncode, applied.stderr) == (0, "")
    assert applied.stdout.splitlines()[-1] == f"{TOKENS} done, 0 refused, 0 pending"
    final = {one["token"]: one for one in again.ok("GET", f"/plans/{plan}")["tokens"]}
    for one in first["tokens"][:FIRST]:
        assert final[one["token"]]["applied_at"] == one["applied_at"]
    rows = ledger(database)
    naming = Counter(name for name, _, data in rows if data.get("plan") == plan)
    cancelled = Counter(name for name, kind, _ in rows if kind == "cancelled")
    assert naming == Counter(names)
    assert cancelled == Counter(names)
    assert again.ok("GET", "/tokens/LATE")["status"] == "active"
