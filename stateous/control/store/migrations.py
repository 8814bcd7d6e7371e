"""The schema of the control plane's database, as ordered, numbered migrations.

The version on record lives in its own table, `stateous_version`, so that
another application's migration tool can share the database. A database made by
a newer Stateous, or one that has our tables but no version, is refused rather
than guessed at.

Both dialects make the same tables and columns. Postgres spells a few types its
own way (JSON, identity columns, the "C" collation so that times and ids sort as
SQLite sorts them) and makes SQLite's implicit `rowid` of `tokens` an explicit
column, so that the children of a token come back in the order they were made.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

from stateous.model.errors import Failure

#: Every migration, in order: its version and its statements per dialect.
MIGRATIONS: list[tuple[str, dict[str, list[str]]]] = [
    (
        "0001",
        {
            "sqlite": [
                """CREATE TABLE tokens (
                    token TEXT PRIMARY KEY,
                    state TEXT NOT NULL,
                    status TEXT NOT NULL CHECK (status IN
                        ('active', 'paused', 'completed', 'failed', 'cancelled')),
                    visit INTEGER NOT NULL,
                    context TEXT NOT NULL,
                    entered_at TEXT NOT NULL,
                    parent TEXT,
                    workflow TEXT,
                    moved_at TEXT NOT NULL
                )""",
                "CREATE UNIQUE INDEX tokens_folded ON tokens (lower(token))",
                "CREATE INDEX tokens_moved ON tokens (moved_at)",
                "CREATE INDEX tokens_status_moved ON tokens (status, moved_at)",
                "CREATE INDEX tokens_parent ON tokens (parent) WHERE parent IS NOT NULL",
                """CREATE TABLE ledger (
                    token TEXT NOT NULL,
                    seq INTEGER NOT NULL,
                    at TEXT NOT NULL,
                    kind TEXT NOT NULL,
                    key TEXT,
                    data TEXT NOT NULL,
                    PRIMARY KEY (token, seq)
                ) WITHOUT ROWID""",
                "CREATE UNIQUE INDEX ledger_key ON ledger (token, key) WHERE key IS NOT NULL",
                "CREATE INDEX ledger_deferred ON ledger (kind) WHERE kind = 'event_deferred'",
                """CREATE TABLE tasks (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    token TEXT NOT NULL,
                    state TEXT NOT NULL,
                    visit INTEGER NOT NULL,
                    status TEXT NOT NULL CHECK (status IN
                        ('queued', 'claimed', 'waiting', 'done', 'failed', 'cancelled')),
                    attempt INTEGER NOT NULL,
                    claimed_by TEXT,
                    lease_until TEXT,
                    queued_at TEXT NOT NULL
                )""",
                "CREATE INDEX tasks_queue ON tasks (state, queued_at, id) WHERE status = 'queued'",
                "CREATE INDEX tasks_lease ON tasks (lease_until) WHERE status = 'claimed'",
                "CREATE INDEX tasks_token ON tasks (token, id)",
                """CREATE TABLE timers (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    token TEXT NOT NULL,
                    state TEXT NOT NULL,
                    visit INTEGER NOT NULL,
                    event TEXT NOT NULL,
                    payload TEXT,
                    set_at TEXT NOT NULL,
                    due_at TEXT NOT NULL,
                    status TEXT NOT NULL CHECK (status IN ('pending', 'fired', 'cancelled')),
                    kind TEXT NOT NULL CHECK (kind IN ('timeout', 'timer'))
                )""",
                "CREATE INDEX timers_due ON timers (due_at, id) WHERE status = 'pending'",
                "CREATE INDEX timers_token ON timers (token) WHERE status = 'pending'",
                """CREATE TABLE memory (
                    token TEXT NOT NULL,
                    state TEXT NOT NULL,
                    key TEXT NOT NULL,
                    value TEXT NOT NULL,
                    PRIMARY KEY (token, state, key)
                ) WITHOUT ROWID""",
                """CREATE TABLE claims (
                    supervisor TEXT PRIMARY KEY,
                    request TEXT,
                    task_id INTEGER,
                    attempt INTEGER
                )""",
                """CREATE TABLE control_plane (
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    structure TEXT,
                    checksum TEXT,
                    serving TEXT,
                    since TEXT
                )""",
            ],
            "postgres": [
                """CREATE TABLE tokens (
                    rowid BIGINT GENERATED ALWAYS AS IDENTITY,
                    token TEXT COLLATE "C" PRIMARY KEY,
                    state TEXT NOT NULL,
                    status TEXT NOT NULL CHECK (status IN
                        ('active', 'paused', 'completed', 'failed', 'cancelled')),
                    visit INTEGER NOT NULL,
                    context JSON NOT NULL,
                    entered_at TEXT COLLATE "C" NOT NULL,
                    parent TEXT COLLATE "C",
                    workflow TEXT,
                    moved_at TEXT COLLATE "C" NOT NULL
                )""",
                "CREATE UNIQUE INDEX tokens_folded ON tokens (lower(token))",
                "CREATE INDEX tokens_moved ON tokens (moved_at)",
                "CREATE INDEX tokens_status_moved ON tokens (status, moved_at)",
                "CREATE INDEX tokens_parent ON tokens (parent, rowid) WHERE parent IS NOT NULL",
                """CREATE TABLE ledger (
                    token TEXT COLLATE "C" NOT NULL,
                    seq INTEGER NOT NULL,
                    at TEXT COLLATE "C" NOT NULL,
                    kind TEXT NOT NULL,
                    key TEXT,
                    data JSON NOT NULL,
                    PRIMARY KEY (token, seq)
                )""",
                "CREATE UNIQUE INDEX ledger_key ON ledger (token, key) WHERE key IS NOT NULL",
                "CREATE INDEX ledger_deferred ON ledger (kind) WHERE kind = 'event_deferred'",
                """CREATE TABLE tasks (
                    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
                    token TEXT COLLATE "C" NOT NULL,
                    state TEXT NOT NULL,
                    visit INTEGER NOT NULL,
                    status TEXT NOT NULL CHECK (status IN
                        ('queued', 'claimed', 'waiting', 'done', 'failed', 'cancelled')),
                    attempt INTEGER NOT NULL,
                    claimed_by TEXT,
                    lease_until TEXT COLLATE "C",
                    queued_at TEXT COLLATE "C" NOT NULL
                )""",
                "CREATE INDEX tasks_queue ON tasks (state, queued_at, id) WHERE status = 'queued'",
                "CREATE INDEX tasks_lease ON tasks (lease_until) WHERE status = 'claimed'",
                "CREATE INDEX tasks_token ON tasks (token, id)",
                """CREATE TABLE timers (
                    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
                    token TEXT COLLATE "C" NOT NULL,
                    state TEXT NOT NULL,
                    visit INTEGER NOT NULL,
                    event TEXT NOT NULL,
                    payload JSON,
                    set_at TEXT COLLATE "C" NOT NULL,
                    due_at TEXT COLLATE "C" NOT NULL,
                    status TEXT NOT NULL CHECK (status IN ('pending', 'fired', 'cancelled')),
                    kind TEXT NOT NULL CHECK (kind IN ('timeout', 'timer'))
                )""",
                "CREATE INDEX timers_due ON timers (due_at, id) WHERE status = 'pending'",
                "CREATE INDEX timers_token ON timers (token) WHERE status = 'pending'",
                """CREATE TABLE memory (
                    token TEXT COLLATE "C" NOT NULL,
                    state TEXT NOT NULL,
                    key TEXT NOT NULL,
                    value JSON NOT NULL,
                    PRIMARY KEY (token, state, key)
                )""",
                """CREATE TABLE claims (
                    supervisor TEXT PRIMARY KEY,
                    request TEXT,
                    task_id BIGINT,
                    attempt INTEGER
                )""",
                """CREATE TABLE control_plane (
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    structure TEXT,
                    checksum TEXT,
                    serving TEXT,
                    since TEXT COLLATE "C"
                )""",
            ],
        },
    ),
    (
        "0002",
        {
            # Each token keeps how many times it entered each state, so that a move
            # numbers its visit without counting the ledger; an index of live tasks
            # finds a token's task without reading its ended ones.
            "sqlite": [
                "ALTER TABLE tokens ADD COLUMN visits TEXT NOT NULL DEFAULT '{}'",
                "DROP INDEX tasks_token",
                "CREATE INDEX tasks_live ON tasks (token, id) "
                "WHERE status IN ('queued', 'claimed', 'waiting')",
                """UPDATE tokens SET visits = (
                    SELECT json_group_object(state, entries) FROM (
                        SELECT data ->> 'state' AS state, count(*) AS entries FROM ledger
                        WHERE ledger.token = tokens.token AND kind = 'entered' GROUP BY 1))
                WHERE token IN (SELECT token FROM ledger WHERE kind = 'entered')""",
            ],
            "postgres": [
                "ALTER TABLE tokens ADD COLUMN visits JSON NOT NULL DEFAULT '{}'",
                "DROP INDEX tasks_token",
                "CREATE INDEX tasks_live ON tasks (token, id) "
                "WHERE status IN ('queued', 'claimed', 'waiting')",
                """UPDATE tokens SET visits = counted.visits FROM (
                    SELECT token, json_object_agg(state, entries) AS visits FROM (
                        SELECT token, data ->> 'state' AS state, count(*) AS entries
                        FROM ledger WHERE kind = 'entered' GROUP BY 1, 2) AS entered
                    GROUP BY token) AS counted
                WHERE counted.token = tokens.token""",
            ],
        },
    ),
    (
        "0003",
        {
            # Postgres keeps the plan of a prepared statement. On a new database's empty
            # tables the two indexes of pending timers cost alike, and a plan may take the
            # due one to find a token's timers, reading every pending timer of every token
            # on each move until the table is analyzed. Naming `due_at` in its condition
            # leaves it to the statements that compare `due_at`.
            "sqlite": [],
            "postgres": [
                "DROP INDEX timers_due",
                "CREATE INDEX timers_due ON timers (due_at, id) "
                "WHERE status = 'pending' AND due_at IS NOT NULL",
            ],
        },
    ),
]

LATEST = MIGRATIONS[-1][0]


_CREATES = re.compile(r"CREATE TABLE (\w+)")


class SchemaError(Failure):
    """The database's schema cannot be served or brought up to date; the message says why."""


def upgrade_failed(reason: str) -> SchemaError:
    """The refusal of a schema upgrade that the database stopped, rolled back whole."""
    return SchemaError(f"the schema upgrade failed ({reason}); the database is as it was")


class Executes(Protocol):
    def execute(self, sql: str, bindings: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]: ...


_TABLE_NAMES = {
    "sqlite": "SELECT name FROM sqlite_master WHERE type = 'table'",
    "postgres": "SELECT table_name FROM information_schema.tables "
    "WHERE table_schema = current_schema()",
}


def migrate(tx: Executes, *, dialect: str) -> str:
    """Bring the schema up to the latest version in one transaction; return that version."""
    tx.execute("BEGIN IMMEDIATE" if dialect == "sqlite" else "BEGIN")
    try:
        version = _upgrade(tx, dialect)
    except BaseException:
        tx.execute("ROLLBACK")
        raise
    tx.execute("COMMIT")
    return version


def _made_by(version: str) -> set[str]:
    """The tables that the migration to `version` makes."""
    return {name for sql in dict(MIGRATIONS)[version]["sqlite"] for name in _CREATES.findall(sql)}


def _upgrade(tx: Executes, dialect: str) -> str:
    tables = {row[0] for row in tx.execute(_TABLE_NAMES[dialect])}
    current = None
    if "stateous_version" in tables:
        rows = tx.execute("SELECT version_num FROM stateous_version")
        current = max((row[0] for row in rows), default=None)
    else:
        tx.execute("CREATE TABLE stateous_version (version_num TEXT PRIMARY KEY)")
    known = [version for version, _ in MIGRATIONS]
    if current is not None and current not in known:
        raise SchemaError(
            f"the database is at schema version {current}, made by a newer Stateous; "
            f"this one knows versions up to {LATEST}"
        )
    done = known[: known.index(current) + 1] if current is not None else []
    missing = sorted(set().union(*map(_made_by, done)) - tables)
    if missing:
        raise SchemaError(
            f"the database is at schema version {current} but has no table {missing[0]}, "
            "which that version makes; serve a new database"
        )
    ahead = sorted(tables & set().union(*map(_made_by, known[len(done) :])))
    if ahead and current is None:
        raise SchemaError(
            f"the database has tables named like Stateous's ({', '.join(ahead)}) but no "
            "version in stateous_version; serve a new database"
        )
    if ahead:
        raise SchemaError(
            f"the database is at schema version {current} but already has the table "
            f"{ahead[0]}, which a later version makes; serve a new database"
        )
    for version, statements in MIGRATIONS:
        if current is not None and version <= current:
            continue
        for statement in statements[dialect]:
            tx.execute(statement)
        tx.execute("DELETE FROM stateous_version")
        tx.execute("INSERT INTO stateous_version (version_num) VALUES (?)", (version,))
    return LATEST
