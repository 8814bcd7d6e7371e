"""`stateous serve --db postgresql://...` as a real process: one control plane per database."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

import psycopg
import pytest

from stateous.control.store.postgres import LOCK_CLASS
from tests.control.serving import Launcher, Served, orders, write_graph
from tests.control.support import fresh_schema
from tests.control.test_serve_process import Load, check_answered, check_tokens_whole

#: How long a refusal or a start may take: it is at once, but a loaded machine is slow.
AT_ONCE = 10.0
REFUSED_TWICE = "error: another control plane serves this database; stop it first"


@pytest.fixture
def graph(tmp_path: Path) -> Path:
    path = tmp_path / "orders.json"
    write_graph(path, orders())
    return path


def start_token(served: Served, token: str) -> dict[str, Any]:
    status, body = served.request("POST", "/tokens", {"token": token, "context": {"title": "x"}})
    assert status == 201, body
    return body  # type: ignore[no-any-return]


def test_a_second_serve_is_refused_and_after_a_kill_9_a_new_one_starts_at_once(
    launcher: Launcher, graph: Path, url: str
) -> None:
    first = launcher.serve(graph, None, "--db", url)
    start_token(first, "ORDER-1")
    first.ok("POST", "/tokens/ORDER-1/events/submitted")

    code, lines, seconds = launcher.refused(graph, None, "--db", url)
    assert (code, lines) == (1, [REFUSED_TWICE])
    assert seconds < AT_ONCE
    assert first.ok("GET", "/tokens/ORDER-1")["state"] == "review"

    assert first.kill() == -signal.SIGKILL
    second = launcher.serve(graph, None, "--db", url)
    assert time.monotonic() - second.started < AT_ONCE
    assert second.ok("GET", "/tokens/ORDER-1")["state"] == "review"
    with psycopg.connect(url) as connection:
        holder = connection.execute("SELECT serving FROM control_plane").fetchone()
    assert holder is not None and f":{second.process.pid}:" in holder[0]
    assert second.stop() == 0


def end_lock_session(url: str, *, then_hold: bool = False) -> psycopg.Connection[Any]:
    """End the session that holds the serving lock of `url`'s schema; with `then_hold`, take
    the lock in the same round trip, as another control plane would."""
    admin = psycopg.connect(url, autocommit=True)
    key = "%s, hashtext(current_schema())"
    ended = admin.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' "
        "AND classid = %s AND objid::int = hashtext(current_schema())",
        (LOCK_CLASS,),
    ).fetchall()
    assert ended == [(True,)]
    if then_hold:
        admin.execute(f"SELECT pg_advisory_lock({key})", (LOCK_CLASS,))
    return admin


def test_a_serve_whose_lock_session_ends_takes_the_lock_again_and_serves_on(
    launcher: Launcher, graph: Path, url: str
) -> None:
    served = launcher.serve(graph, None, "--db", url)
    start_token(served, "ORDER-1")

    end_lock_session(url).close()

    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        status, body = served.request("GET", "/tokens/ORDER-1")
        assert status == 200, body
        time.sleep(0.1)
    with psycopg.connect(url, autocommit=True) as admin:
        held = admin.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = %s "
            "AND objid::int = hashtext(current_schema()) AND granted",
            (LOCK_CLASS,),
        ).fetchone()
    assert held == (1,)
    assert served.stop() == 0


def test_a_serve_whose_lock_another_took_while_it_was_away_answers_not_serving_and_exits_1(
    launcher: Launcher, graph: Path, url: str
) -> None:
    served = launcher.serve(graph, None, "--db", url)
    start_token(served, "ORDER-1")
    admin = end_lock_session(url, then_hold=True)

    try:
        answers = set()
        deadline = time.monotonic() + 10
        while served.process.poll() is None and time.monotonic() < deadline:
            try:
                status, body = served.request("GET", "/tokens/ORDER-1")
            except OSError:
                break
            answers.add(status if status == 200 else (status, body["code"]))
            time.sleep(0.05)
        assert served.process.wait(timeout=10) == 1
    finally:
        admin.close()
    assert answers <= {200, (503, "not_serving")}
    assert served.rest()[-1] == (
        "error: another control plane took the database while this one could not reach it; "
        "this control plane stopped"
    )


@pytest.mark.parametrize(
    ("query", "line"),
    [
        (
            "foo=bar",
            'error: the database URL cannot be read: invalid URI query parameter: "foo"',
        ),
        (
            "options=-c%20search_path%3Dnowhere",
            "error: no schema named by the connection's search_path exists; create one or "
            "name another",
        ),
    ],
    ids=["unknown-parameter", "no-schema"],
)
def test_serve_refuses_a_database_url_it_cannot_use_in_one_line(
    stateous: Callable[..., CompletedProcess[str]], graph: Path, url: str, query: str, line: str
) -> None:
    bare = url.partition("?")[0]
    done = stateous("serve", str(graph), "--db", f"{bare}?{query}", "--listen", "127.0.0.1:0")
    assert (done.returncode, done.stderr.splitlines()) == (1, [line])


def test_a_kill_9_under_load_loses_no_answered_write_and_leaves_no_half_token(
    launcher: Launcher, graph: Path, url: str
) -> None:
    load = Load(launcher.serve(graph, None, "--db", url))

    assert load.run_then(1.5, signal.SIGKILL) == -signal.SIGKILL

    assert load.refused == []
    states = load.states
    assert len(states) > 20
    again = launcher.serve(graph, None, "--db", url)
    check_answered(again, states)
    assert again.stop() == 0
    with psycopg.connect(url) as connection:
        check_tokens_whole(lambda sql: connection.execute(sql).fetchall(), states)


def test_two_schemas_of_one_database_each_have_a_control_plane(
    launcher: Launcher, graph: Path, url: str
) -> None:
    with fresh_schema(url.partition("?")[0]) as other:
        first = launcher.serve(graph, None, "--db", url)
        second = launcher.serve(graph, None, "--db", other)
        start_token(first, "ORDER-1")
        assert second.request("GET", "/tokens/ORDER-1")[0] == 404
        start_token(second, "ORDER-1")
        assert first.stop() == 0 and second.stop() == 0


def test_serve_refuses_a_database_server_it_cannot_reach_in_one_line(
    stateous: Callable[..., CompletedProcess[str]], graph: Path
) -> None:
    closed = "postgresql://postgres@127.0.0.1:1/stateous"
    done = stateous("serve", str(graph), "--db", closed, "--listen", "127.0.0.1:0")
    [line] = done.stderr.splitlines()
    assert done.returncode == 1
    assert line.startswith("error: cannot connect to the database: "), line


def auth(url: str, folder: Path, *args: str) -> CompletedProcess[str]:
    from tests.conftest import run_stateous

    return run_stateous("auth", *args, "--db", url, cwd=folder)


def test_credentials_on_postgres_are_asked_for_and_a_revoke_counts_at_once(
    launcher: Launcher, graph: Path, url: str, tmp_path: Path
) -> None:
    # trust authentication takes any password: the refusal shows none of it
    with_password = url.replace("postgres@", "postgres:pw-not-to-show@", 1)
    code, lines, _ = launcher.refused(graph, None, "--db", with_password, listen="0.0.0.0:0")
    assert code == 1 and lines[0].startswith("error: listening on 0.0.0.0:0 lets other computers")
    assert "--db postgresql://postgres@" in lines[0] and "pw-not-to-show" not in "".join(lines)

    added = auth(url, tmp_path, "add", "ops-1", "--role", "operator")
    assert added.returncode == 0, added.stderr
    secret = added.stdout.strip()
    served = launcher.serve(graph, None, "--db", url, listen="0.0.0.0:0")
    operator = {"Authorization": f"Bearer {secret}"}
    assert served.request("GET", "/tokens")[0] == 401
    assert served.request("GET", "/tokens", headers=operator)[0] == 200

    assert auth(url, tmp_path, "revoke", "ops-1").returncode == 1  # the last operator
    assert auth(url, tmp_path, "revoke", "ops-1", "--force").returncode == 0
    status, answer = served.request("GET", "/tokens", headers=operator)
    assert (status, answer["code"]) == (401, "unauthorized")
    time.sleep(1.5)  # a beat of the clock: authentication stays on with none live
    assert served.request("GET", "/tokens")[0] == 401
    assert served.stop() == 0
