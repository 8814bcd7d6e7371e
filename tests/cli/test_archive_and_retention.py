"""`serve --keep-ended` and `stateous archive`, with real processes on both backends.

A real `serve` takes a tree that completes (a parent and its child, with a task, a
timer, memory, a note and an idempotency key), a tree that is cancelled, and a live
one. `archive` writes the ended trees while `serve` runs; `archive show` prints each
token as `token show` printed it; then retention removes the ended trees whole,
every table emptied of their rows, counts them in `/metrics` and logs a line.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from stateous.cli.main import main
from stateous.compiler.compile import compile_workflow
from stateous.control.archive import ended_trees
from stateous.control.retention import sweep
from stateous.control.store import Store, Tree
from stateous.model.graph_file import dump
from tests.conftest import run_stateous
from tests.control.serving import Launcher, Served
from tests.control.support import BACKENDS, Backend, connected, open_backend, orders, plane_for
from tests.control.test_retention import KEEP, trips

ENDED = ["DONE", "DONE.fan.1.check", "GONE", "GONE.fan.1.check"]
LIVE = ["LIVE", "LIVE.fan.1.check"]
TABLES = ("tokens", "ledger", "tasks", "timers", "memory")


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    with open_backend(request.param, tmp_path) as fresh:
        yield fresh


@pytest.fixture
def graph(tmp_path: Path) -> Path:
    path = tmp_path / "trips.json"
    path.write_bytes(dump(compile_workflow(trips())))
    return path


def serve(launcher: Launcher, graph: Path, backend: Backend, *options: str) -> Served:
    return launcher.serve(graph, None, "--db", backend.db, *options)


def worked(served: Served, token: str) -> None:
    """Start `token` and bring it into `fan` through its draft's task (memory, a note)."""
    served.ok("POST", "/tokens", {"token": token, "context": {"title": token}})
    grant = served.ok("POST", "/tasks/claim", {"supervisor": "box", "states": ["draft"]})
    task = grant["task"]
    served.ok("PUT", f"/tasks/{task}/memory", {"key": "seen", "value": 1, "supervisor": "box"})
    served.ok("POST", f"/tasks/{task}/note", {"text": "drafted", "supervisor": "box"})
    served.ok(
        "POST",
        f"/tasks/{task}/report",
        {"kind": "event", "event": "submitted", "supervisor": "box"},
    )


def three_trees(served: Served) -> None:
    worked(served, "DONE")
    status, _ = served.request(
        "POST", "/tokens/DONE.fan.1.check/events/ok", {}, headers={"Idempotency-Key": "once"}
    )
    assert status == 200
    assert served.ok("GET", "/tokens/DONE")["status"] == "completed"
    worked(served, "GONE")
    served.ok("POST", "/tokens/GONE/cancel")
    worked(served, "LIVE")


def rows_of(backend: Backend, tokens: list[str]) -> dict[str, int]:
    listed = ", ".join(f"'{token}'" for token in tokens)
    with connected(backend) as run:
        return {
            table: run(f"SELECT count(*) FROM {table} WHERE token IN ({listed})")[0][0]
            for table in TABLES
        }


def shown(folder: Path, *args: str) -> str:
    done = run_stateous(*args, cwd=folder)
    assert done.returncode == 0, done.stderr
    return done.stdout


def metric(served: Served, name: str) -> float:
    link = served.connect()
    link.request("GET", "/metrics")
    text = link.getresponse().read().decode()
    link.close()
    return next(float(line.split()[-1]) for line in text.splitlines() if line.startswith(name))


def later(hours: int = 1) -> str:
    return (datetime.now(UTC) + timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_an_archive_reads_back_as_token_show_then_retention_removes_the_trees_whole(
    launcher: Launcher, graph: Path, backend: Backend, tmp_path: Path
) -> None:
    served = serve(launcher, graph, backend, "--keep-ended", "4s")
    three_trees(served)
    before = {
        token: shown(tmp_path, "token", "show", token, "--url", served.url)
        for token in [*ENDED, "LIVE"]
    }
    assert rows_of(backend, ENDED)["memory"] == 1  # the cancelled tree keeps its memory
    live = rows_of(backend, LIVE)

    out = tmp_path / "ended.jsonl.gz"
    said = shown(
        tmp_path, "archive", "--db", backend.db, "--ended-before", later(), "--out", str(out)
    )
    assert said == f"wrote {out}: 2 token tree(s), 4 token(s), {said.split(', ')[-1]}"
    for token in ENDED:
        assert shown(tmp_path, "archive", "show", str(out), token) == before[token]
    refused = run_stateous("archive", "show", str(out), "LIVE", cwd=tmp_path)
    assert (refused.returncode, refused.stderr) == (
        1,
        f"error: the archive {out} holds no token 'LIVE'\n",
    )

    deadline = time.monotonic() + 20
    while served.request("GET", "/tokens/DONE")[0] != 404:
        assert time.monotonic() < deadline, "retention did not remove DONE in time"
        time.sleep(0.2)
    deadline = time.monotonic() + 10
    while served.request("GET", "/tokens/GONE")[0] != 404:
        assert time.monotonic() < deadline, "retention did not remove GONE in time"
        time.sleep(0.2)
    assert set(rows_of(backend, ENDED).values()) == {0}
    assert rows_of(backend, LIVE) == live
    assert shown(tmp_path, "token", "show", "LIVE", "--url", served.url) == before["LIVE"]
    assert metric(served, "stateous_retention_removed_tokens_total") == 4
    assert served.stop() == 0
    logged = [line for line in served.lines if "retention: removed" in line]
    assert logged and all("that ended over 4s ago" in line for line in logged)


def test_archive_remove_removes_what_it_wrote_and_nothing_live(
    launcher: Launcher, graph: Path, backend: Backend, tmp_path: Path
) -> None:
    served = serve(launcher, graph, backend)
    three_trees(served)
    out = tmp_path / "ended.jsonl"
    said = shown(
        tmp_path,
        "archive",
        "--db",
        backend.db,
        "--ended-before",
        later(),
        "--out",
        str(out),
        "--remove",
    )
    assert said.splitlines()[-1] == "removed 2 token tree(s), 4 token(s)"
    assert len(out.read_text().splitlines()) == 2
    assert set(rows_of(backend, ENDED).values()) == {0}
    assert served.ok("GET", "/tokens/LIVE")["status"] == "active"
    assert metric(served, "stateous_retention_removed_tokens_total") == 4
    again = run_stateous(
        "archive",
        "--db",
        backend.db,
        "--ended-before",
        later(),
        "--out",
        str(out),
        cwd=tmp_path,
    )
    assert (again.returncode, again.stderr) == (
        2,
        f"error: {out} exists; give --force to replace it\n",
    )


def test_archive_remove_says_which_trees_retention_removed_first_and_which_changed(
    backend: Backend,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Between the file written and the removal, retention removes GONE and RETRIED is
    retried: the archive removes the third tree, and says why the other two did not go."""
    plane = plane_for(orders(), backend)
    engine = plane.engine
    engine.start("GONE", {"title": "x"})
    engine.cancel("GONE")
    plane.clock.advance(KEEP)
    for token in ("RETRIED", "KEPT"):
        engine.start(token, {"title": "x"})
        engine.cancel(token)
    plane.clock.advance(1)
    written = ended_trees

    def meanwhile(store: Store, before: str) -> Iterator[Tree]:
        yield from written(store, before)
        assert sweep(plane.store, KEEP) == 1  # what serve --keep-ended does
        engine.retry("RETRIED")

    monkeypatch.setattr("stateous.control.archive.ended_trees", meanwhile)
    out = tmp_path / "ended.jsonl"
    args = ["archive", "--db", backend.db, "--ended-before", "2100-01-01", "--out", str(out)]
    try:
        assert main([*args, "--remove"]) == 0
    finally:
        plane.store.close()

    assert capsys.readouterr().out.splitlines()[1:] == [
        "removed 1 token tree(s), 1 token(s); 1 changed since they were written and stay",
        "1 token tree(s) were removed already, by serve --keep-ended or another archive --remove",
    ]
    assert [json.loads(line)["tree"] for line in out.read_text().splitlines()] == [
        "GONE",
        "KEPT",
        "RETRIED",
    ]
    with connected(backend) as run:
        assert run("SELECT token, status FROM tokens") == [("RETRIED", "active")]


def test_an_archive_before_a_date_leaves_the_later_trees_out(
    launcher: Launcher, graph: Path, backend: Backend, tmp_path: Path
) -> None:
    served = serve(launcher, graph, backend)
    three_trees(served)
    out = tmp_path / "none.jsonl"
    said = shown(
        tmp_path, "archive", "--db", backend.db, "--ended-before", "2020-01-01", "--out", str(out)
    )
    assert said.startswith(f"wrote {out}: 0 token tree(s), 0 token(s)")
    assert out.read_text() == ""


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("5x", "error: --keep-ended: '5x' is not a duration; write e.g. '30s', '10m', '2h', '1d'"),
        (
            "0s",
            "error: --keep-ended: '0s' is not a duration: it must be longer than zero; "
            "write e.g. '30s', '10m', '2h', '1d'",
        ),
        ("9999d", "error: --keep-ended: '9999d' is too long: the longest duration is '3650d'"),
    ],
)
def test_a_bad_keep_ended_is_refused_in_one_line(
    launcher: Launcher, graph: Path, tmp_path: Path, value: str, said: str
) -> None:
    code, lines, _ = launcher.refused(graph, tmp_path / "db.sqlite", "--keep-ended", value)
    assert (code, lines) == (1, [said])
    assert not (tmp_path / "db.sqlite").exists()


def test_a_bad_date_or_a_missing_archive_is_refused_in_one_line(tmp_path: Path) -> None:
    bad = run_stateous(
        "archive", "--ended-before", "yesterday", "--out", str(tmp_path / "a"), cwd=tmp_path
    )
    assert bad.returncode == 1
    assert bad.stderr.startswith("error: --ended-before takes a date like 2026-01-31")
    missing = run_stateous("archive", "show", str(tmp_path / "nope.gz"), "X", cwd=tmp_path)
    assert (missing.returncode, missing.stderr) == (
        1,
        f"error: there is no archive at {tmp_path / 'nope.gz'}\n",
    )
