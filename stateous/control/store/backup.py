"""Backups of a live database: an online copy of a SQLite file, and what `pg_dump` needs.

SQLite: SQLite's backup API, through APSW, copies the database page by page into
another file while `serve` goes on. The copy's connection opens a read
transaction first and keeps it to the end, so every page it copies belongs to
one moment: what was committed when the copy began, whatever `serve` commits
meanwhile (without it, a commit of `serve` would make the copy start over, and a
busy database would never be copied). A Stateous database is in WAL mode, where a
reader never blocks the writer: `serve` goes on committing, and only its
checkpoints wait for the copy to end, so its WAL file grows meanwhile. The copy
goes in steps of a few hundred pages, each a short call, so that Ctrl-C stops it
between two.

Postgres: `pg_dump` makes the copy. The connection's settings go to it through
libpq's environment variables (PGHOST, PGPORT, ..., PGPASSWORD), never through
its arguments, which every user of the machine can read in the list of processes.

This module takes no serving lock: a backup is made beside the control plane.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import apsw

from stateous.model.errors import Failure

#: The pages that one step of the copy takes (1 MB with SQLite's default page size).
STEP_PAGES = 256
#: How long a step may wait for a lock of the database, in milliseconds.
BUSY_MILLISECONDS = 10_000

#: libpq's environment variable for each connection parameter that a URL may carry.
LIBPQ_VARIABLES = {
    "host": "PGHOST",
    "hostaddr": "PGHOSTADDR",
    "port": "PGPORT",
    "dbname": "PGDATABASE",
    "user": "PGUSER",
    "password": "PGPASSWORD",
    "passfile": "PGPASSFILE",
    "service": "PGSERVICE",
    "options": "PGOPTIONS",
    "application_name": "PGAPPNAME",
    "connect_timeout": "PGCONNECT_TIMEOUT",
    "sslmode": "PGSSLMODE",
    "sslrootcert": "PGSSLROOTCERT",
    "sslcert": "PGSSLCERT",
    "sslkey": "PGSSLKEY",
    "sslcrl": "PGSSLCRL",
    "sslcrldir": "PGSSLCRLDIR",
    "sslsni": "PGSSLSNI",
    "requirepeer": "PGREQUIREPEER",
    "ssl_min_protocol_version": "PGSSLMINPROTOCOLVERSION",
    "ssl_max_protocol_version": "PGSSLMAXPROTOCOLVERSION",
    "gssencmode": "PGGSSENCMODE",
    "krbsrvname": "PGKRBSRVNAME",
    "gsslib": "PGGSSLIB",
    "channel_binding": "PGCHANNELBINDING",
    "target_session_attrs": "PGTARGETSESSIONATTRS",
    "load_balance_hosts": "PGLOADBALANCEHOSTS",
}


class BackupFailed(Failure):
    """A backup cannot be made; the message says why in one sentence."""


@dataclass(frozen=True)
class Copied:
    """What a SQLite copy holds: its tokens and its schema version."""

    tokens: int
    version: str


def copy_sqlite(path: str, target: str, *, pages: int = STEP_PAGES) -> Copied:
    """Copy the live database at `path` into the empty file `target`, and check the copy."""
    if not os.path.isfile(path):
        raise BackupFailed(f"there is no database at {path}")
    try:
        source = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READWRITE)
    except apsw.Error as ex:
        raise BackupFailed(f"cannot open the database {path}: {ex}") from None
    try:
        source.setbusytimeout(BUSY_MILLISECONDS)
        source.execute("BEGIN")
        _check_tables(source, path)
        return _copy(source, path, target, pages)
    finally:
        source.close()


def _check_tables(source: apsw.Connection, path: str) -> None:
    """Refuse a file that is not a Stateous database; the read starts the copy's snapshot."""
    try:
        tables = {row[0] for row in source.execute("SELECT name FROM sqlite_master")}
    except apsw.Error as ex:
        raise BackupFailed(f"{path} is not a Stateous database: {ex}") from None
    if "stateous_version" not in tables:
        raise BackupFailed(f"{path} is not a Stateous database: it has no stateous_version table")


def _copy(source: apsw.Connection, path: str, target: str, pages: int) -> Copied:
    try:
        destination = apsw.Connection(target)
    except apsw.Error as ex:
        raise BackupFailed(f"cannot write the backup {target}: {ex}") from None
    try:
        with destination.backup("main", source, "main") as backup:
            while not backup.done:
                backup.step(pages)
        checked = destination.execute("PRAGMA integrity_check").fetchall()
        if checked != [("ok",)]:
            raise BackupFailed(f"the copy of {path} failed its integrity check: {checked[0][0]}")
        tokens: Any = destination.execute("SELECT count(*) FROM tokens").fetchall()[0][0]
        version = destination.execute("SELECT max(version_num) FROM stateous_version")
        return Copied(tokens=int(tokens), version=str(version.fetchall()[0][0]))
    except apsw.Error as ex:
        raise BackupFailed(f"the backup of {path} failed: {ex}") from None
    finally:
        destination.close()


@dataclass(frozen=True)
class DumpSettings:
    """How `pg_dump` reaches a database: libpq's variables, and a line safe to show."""

    #: PGHOST, PGPORT, ..., with PGPASSWORD when the URL holds one.
    environment: dict[str, str]
    #: The same connection as `key=value` settings, without the password.
    shown: str
    #: The URL's settings that no environment variable carries (keepalives, say).
    unpassable: tuple[str, ...]


def dump_settings(url: str) -> DumpSettings:
    """Read a Postgres URL into the settings of `pg_dump`."""
    try:
        from psycopg import ProgrammingError
        from psycopg.conninfo import conninfo_to_dict, make_conninfo
    except ModuleNotFoundError as ex:
        if (ex.name or "").partition(".")[0] != "psycopg":
            raise
        raise BackupFailed(
            "reading a Postgres URL needs psycopg, which is missing; install stateous[postgres]"
        ) from None
    try:
        given = {name: str(value) for name, value in conninfo_to_dict(url).items()}
    except ProgrammingError as ex:
        first = (str(ex).strip().splitlines() or ["it does not parse"])[0]
        raise BackupFailed(f"the database URL cannot be read: {first}") from None
    shown = make_conninfo(**{name: value for name, value in given.items() if name != "password"})
    return DumpSettings(
        environment={
            LIBPQ_VARIABLES[name]: value for name, value in given.items() if name in LIBPQ_VARIABLES
        },
        shown=shown,
        unpassable=tuple(sorted(set(given) - set(LIBPQ_VARIABLES))),
    )
