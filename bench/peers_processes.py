"""What the processes of bench_peers.py used: CPU seconds from /proc, and fresh Postgres databases.

A process's CPU counts its live children too (hypercorn's, a supervisor's), read from
`/proc/*/stat`; a Postgres database's CPU is that of the backends serving it, found in
`pg_stat_activity` (the bench's own look-ups go through the admin database, not
counted). Readings are kept per process id, so a backend that appeared between two
readings counts whole.
"""

from __future__ import annotations

import os
from pathlib import Path

import psycopg
from psycopg import sql

ADMIN_URL = os.environ.get("PEERS_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
TICK = os.sysconf("SC_CLK_TCK")
DROP = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")

#: CPU seconds by role, then by process id.
Reading = dict[str, dict[int, float]]


def _stat(pid: int) -> tuple[int, float] | None:
    """A process's parent id and its CPU seconds (user and system), or None once gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK


def tree_cpu(pid: int) -> float:
    """The CPU seconds of a process and of its live descendants."""
    parents: dict[int, list[int]] = {}
    used: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            found = _stat(int(entry.name))
            if found:
                parents.setdefault(found[0], []).append(int(entry.name))
                used[int(entry.name)] = found[1]
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        total += used.get(current, 0.0)
        todo.extend(parents.get(current, []))
    return total


def backends(database: str) -> list[int]:
    """The ids of the Postgres backends connected to `database`."""
    with psycopg.connect(ADMIN_URL, autocommit=True) as connection:
        rows = connection.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s", (database,)
        ).fetchall()
    return [row[0] for row in rows]


def reading(processes: dict[str, int], database: str | None) -> Reading:
    """The CPU used so far by each role's process, and by `database`'s backends."""
    found = {role: {pid: tree_cpu(pid)} for role, pid in processes.items()}
    if database:
        found["Postgres backends"] = {
            pid: used for pid in backends(database) if (used := (_stat(pid) or (0, 0.0))[1])
        }
    return found


def used_between(before: Reading, after: Reading) -> dict[str, float]:
    """CPU seconds each role used between two readings."""
    return {
        role: sum(max(0.0, used - before.get(role, {}).get(pid, 0.0)) for pid, used in pids.items())
        for role, pids in after.items()
    }


def create_database(name: str) -> str:
    """A new, empty Postgres database (dropped first if a killed run left it); its URL."""
    with psycopg.connect(ADMIN_URL, autocommit=True) as connection:
        connection.execute(DROP.format(sql.Identifier(name)))
        connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return ADMIN_URL.rsplit("/", 1)[0] + "/" + name


def drop_database(name: str) -> None:
    with psycopg.connect(ADMIN_URL, autocommit=True) as connection:
        connection.execute(DROP.format(sql.Identifier(name)))


def postgres_durability() -> str:
    """The server's settings that decide whether a commit is on disk when it returns."""
    with psycopg.connect(ADMIN_URL, autocommit=True) as connection:
        names = ("fsync", "synchronous_commit", "wal_sync_method", "full_page_writes")
        values = [
            connection.execute("SELECT current_setting(%s)", (name,)).fetchone()[0]
            for name in names
        ]
    return ", ".join(f"{name}={value}" for name, value in zip(names, values, strict=True))
