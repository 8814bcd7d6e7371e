"""`stateous backup --db URL FILE`: a copy of a live database that can be served.

Real processes throughout: a `serve` under load while `stateous backup` runs beside it,
then a second `serve` on the copy, read over HTTP. The Postgres case runs the real
`pg_dump` and `pg_restore`; a stand-in `pg_dump` on the PATH shows what the command
hands it (the password in the environment, never in the arguments).
"""

from __future__ import annotations

import http.client
import os
import shutil
import sqlite3
import stat
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from stateous.control.store import open_database
from tests.conftest import run_stateous
from tests.control.serving import Launcher, Served, orders, write_graph
from tests.control.support import NO_POSTGRES, POSTGRES

#: The order of the states of `orders` that the load sees: draft, then review.
LATER = {"draft": {"draft", "review"}, "review": {"review"}}
SECRET_PASSWORD = "hunter2-not-in-argv"


@pytest.fixture
def graph(tmp_path: Path) -> Path:
    path = tmp_path / "orders.json"
    write_graph(path, orders())
    return path


class Load:
    """Two clients that start tokens and fire `submitted` until told to stop.

    `answered` keeps the state that each 2xx answer showed, by token; any other
    answer goes to `refused`.
    """

    def __init__(self, served: Served, workers: int = 2) -> None:
        self.served = served
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.answered: dict[str, str] = {}
        self.refused: list[tuple[str, int, Any]] = []
        self.threads = [
            threading.Thread(target=self._run, args=(worker,), daemon=True)
            for worker in range(workers)
        ]
        for thread in self.threads:
            thread.start()

    def _send(self, link: http.client.HTTPConnection, token: str, path: str, body: Any) -> None:
        status, shown = self.served.request("POST", path, body, connection=link)
        with self.lock:
            if 200 <= status < 300:
                self.answered[token] = shown["state"]
            else:
                self.refused.append((token, status, shown))

    def _run(self, worker: int) -> None:
        link = self.served.connect()
        try:
            number = 0
            while not self.stop.is_set():
                token = f"w{worker}-{number}"
                self._send(link, token, "/tokens", {"token": token, "context": {"title": token}})
                if number % 2 == 0:
                    self._send(link, token, f"/tokens/{token}/events/submitted", None)
                number += 1
        finally:
            link.close()

    def snapshot(self) -> dict[str, str]:
        with self.lock:
            return dict(self.answered)

    def wait_for(self, count: int, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.snapshot()) < count:
            assert time.monotonic() < deadline, f"the load got {len(self.snapshot())} answers"
            time.sleep(0.05)

    def end(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=30)


def make_database(path: Path) -> None:
    """An empty Stateous database, as `serve` makes it."""
    open_database(f"sqlite:///{path}").close()


def files_in(folder: Path) -> set[str]:
    return {path.name for path in folder.iterdir()}


def test_a_backup_taken_under_load_serves_every_token_answered_before_it(
    launcher: Launcher, graph: Path, tmp_path: Path
) -> None:
    live = launcher.serve(graph, tmp_path / "live.sqlite")
    load = Load(live)
    load.wait_for(80)
    before = load.snapshot()
    answers_before = len(before)

    done = run_stateous(
        "backup", "--db", f"sqlite:///{tmp_path / 'live.sqlite'}", "copy.db", cwd=tmp_path
    )

    answers_during = len(load.snapshot()) - answers_before
    load.end()
    assert done.returncode == 0, done.stderr
    assert load.refused == []
    assert answers_during > 0, "serve stopped answering while the backup ran"
    wrote, restore = done.stdout.splitlines()
    assert wrote.startswith("wrote copy.db: ")
    assert " tokens, schema version " in wrote
    assert "stateous serve GRAPH --db sqlite:///copy.db" in restore
    assert "-wal" in restore and "-shm" in restore
    assert files_in(tmp_path) - {"live.sqlite", "live.sqlite-wal", "live.sqlite-shm"} == {
        "orders.json",
        "copy.db",
    }
    with sqlite3.connect(f"file:{tmp_path / 'copy.db'}?mode=ro", uri=True) as copy:
        assert copy.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        copied = copy.execute("SELECT count(*) FROM tokens").fetchone()[0]
    assert copied >= answers_before
    assert f" {copied} tokens, " in wrote

    restored = launcher.serve(graph, tmp_path / "copy.db")
    link, original = restored.connect(), live.connect()
    try:
        for token, state in before.items():
            status, shown = restored.request("GET", f"/tokens/{token}", connection=link)
            assert status == 200, (token, shown)
            assert shown["state"] in LATER[state], (token, state, shown)
            _, kept = restored.request("GET", f"/tokens/{token}/history", connection=link)
            _, now = live.request("GET", f"/tokens/{token}/history", connection=original)
            assert kept[0]["kind"] == "started"
            assert kept == now[: len(kept)], token
    finally:
        link.close()
        original.close()
    assert live.stop() == 0
    assert restored.stop() == 0


def test_a_backup_keeps_the_credentials_hashed_as_they_are(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'live.sqlite'}"
    added = run_stateous("auth", "add", "ci", "--role", "operator", "--db", db, cwd=tmp_path)
    assert added.returncode == 0, added.stderr
    secret = added.stdout.splitlines()[0]

    done = run_stateous("backup", "--db", db, str(tmp_path / "copy.db"), cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    rows = "SELECT * FROM credentials"
    with (
        sqlite3.connect(tmp_path / "live.sqlite") as live,
        sqlite3.connect(tmp_path / "copy.db") as copy,
    ):
        assert copy.execute(rows).fetchall() == live.execute(rows).fetchall() != []
    assert secret not in (tmp_path / "copy.db").read_bytes().decode("latin-1")
    listed = run_stateous("auth", "list", "--db", f"sqlite:///{tmp_path / 'copy.db'}", cwd=tmp_path)
    assert listed.stdout.startswith("ci  operator  created ")


def test_an_existing_file_is_kept_unless_force_is_given(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'live.sqlite'}"
    make_database(tmp_path / "live.sqlite")
    (tmp_path / "copy.db").write_text("an older copy")

    refused = run_stateous("backup", "--db", db, "copy.db", cwd=tmp_path)

    assert refused.returncode == 2
    assert refused.stderr == "error: copy.db exists; give --force to replace it\n"
    assert (tmp_path / "copy.db").read_text() == "an older copy"
    forced = run_stateous("backup", "--db", db, "copy.db", "--force", cwd=tmp_path)
    assert forced.returncode == 0, forced.stderr
    assert (tmp_path / "copy.db").read_bytes().startswith(b"SQLite format 3\x00")
    assert files_in(tmp_path) == {"live.sqlite", "copy.db"}


@pytest.mark.parametrize(
    ("db", "target", "says"),
    [
        (
            "mysql://db/x",
            "copy.db",
            "error: 'mysql://db/x' is neither a sqlite:/// nor a postgresql:// URL\n",
        ),
        ("sqlite:///missing.sqlite", "copy.db", "error: there is no database at missing.sqlite\n"),
        (
            "sqlite:///junk.sqlite",
            "copy.db",
            "error: junk.sqlite is not a Stateous database: file is not a database\n",
        ),
        (
            "sqlite:///other.sqlite",
            "copy.db",
            "error: other.sqlite is not a Stateous database: it has no stateous_version table\n",
        ),
        (
            "sqlite:///live.sqlite",
            "no-such-folder/copy.db",
            "error: cannot write the backup in no-such-folder: No such file or directory\n",
        ),
        (
            "sqlite:///live.sqlite",
            "junk.sqlite/copy.db",
            "error: cannot write the backup in junk.sqlite: Not a directory\n",
        ),
        ("sqlite:///live.sqlite", "live.sqlite", "error: live.sqlite is the database itself\n"),
        ("sqlite:///live.sqlite", ".", "error: . is a folder; name the backup's file\n"),
    ],
)
def test_a_bad_database_or_file_is_refused_in_one_line_and_leaves_nothing(
    tmp_path: Path, db: str, target: str, says: str
) -> None:
    make_database(tmp_path / "live.sqlite")
    (tmp_path / "junk.sqlite").write_bytes(b"not a database at all, " * 100)
    sqlite3.connect(tmp_path / "other.sqlite").execute("CREATE TABLE t (x)").connection.close()
    there = files_in(tmp_path)

    refused = run_stateous("backup", "--db", db, target, "--force", cwd=tmp_path)

    assert (refused.returncode, refused.stderr, refused.stdout) == (1, says, "")
    assert files_in(tmp_path) == there


def test_backup_help_names_its_options_and_how_postgres_is_backed_up() -> None:
    shown = run_stateous("backup", "--help", cwd=Path.cwd())

    assert shown.returncode == 0
    assert shown.stdout.startswith("usage: stateous backup [-h] [--db URL] [--force] FILE")
    assert "pg_dump" in shown.stdout


# Postgres


def fake_pg_dump(folder: Path) -> Path:
    """A `pg_dump` that records its arguments and PG* variables, and writes its --file."""
    bin_folder = folder / "bin"
    bin_folder.mkdir()
    script = bin_folder / "pg_dump"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$@" > {folder}/argv\n'
        f"env | grep ^PG | sort > {folder}/env\n"
        'while [ "$1" != "--file" ]; do shift; done\n'
        'echo dumped > "$2"\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return bin_folder


POSTGRES_URL = f"postgresql://app:{SECRET_PASSWORD}@db.example:6543/orders?sslmode=require"


def test_postgres_runs_pg_dump_with_the_password_in_its_environment_only(tmp_path: Path) -> None:
    path = f"{fake_pg_dump(tmp_path)}:{os.environ['PATH']}"

    done = run_stateous(
        "backup", "--db", POSTGRES_URL, "orders.dump", cwd=tmp_path, env={"PATH": path}
    )

    assert done.returncode == 0, done.stderr
    argv = (tmp_path / "argv").read_text().split()
    assert argv[:3] == ["--format=custom", "--no-password", "--file"]
    assert SECRET_PASSWORD not in " ".join(argv)
    env = (tmp_path / "env").read_text().splitlines()
    assert {
        "PGHOST=db.example",
        "PGPORT=6543",
        "PGUSER=app",
        "PGDATABASE=orders",
        f"PGPASSWORD={SECRET_PASSWORD}",
        "PGSSLMODE=require",
    } <= set(env)
    assert (tmp_path / "orders.dump").read_text() == "dumped\n"
    assert files_in(tmp_path) == {"bin", "argv", "env", "orders.dump"}
    assert SECRET_PASSWORD not in done.stdout + done.stderr
    assert "pg_restore" in done.stdout


def test_postgres_without_pg_dump_says_the_command_to_run_without_the_password(
    tmp_path: Path,
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()

    done = run_stateous(
        "backup", "--db", POSTGRES_URL, "orders.dump", cwd=tmp_path, env={"PATH": str(empty)}
    )

    assert done.returncode == 1
    assert done.stderr.startswith(
        "error: pg_dump is not on the PATH; install the PostgreSQL "
        "client tools and run: pg_dump --format=custom --file "
        "orders.dump --dbname '"
    )
    assert "host=db.example" in done.stderr and "sslmode=require" in done.stderr
    assert SECRET_PASSWORD not in done.stdout + done.stderr
    assert len(done.stderr.splitlines()) == 1
    assert files_in(tmp_path) == {"empty"}


@pytest.fixture
def databases() -> Any:
    """Two fresh databases on the test server, the source and the restore's, dropped after."""
    if POSTGRES is None:
        pytest.skip(NO_POSTGRES)
    if shutil.which("pg_dump") is None or shutil.which("pg_restore") is None:
        pytest.skip("pg_dump and pg_restore are not on the PATH")
    import secrets

    import psycopg

    names = [f"backup_{secrets.token_hex(4)}_{side}" for side in ("live", "restored")]
    with psycopg.connect(POSTGRES, autocommit=True) as admin:
        for name in names:
            admin.execute(f"CREATE DATABASE {name}")
    try:
        yield [urlsplit(POSTGRES)._replace(path=f"/{name}").geturl() for name in names]
    finally:
        with psycopg.connect(POSTGRES, autocommit=True) as admin:
            for name in names:
                admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_a_postgres_backup_restores_with_pg_restore_and_serves(
    launcher: Launcher, graph: Path, tmp_path: Path, databases: list[str]
) -> None:
    live_url, restored_url = databases
    live = launcher.serve(graph, None, "--db", live_url)
    for number in range(3):
        live.ok("POST", "/tokens", {"token": f"ORDER-{number}", "context": {"title": "x"}})
    live.ok("POST", "/tokens/ORDER-0/events/submitted")

    done = run_stateous("backup", "--db", live_url, "orders.dump", cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("wrote orders.dump: ")
    assert "pg_restore" in done.stdout
    assert files_in(tmp_path) == {"orders.json", "orders.dump"}
    restore = run_pg_restore(restored_url, tmp_path / "orders.dump")
    assert restore.returncode == 0, restore.stderr
    restored = launcher.serve(graph, None, "--db", restored_url)
    for number in range(3):
        token = f"ORDER-{number}"
        assert restored.history(token) == live.history(token)
    assert restored.ok("GET", "/tokens/ORDER-0")["state"] == "review"
    assert live.stop() == 0
    assert restored.stop() == 0


def run_pg_restore(url: str, dump: Path) -> Any:
    import subprocess

    return subprocess.run(
        ["pg_restore", "--no-owner", "--dbname", url, str(dump)],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.skipif(shutil.which("pg_dump") is None, reason="pg_dump is not on the PATH")
def test_a_pg_dump_that_fails_leaves_nothing_and_says_why_in_one_line(tmp_path: Path) -> None:
    url = f"postgresql://app:{SECRET_PASSWORD}@127.0.0.1:1/orders"

    done = run_stateous("backup", "--db", url, "orders.dump", cwd=tmp_path)

    assert done.returncode == 1
    assert done.stderr.startswith('error: pg_dump failed: connection to server at "127.0.0.1", ')
    assert len(done.stderr.splitlines()) == 1
    assert SECRET_PASSWORD not in done.stdout + done.stderr
    assert files_in(tmp_path) == set()


def test_a_backup_file_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    make_database(tmp_path / "live.sqlite")

    done = run_stateous("backup", "--db", "sqlite:///live.sqlite", "copy.db", cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE((tmp_path / "copy.db").stat().st_mode) == 0o600
