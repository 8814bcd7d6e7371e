"""Schema upgrades: a database made by an earlier version serves on, its rows carried over."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

import apsw
import msgspec
import pytest

from stateous.control.credentials import add_credential, revoke_credential
from stateous.control.http.access import Access, served_hosts
from stateous.control.http.app import Guard
from stateous.control.retention import sweep
from stateous.control.serve import record_graph
from stateous.control.store.migrations import LATEST, VERSIONS, statements
from stateous.control.store.rows import from_column
from stateous.model.vocabulary import Role
from tests.control.conftest import serving, write_graph
from tests.control.support import Backend, connected, orders, plane_for
from tests.control.test_labels import MACOS, builds
from tests.control.test_parallel import LINUX, MAC, joined_branches, matrix


def run_sql(backend: Backend, *statements: str) -> list[tuple[Any, ...]]:
    """Run statements on the backend's database outside the store; return the last one's rows."""
    rows: list[tuple[Any, ...]] = []
    with connected(backend) as run:
        for statement in statements:
            rows = run(statement)
    return rows


#: What version 0006 adds, taken away.
BEFORE_COUNTS = ("DROP TABLE counts",)
#: What takes a database of the latest version back to before 0005.
UNDO_0005 = (
    *(
        f"DROP INDEX {index}"
        for index in (
            "claims_claimed",
            "claims_heartbeat",
            "tokens_state_moved",
            "tokens_status_state_moved",
            "tokens_parent_moved",
            "tasks_live_age",
            "tasks_queued_age",
            "tasks_claimed_age",
            "tasks_waiting_age",
            "tasks_state_age",
            "tasks_held",
        )
    ),
    "ALTER TABLE claims DROP COLUMN claimed_at",
    "ALTER TABLE claims DROP COLUMN heartbeat_at",
)
#: What takes a database of the latest version back to before 0007.
UNDO_0007 = ("DROP INDEX ledger_pos", "ALTER TABLE ledger DROP COLUMN pos")
#: What takes a database of the latest version back to before 0009.
UNDO_0009 = ("DROP TABLE settings",)
#: What takes a database of the latest version back to before 0010.
UNDO_0010 = ("ALTER TABLE tokens DROP COLUMN result",)
#: What takes a database of the latest version back to before 0011.
UNDO_0011 = (
    "ALTER TABLE credentials DROP COLUMN supervisor",
    "ALTER TABLE credentials DROP COLUMN supervisor_prefix",
)
#: What takes a database of the latest version back to before 0012.
UNDO_0012 = ("ALTER TABLE credentials DROP COLUMN github",)
#: What takes a database of the latest version back to before 0014.
UNDO_0014 = ("DROP TABLE plan_tokens", "DROP TABLE plans")
#: What takes a database of the latest version back to before 0015.
UNDO_0015 = (
    "DROP INDEX tokens_live_checksum",
    "ALTER TABLE tokens DROP COLUMN checksum",
    "DROP TABLE graphs",
)
#: What takes a database of the latest version back to before 0026.
UNDO_0026 = ("DROP TABLE ledger_removed",)
#: What takes a database of the latest version back to before 0025 (one claim row a
#: supervisor, which holds its last grant).
UNDO_0025 = (
    "ALTER TABLE claims ADD COLUMN request TEXT",
    "ALTER TABLE claims ADD COLUMN task_id INTEGER",
    "ALTER TABLE claims ADD COLUMN attempt INTEGER",
    *(
        f"UPDATE claims SET {column} = (SELECT {column} FROM claim_requests c "
        "WHERE c.supervisor = claims.supervisor ORDER BY c.task_id DESC LIMIT 1)"
        for column in ("request", "task_id", "attempt")
    ),
    "DROP TABLE claim_requests",
)
#: What takes a database of version 0024 back to before 0024.
UNDO_0024 = ("ALTER TABLE claims DROP COLUMN labels",)
#: What takes a database of version 0022 back to before 0022.
UNDO_0022 = ("DROP TABLE budget_reservations", "DROP TABLE budgets")
#: What takes a database of version 0021 back to before 0021 (no parked keys).
UNDO_0021 = ("DROP TABLE key_parkings",)
#: What takes a database of version 0020 back to before 0020 (its queues by
#: `queued_at` again; the index spelled the same on both backends is enough here).
UNDO_0020 = (
    "DROP TABLE fair_clocks",
    "DROP INDEX tasks_queue",
    "DROP INDEX tasks_contract_queue",
    "ALTER TABLE tasks DROP COLUMN turn_at",
    "DROP TABLE preferred",
    "ALTER TABLE tokens DROP COLUMN priority",
    "CREATE INDEX tasks_queue ON tasks (state, queued_at, id)"
    " WHERE coalesce(waits_for, status) = 'queued'",
    "CREATE INDEX tasks_contract_queue ON tasks (contract, queued_at, id)"
    " WHERE coalesce(waits_for, status) = 'queued'",
)
#: What takes a database of version 0019 back to before 0019.
UNDO_0019 = (
    "DROP TABLE task_resources",
    "DROP TABLE resource_keys",
    "DROP TABLE resources",
    "DROP INDEX tasks_queue",
    "DROP INDEX tasks_contract_queue",
    "ALTER TABLE tasks DROP COLUMN waits_for",
    "CREATE INDEX tasks_queue ON tasks (state, queued_at, id) WHERE status = 'queued'",
    "CREATE INDEX tasks_contract_queue ON tasks (contract, queued_at, id) WHERE status = 'queued'",
)
#: What takes a database of the latest version back to before 0018.
UNDO_0018 = ("DROP TABLE schedule_history", "DROP TABLE schedules")
#: What takes a database of the latest version back to before 0017.
UNDO_0017 = ("DROP INDEX tasks_contract_queue", "ALTER TABLE tasks DROP COLUMN contract")
#: What takes a database of the latest version back to before 0016.
UNDO_0016 = ("DROP INDEX tokens_checksum_moved",)
#: What takes a database of the latest version back to 0008, the newest step first.
BACK_TO_0008 = (
    *UNDO_0026,
    *UNDO_0025,
    *UNDO_0024,
    *UNDO_0022,
    *UNDO_0021,
    *UNDO_0020,
    *UNDO_0019,
    *UNDO_0018,
    *UNDO_0017,
    *UNDO_0016,
    *UNDO_0015,
    *UNDO_0014,
    *UNDO_0012,
    *UNDO_0011,
    *UNDO_0010,
    *UNDO_0009,
)


def test_a_database_of_version_0001_counts_the_visits_from_its_ledger(backend: Backend) -> None:
    old = plane_for(orders(), backend)
    old.engine.start("A", {"title": "x"})
    old.engine.fire("A", "remind")
    old.engine.fire("A", "remind")
    old.engine.fire("A", "submitted")
    old.engine.start("B", {"title": "y"})
    old.store.close()
    # What version 0001 left: no visits column, an index of all tasks by token, no
    # credentials, no counts, and none of the listings' indexes and times of 0005.
    run_sql(
        backend,
        *BACK_TO_0008,
        *UNDO_0007,
        *BEFORE_COUNTS,
        *UNDO_0005,
        "DROP TABLE credentials",
        "ALTER TABLE tokens DROP COLUMN visits",
        "DROP INDEX tasks_live",
        "CREATE INDEX tasks_token ON tasks (token, id)",
        "UPDATE stateous_version SET version_num = '0001'",
    )
    old_rows = run_sql(backend, "SELECT count(*) FROM ledger")[0][0]

    upgraded = plane_for(orders(), backend)
    try:
        assert run_sql(backend, "SELECT version_num FROM stateous_version") == [(LATEST,)]
        back = upgraded.engine.fire("A", "reviewed", {"approved": False})
        assert (back.state, back.visit) == ("draft", 4)
        assert upgraded.entries("A")[-2] == ("entered", {"state": "draft", "visit": 4})
        assert upgraded.engine.fire("A", "submitted").visit == 2
        assert upgraded.engine.fire("B", "remind").visit == 2
        # The rows kept before are numbered by time, token and number; new ones follow.
        numbered = run_sql(backend, "SELECT at, token, seq, pos FROM ledger ORDER BY pos")
        assert [row[3] for row in numbered] == list(range(1, len(numbered) + 1))
        kept = [row[:3] for row in numbered[:old_rows]]
        assert kept == sorted(kept)
    finally:
        upgraded.store.close()


def test_a_database_of_version_0004_keeps_its_claims_and_lists_a_supervisor_once_it_claims(
    backend: Backend,
) -> None:
    old = plane_for(orders(), backend)
    old.engine.start("A", {"title": "x"})
    grant = old.engine.claim("box-1", ["draft"], "req-1")
    old.store.close()
    run_sql(
        backend,
        *BACK_TO_0008,
        *UNDO_0007,
        *BEFORE_COUNTS,
        *UNDO_0005,
        "UPDATE stateous_version SET version_num = '0004'",
    )

    upgraded = plane_for(orders(), backend)
    try:
        assert upgraded.engine.listings.supervisors().rows == []  # its row has no times yet
        again = upgraded.engine.claim("box-1", ["draft"], "req-1")  # the answer was lost
        assert grant is not None and again is not None and again.task == grant.task
        assert upgraded.engine.listings.supervisors().rows == []  # the same claim, answered again
        assert upgraded.engine.claim("box-1", ["draft"], "req-2") is None  # a new one
        [box] = upgraded.engine.listings.supervisors().rows
        assert (box.supervisor, box.tasks, box.last_heartbeat) == ("box-1", [grant.task], None)
    finally:
        upgraded.store.close()


OURS = (
    "budget_reservations, budgets, claim_requests, claims, control_plane, counts, credentials, "
    "fair_clocks, graphs, key_parkings, ledger, ledger_removed, memory, plan_tokens, plans, "
    "preferred, resource_keys, resources, schedule_history, schedules, settings, "
    "task_resources, tasks, timers, tokens"
)


@pytest.mark.parametrize(
    ("statements", "line"),
    [
        (
            ["DROP TABLE claims"],
            f"the database is at schema version {LATEST} but has no table claims, which "
            "that version makes; serve a new database",
        ),
        (
            [
                "DROP TABLE tasks",
                "DROP TABLE counts",
                "DROP TABLE credentials",
                "UPDATE stateous_version SET version_num = '0001'",
            ],
            "the database is at schema version 0001 but has no table tasks, which that "
            "version makes; serve a new database",
        ),
        (
            ["DELETE FROM stateous_version"],
            f"the database has tables named like Stateous's ({OURS}) but no version in "
            "stateous_version; serve a new database",
        ),
        (
            ["UPDATE stateous_version SET version_num = '9999'"],
            "the database is at schema version 9999, made by a newer Stateous; this one "
            f"knows versions up to {LATEST}",
        ),
    ],
    ids=["a-table-missing", "a-table-missing-before-an-upgrade", "no-version", "newer"],
)
def test_serve_refuses_a_database_that_its_version_did_not_leave_as_it_is(
    backend: Backend,
    stateous: Callable[..., CompletedProcess[str]],
    statements: list[str],
    line: str,
) -> None:
    plane_for(orders(), backend).store.close()
    run_sql(backend, *statements)
    tables = run_sql(backend, TABLE_NAMES[backend.name])
    versions = run_sql(backend, "SELECT version_num FROM stateous_version")

    graph = write_graph(backend.folder)
    done = stateous("serve", str(graph), "--db", backend.db, "--listen", "127.0.0.1:0")
    assert (done.returncode, done.stderr.splitlines()) == (1, [f"error: {line}"])
    assert run_sql(backend, TABLE_NAMES[backend.name]) == tables
    assert run_sql(backend, "SELECT version_num FROM stateous_version") == versions


TABLE_NAMES = {
    "sqlite": "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name",
    "postgres": "SELECT table_name FROM information_schema.tables "
    "WHERE table_schema = current_schema() ORDER BY 1",
}


def test_an_upgrade_that_the_database_stops_is_refused_in_one_error_line_and_rolled_back(
    backend: Backend, stateous: Callable[..., CompletedProcess[str]]
) -> None:
    plane_for(orders(), backend).store.close()
    # Version 0002's tables, recorded as 0001: the upgrade meets a column that exists.
    run_sql(
        backend,
        *BACK_TO_0008,
        *BEFORE_COUNTS,
        "DROP TABLE credentials",
        "UPDATE stateous_version SET version_num = '0001'",
    )

    graph = write_graph(backend.folder)
    done = stateous("serve", str(graph), "--db", backend.db, "--listen", "127.0.0.1:0")
    assert done.returncode == 1
    told, line = done.stderr.splitlines()
    assert told.endswith(f"upgrading the database's schema from version 0001 to {LATEST}")
    assert line.startswith("error: the schema upgrade failed (") and "visits" in line
    assert line.endswith("); the database is as it was")
    assert run_sql(backend, "SELECT version_num FROM stateous_version") == [("0001",)]


def test_a_database_of_version_0007_keeps_its_rows_their_rowids_and_the_next_ids(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """0008 makes four tables anew (their CHECKs and their partial indexes' conditions name
    words with OR): every row comes over as it was, with its rowid or id, and ids go on
    from the last one given, not from the largest kept."""
    backend = Backend("sqlite", tmp_path, str(tmp_path / "db.sqlite"))
    steps = [statement for version in VERSIONS[:7] for statement in statements("sqlite", version)]
    run_sql(
        backend,
        "CREATE TABLE stateous_version (version_num TEXT PRIMARY KEY)",
        "INSERT INTO stateous_version (version_num) VALUES ('0007')",
        *steps,
        *(
            "INSERT INTO tokens (rowid, token, state, status, visit, context, entered_at, "
            f"parent, moved_at) VALUES ({rowid}, '{token}', 'draft', 'active', 1, "
            f"'{{\"title\": \"x\"}}', '2026-01-01 00:00:00.000000', {parent}, "
            "'2026-01-01 00:00:00.000000')"
            for rowid, token, parent in ((7, "P", "NULL"), (9, "P-b", "'P'"), (12, "P-a", "'P'"))
        ),
        "INSERT INTO tasks (id, token, state, visit, status, attempt, queued_at) "
        "VALUES (5, 'P-a', 'draft', 1, 'queued', 0, '2026-01-01 00:00:00.000000')",
        "UPDATE sqlite_sequence SET seq = 40 WHERE name = 'tasks'",
        "INSERT INTO timers (id, token, state, visit, event, set_at, due_at, status, kind) "
        "VALUES (3, 'P', 'draft', 1, 'remind', '2026-01-01 00:00:00.000000', "
        "'2026-01-02 00:00:00.000000', 'pending', 'timer')",
        "INSERT INTO credentials (name, role, secret_hash, created_at) "
        "VALUES ('ops', 'operator', 'abc', '2026-01-01 00:00:00.000000')",
    )
    kept = {
        table: run_sql(backend, f"SELECT rowid, * FROM {table} ORDER BY rowid")
        for table in ("tokens", "tasks", "timers", "credentials")
    }

    with caplog.at_level(logging.INFO, logger="stateous.control.store"):
        upgraded = plane_for(orders(), backend)
    try:
        assert caplog.messages == [f"upgrading the database's schema from version 0007 to {LATEST}"]
        assert run_sql(backend, "SELECT version_num FROM stateous_version") == [(LATEST,)]
        # A credential kept before 0011 is unbound: no supervisor, no prefix.
        # Nor is it a GitHub webhook (0012).
        kept["credentials"] = [(*row, None, 0, None) for row in kept["credentials"]]
        for table, rows in kept.items():
            # `result`, of 0010; `checksum`, of 0015 (no graph was on record); a task's
            # `contract`, of 0017 (named when a control plane next starts); its `waits_for`,
            # of 0019 (it waits for no resource); a token's `priority` and a live task's
            # `turn_at` (its `queued_at`), of 0020.
            turn = pytest.approx(1767225600.0)
            added = {"tokens": (None, None, 0), "tasks": (None, None, turn)}.get(table, ())
            upgraded_rows = run_sql(backend, f"SELECT rowid, * FROM {table} ORDER BY rowid")
            assert upgraded_rows == [(*row, *added) for row in rows]
        # The children come back in the order they were made, which their rowids keep.
        children = upgraded.store.read(lambda tx: tx.children("P"))
        assert [row.token for row in children] == ["P-b", "P-a"]
        upgraded.engine.start("N", {"title": "y"})
        assert run_sql(backend, "SELECT id FROM tasks WHERE token = 'N'") == [(41,)]
        with pytest.raises(apsw.ConstraintError):
            run_sql(backend, "UPDATE tokens SET status = 'lost' WHERE token = 'P'")
    finally:
        upgraded.store.close()


@pytest.mark.parametrize("held", ["revoked", "none"])
def test_a_database_of_version_0008_that_held_a_credential_keeps_authentication_on(
    backend: Backend, held: str
) -> None:
    old = plane_for(orders(), backend)
    if held == "revoked":
        add_credential(old.store, "ops", Role.OPERATOR)
        revoke_credential(old.store, "ops", force=True)
    old.store.close()
    run_sql(
        backend,
        *BACK_TO_0008,
        "UPDATE stateous_version SET version_num = '0008'",
    )

    upgraded = plane_for(orders(), backend)
    guard = Guard(Access(upgraded.store), served_hosts("127.0.0.1", []))
    with serving(upgraded.engine, guard=guard) as served:
        status, _, answer = served.request("GET", "/tokens")
        health = served.request("GET", "/health")[2]
    assert run_sql(backend, "SELECT version_num FROM stateous_version") == [(LATEST,)]
    if held == "revoked":
        assert (status, answer["code"], health["auth"]) == (401, "unauthorized", "no_credential")
    else:
        assert (status, health["auth"]) == (200, "off")


def test_a_child_that_completed_before_0010_joins_its_parent_with_no_result(
    backend: Backend,
) -> None:
    old = plane_for(matrix(), backend)
    old.engine.start("M-1", {"repo": "acme/api"})
    old.engine.fire(LINUX, "built", {"ok": True, "log": "before"})
    old.store.close()
    run_sql(
        backend,
        *UNDO_0026,
        *UNDO_0025,
        *UNDO_0024,
        *UNDO_0022,
        *UNDO_0021,
        *UNDO_0020,
        *UNDO_0019,
        *UNDO_0018,
        *UNDO_0017,
        *UNDO_0016,
        *UNDO_0015,
        *UNDO_0014,
        *UNDO_0012,
        *UNDO_0011,
        *UNDO_0010,
        "UPDATE stateous_version SET version_num = '0009'",
    )

    upgraded = plane_for(matrix(), backend)
    try:
        upgraded.engine.fire(MAC, "built", {"ok": True, "log": "after"})
        assert upgraded.engine.get("M-1").state == "fixing"
        results = [branch["result"] for branch in joined_branches(upgraded)]
        assert results == [None, {"ok": True, "log": "after"}]
    finally:
        upgraded.store.close()


def test_a_webhook_kept_before_0012_is_no_github_hook_and_still_fires(backend: Backend) -> None:
    old = plane_for(orders(), backend)
    old.engine.start("A", {"title": "x"})
    add_credential(old.store, "ci", Role.WEBHOOK, events=["submitted"], hmac_key="stq_key")
    old.store.close()
    run_sql(
        backend,
        *UNDO_0026,
        *UNDO_0025,
        *UNDO_0024,
        *UNDO_0022,
        *UNDO_0021,
        *UNDO_0020,
        *UNDO_0019,
        *UNDO_0018,
        *UNDO_0017,
        *UNDO_0016,
        *UNDO_0015,
        *UNDO_0014,
        *UNDO_0012,
        "UPDATE stateous_version SET version_num = '0011'",
    )

    upgraded = plane_for(orders(), backend)
    try:
        assert run_sql(backend, "SELECT version_num FROM stateous_version") == [(LATEST,)]
        [row] = upgraded.store.read(lambda tx: tx.credentials())
        assert (row.name, row.events, row.github) == ("ci", ["submitted"], None)
        assert upgraded.engine.fire("A", "submitted", by="ci").state == "review"
    finally:
        upgraded.store.close()


def test_tokens_of_a_database_of_version_0014_move_by_the_graph_on_record(
    backend: Backend,
) -> None:
    old = plane_for(orders(), backend)
    old.engine.start("A", {"title": "x"})
    old.store.close()
    graph = old.engine.graph
    run_sql(
        backend,
        *UNDO_0026,
        *UNDO_0025,
        *UNDO_0024,
        *UNDO_0022,
        *UNDO_0021,
        *UNDO_0020,
        *UNDO_0019,
        *UNDO_0018,
        *UNDO_0017,
        *UNDO_0016,
        *UNDO_0015,
        f"INSERT INTO control_plane (id, structure, checksum) "
        f"VALUES (1, '{graph.structure}', '{graph.checksum}')",
        "UPDATE stateous_version SET version_num = '0014'",
    )

    upgraded = plane_for(orders(), backend)
    try:
        assert run_sql(backend, "SELECT token, checksum FROM tokens") == [("A", graph.checksum)]
        assert record_graph(upgraded.store, upgraded.engine.graphs) == []
        assert run_sql(backend, "SELECT checksum FROM graphs") == [(graph.checksum,)]
        assert upgraded.engine.fire("A", "submitted").state == "review"
        assert upgraded.engine.get("A").checksum == graph.checksum
    finally:
        upgraded.store.close()


def test_the_live_tasks_of_a_database_of_version_0015_get_their_contract_at_the_next_start(
    backend: Backend,
) -> None:
    old = plane_for(orders(), backend)
    old.engine.start("A", {"title": "x"})
    old.engine.start("B", {"title": "y"})
    old.engine.fire("B", "submitted")
    record_graph(old.store, old.engine.graphs)
    old.store.close()
    graph = old.engine.graph
    run_sql(
        backend,
        *UNDO_0026,
        *UNDO_0025,
        *UNDO_0024,
        *UNDO_0022,
        *UNDO_0021,
        *UNDO_0020,
        *UNDO_0019,
        *UNDO_0018,
        *UNDO_0017,
        *UNDO_0016,
        "UPDATE stateous_version SET version_num = '0015'",
    )

    upgraded = plane_for(orders(), backend)
    try:
        tasks = "SELECT token, state, status, contract FROM tasks ORDER BY id"
        assert [row[3] for row in run_sql(backend, tasks)] == [None, None, None]
        assert record_graph(upgraded.store, upgraded.engine.graphs) == []
        assert run_sql(backend, tasks) == [
            ("A", "draft", "queued", graph.contract("draft")),
            ("B", "draft", "cancelled", None),  # ended: never claimed again
            ("B", "review", "queued", graph.contract("review")),
        ]
        granted = upgraded.engine.claim("s1", ["review"], checksum=graph.checksum)
        assert granted is not None and granted.token == "B"
    finally:
        upgraded.store.close()


def test_the_live_tasks_of_a_database_of_version_0019_keep_their_order_by_queued_at(
    backend: Backend,
) -> None:
    old = plane_for(orders(), backend)
    for token in ("A", "B", "C"):
        old.engine.start(token, {"title": "x"})
        old.clock.advance(1)
    old.store.close()
    run_sql(
        backend,
        *UNDO_0026,
        *UNDO_0025,
        *UNDO_0024,
        *UNDO_0022,
        *UNDO_0021,
        *UNDO_0020,
        "UPDATE stateous_version SET version_num = '0019'",
    )

    upgraded = plane_for(orders(), backend)
    try:
        queued = run_sql(backend, "SELECT queued_at, turn_at FROM tasks ORDER BY id")
        assert [turn for _, turn in queued] == pytest.approx([from_column(at) for at, _ in queued])
        upgraded.engine.start("D", {"title": "x"}, priority=1)
        claims = [upgraded.engine.claim("s1", ["draft"]) for _ in range(4)]
        assert [grant.token for grant in claims if grant] == ["D", "A", "B", "C"]
    finally:
        upgraded.store.close()


def test_a_supervisor_that_claimed_before_0024_might_offer_any_label_until_it_claims_again(
    backend: Backend,
) -> None:
    old = plane_for(builds(), backend)
    old.engine.start("B-1", {})
    assert old.engine.claim_or_wait("linux-1", ["lint"], labels={"os": "linux"}).grant is not None
    old.engine.fire("B-1", "linted")
    old.store.close()
    run_sql(
        backend,
        *UNDO_0026,
        *UNDO_0025,
        *UNDO_0024,
        *UNDO_0022,
        *UNDO_0021,
        "UPDATE stateous_version SET version_num = '0020'",
    )

    upgraded = plane_for(builds(), backend)
    with serving(upgraded.engine) as served:
        # linux-1 claimed a moment ago, with labels not kept then: it might be a Mac.
        [task] = served.request("GET", "/tasks")[2]
        assert (task["state"], task["waits"]) == ("build", None)
        body = {"supervisor": "linux-1", "states": ["lint"], "labels": {"os": "linux"}}
        assert served.request("POST", "/tasks/claim", body)[0] == 204
        assert served.request("GET", "/tasks")[2][0]["waits"] == MACOS
    labels = run_sql(backend, "SELECT supervisor, labels FROM claims")
    assert labels == [("linux-1", '{"os":"linux"}')]


def test_a_database_of_version_0025_numbers_on_after_the_newest_rows_once_they_are_removed(
    backend: Backend,
) -> None:
    old = plane_for(orders(), backend)
    old.engine.start("KEPT", {"title": "x"})
    old.engine.start("ENDED", {"title": "x"})
    old.engine.cancel("ENDED")
    old.store.close()
    [(last,)] = run_sql(backend, "SELECT max(pos) FROM ledger")
    run_sql(backend, *UNDO_0026, "UPDATE stateous_version SET version_num = '0025'")

    upgraded = plane_for(orders(), backend)
    upgraded.clock.advance(120)
    assert sweep(upgraded.store, 60) == 1
    upgraded.store.close()
    again = plane_for(orders(), backend)
    try:
        again.engine.start("NEW", {"title": "x"})
    finally:
        again.store.close()
    [(first,)] = run_sql(backend, "SELECT min(pos) FROM ledger WHERE token = 'NEW'")
    assert first == last + 1


def test_a_supervisor_whose_labels_change_has_them_kept_anew_by_its_next_claim(
    backend: Backend,
) -> None:
    plane = plane_for(builds(), backend)
    try:
        for labels in ({"os": "linux"}, {"os": "linux"}, {"os": "macos", "gpu": "true"}, None):
            plane.engine.claim_or_wait("box-1", ["lint"], labels=labels)
            kept = run_sql(backend, "SELECT labels FROM claims WHERE supervisor = 'box-1'")
            assert kept == [(msgspec.json.encode(labels or {}).decode(),)]
    finally:
        plane.store.close()
