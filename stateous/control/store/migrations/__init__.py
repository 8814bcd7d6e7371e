"""The schema of the control plane's database: the whole of it, and the steps that led there.

Each backend has a folder of SQL files here, `sqlite/` and `postgres/`. `schema.sql` is the
latest schema, whole: a new database is made from it in one step and recorded at the latest
version. The numbered files `0001.sql`, `0002.sql`, ... are the migrations, in order: a
database made by an earlier Stateous is brought up from its version one file at a time. The
two ways lead to the same tables, columns and indexes (tests/control/test_schema.py compares
the databases they make), so a new migration is a numbered file per backend, the same change
made to each backend's `schema.sql`, and its version added to `VERSIONS`. The files are read
as package resources, so they are found inside the zipapp too.

A file is split into statements by lines, without parsing SQL: a line whose first non-blank
characters are `--` is a comment and is not sent; a statement ends at the first line that
ends with `;` (blanks after it aside), and it is sent without that `;`. So a comment takes
whole lines, and no line inside a statement ends with `;`. A file whose last statement has
no `;` is refused.

The version on record lives in its own table, `stateous_version`, so that another
application's migration tool can share the database. A database made by a newer Stateous,
or one that has our tables but no version, is refused rather than guessed at.

Both backends make the same tables and columns. Postgres spells a few types its own way
(JSON, identity columns, the "C" collation so that times and ids sort as SQLite sorts them)
and makes SQLite's implicit `rowid` of `tokens` an explicit column, so that the children of
a token come back in the order they were made.
"""

from __future__ import annotations

import logging
import re
from functools import cache
from importlib.resources import files
from typing import Any, Protocol

from stateous.model.errors import Failure

log = logging.getLogger("stateous.control.store")

#: Every migration's version, in order; each is a file `<version>.sql` per backend.
VERSIONS = (
    "0001",
    "0002",
    "0003",
    "0004",
    "0005",
    "0006",
    "0007",
    "0008",
    "0009",
    "0010",
    "0011",
    "0012",
    "0013",
    "0014",
    "0015",
    "0016",
    "0017",
    "0018",
    "0019",
    "0020",
    "0021",
    "0022",
    "0024",
    "0025",
    "0026",
)
LATEST = VERSIONS[-1]
#: The name of the file of the whole, latest schema, without `.sql`.
SCHEMA = "schema"

_COMMENT = re.compile(r"^\s*--")
_CREATES = re.compile(r"CREATE TABLE (\w+)")
#: A table made anew under another name takes the old one's name (0008).
_RENAMES = re.compile(r"ALTER TABLE (\w+) RENAME TO")


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


def split(text: str, source: str) -> tuple[str, ...]:
    """The statements of a SQL file, by the rule of this module's docstring."""
    found: list[str] = []
    lines: list[str] = []
    for line in text.splitlines():
        if _COMMENT.match(line):
            continue
        lines.append(line.rstrip())
        if lines[-1].endswith(";"):
            found.append("\n".join(lines).strip().removesuffix(";"))
            lines = []
    if "".join(lines).strip():
        raise ValueError(f"{source} ends with a statement without ';'")
    return tuple(found)


@cache
def statements(dialect: str, name: str) -> tuple[str, ...]:
    """The statements of one file of `dialect`: a version of `VERSIONS`, or `SCHEMA`."""
    path = files(__name__) / dialect / f"{name}.sql"
    return split(path.read_text(encoding="utf-8"), f"{dialect}/{name}.sql")


def _made_by(version: str) -> set[str]:
    """The tables that the migration to `version` makes (not those it makes anew under
    another name, then renames to a table's name)."""
    sql = "\n".join(statements("sqlite", version))
    return set(_CREATES.findall(sql)) - set(_RENAMES.findall(sql))


def _upgrade(tx: Executes, dialect: str) -> str:
    tables = {row[0] for row in tx.execute(_TABLE_NAMES[dialect])}
    current = None
    if "stateous_version" in tables:
        rows = tx.execute("SELECT version_num FROM stateous_version")
        current = max((row[0] for row in rows), default=None)
    else:
        tx.execute("CREATE TABLE stateous_version (version_num TEXT PRIMARY KEY)")
    if current is not None and current not in VERSIONS:
        raise SchemaError(
            f"the database is at schema version {current}, made by a newer Stateous; "
            f"this one knows versions up to {LATEST}"
        )
    done = VERSIONS[: VERSIONS.index(current) + 1] if current is not None else []
    missing = sorted(set().union(*map(_made_by, done)) - tables)
    if missing:
        raise SchemaError(
            f"the database is at schema version {current} but has no table {missing[0]}, "
            "which that version makes; serve a new database"
        )
    ahead = sorted(tables & set().union(*map(_made_by, VERSIONS[len(done) :])))
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
    _apply(tx, dialect, current)
    return LATEST


def _apply(tx: Executes, dialect: str, current: str | None) -> None:
    """Make a new database from the whole schema, or run each migration after `current`."""
    if current is None:
        steps = [(SCHEMA, LATEST)]
    else:
        steps = [(version, version) for version in VERSIONS if version > current]
        if steps:
            # An upgrade may copy whole tables (0008): tell why the start takes its time.
            log.info("upgrading the database's schema from version %s to %s", current, LATEST)
    for name, version in steps:
        for statement in statements(dialect, name):
            tx.execute(statement)
        tx.execute("DELETE FROM stateous_version")
        tx.execute("INSERT INTO stateous_version (version_num) VALUES (?)", (version,))
