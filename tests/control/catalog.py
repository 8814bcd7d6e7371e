"""What a database says of its own schema: tables, columns, indexes and constraints.

Each backend is read from its own catalog (SQLite's pragmas and `sqlite_master`,
Postgres's `information_schema`, `pg_indexes` and `pg_constraint`) into plain values,
so that two databases compare with `==` and a failure shows the difference.
"""

from __future__ import annotations

import re
from typing import Any

from tests.control.support import Run

#: A CHECK clause's opening, up to its first parenthesis.
_CHECK = re.compile(r"\bCHECK\s*\(", re.IGNORECASE)
_WHERE = " WHERE "


def one_line(sql: str) -> str:
    """SQL with each run of blanks and line ends made one space."""
    return " ".join(sql.split())


def check_clauses(sql: str) -> list[str]:
    """The text inside each `CHECK (...)` of a CREATE TABLE statement, on one line."""
    clauses = []
    for match in _CHECK.finditer(sql):
        depth, end = 1, match.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(sql[end], 0)
            end += 1
        clauses.append(one_line(sql[match.end() : end - 1]))
    return clauses


def compared(clause: str) -> tuple[str, set[str]]:
    """The column that a CHECK clause or an index condition's term compares, and the
    literals it compares it with (none for `IS NOT NULL` or `id = 1`). The queues' term
    `coalesce(waits_for, status) = 'queued'` compares `status`: a `waits_for` is never a
    word (0019)."""
    clause = re.sub(r"(?i)coalesce\(\s*[a-z_]+\s*,\s*([a-z_]+)\s*\)", r"\1", clause)
    column = re.search(r"[a-z_]+", clause)
    assert column is not None, clause
    return column.group(), set(re.findall(r"'([^']*)'", clause))


def sqlite_catalog(run: Run) -> dict[str, Any]:
    """Every table of a SQLite database: its shape, columns, CHECKs, keys and indexes."""
    tables = run("SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY name")
    return {name: _sqlite_table(run, name, sql) for name, sql in tables}


def _sqlite_table(run: Run, name: str, sql: str) -> dict[str, Any]:
    indexes = run(
        'SELECT name, "unique", origin, partial FROM pragma_index_list(' + f"'{name}') ORDER BY 1"
    )
    return {
        "shape": run(f"SELECT type, ncol, wr, strict FROM pragma_table_list('{name}')"),
        "columns": run(
            'SELECT cid, name, type, "notnull", dflt_value, pk, hidden '
            f"FROM pragma_table_xinfo('{name}') ORDER BY cid"
        ),
        "checks": sorted(check_clauses(sql)),
        "autoincrement": "AUTOINCREMENT" in sql.upper(),
        "foreign_keys": run(f"SELECT * FROM pragma_foreign_key_list('{name}')"),
        "indexes": {index: _sqlite_index(run, index, rest) for index, *rest in indexes},
    }


def _sqlite_index(run: Run, name: str, listed: list[Any]) -> dict[str, Any]:
    # The key of a WITHOUT ROWID table, and an index made for a constraint, have no SQL.
    made = run(f"SELECT sql FROM sqlite_master WHERE type = 'index' AND name = '{name}'")
    definition = one_line(made[0][0]) if made and made[0][0] else None
    return {
        "listed": listed,
        "keys": run(f"SELECT * FROM pragma_index_xinfo('{name}') ORDER BY seqno"),
        "definition": definition,
        "condition": definition.partition(_WHERE)[2] if definition else "",
    }


def postgres_catalog(run: Run) -> dict[str, Any]:
    """Every table of the current Postgres schema: its columns, indexes and constraints."""
    [(schema,)] = run("SELECT current_schema()")
    tables = run(
        "SELECT table_name FROM information_schema.tables "
        "WHERE table_schema = current_schema() ORDER BY 1"
    )
    return {name: _postgres_table(run, name, schema) for (name,) in tables}


def _postgres_table(run: Run, name: str, schema: str) -> dict[str, Any]:
    constraints = run(
        "SELECT conname, contype, pg_get_constraintdef(oid) FROM pg_constraint "
        f"WHERE conrelid = '{name}'::regclass ORDER BY 1"
    )
    indexes = run(
        "SELECT indexname, indexdef FROM pg_indexes "
        f"WHERE schemaname = current_schema() AND tablename = '{name}' ORDER BY 1"
    )
    return {
        "columns": run(
            "SELECT ordinal_position, column_name, data_type, is_nullable, column_default, "
            "collation_name, is_identity, identity_generation FROM information_schema.columns "
            f"WHERE table_schema = current_schema() AND table_name = '{name}' ORDER BY 1"
        ),
        "constraints": constraints,
        "checks": sorted(
            definition.removeprefix("CHECK ") for _, kind, definition in constraints if kind == "c"
        ),
        "indexes": {
            index: _postgres_index(definition.replace(f" {schema}.", " "))
            for index, definition in indexes
        },
    }


def _postgres_index(definition: str) -> dict[str, str]:
    return {"definition": definition, "condition": definition.partition(_WHERE)[2]}


def catalog(run: Run, dialect: str) -> dict[str, Any]:
    """The description of the database that `run` reaches, read the way its backend keeps it."""
    return sqlite_catalog(run) if dialect == "sqlite" else postgres_catalog(run)


def allowed(tables: dict[str, Any], table: str, column: str) -> set[str]:
    """The words that the CHECK on `table.column` lets in."""
    [words] = [
        words
        for check in tables[table]["checks"]
        for named, words in [compared(check)]
        if named == column
    ]
    return words


def condition_words(tables: dict[str, Any]) -> dict[tuple[str, str], dict[str, set[str]]]:
    """The words that each partial index's condition compares a column with, by table and
    index, then by column; conditions without words (`IS NOT NULL`) are left out."""
    found: dict[tuple[str, str], dict[str, set[str]]] = {}
    for table, described in tables.items():
        for index, parts in described["indexes"].items():
            terms = [term for term in re.split(r"\bAND\b", parts["condition"]) if term.strip()]
            for column, words in map(compared, terms):
                if words:
                    found.setdefault((table, index), {})[column] = words
    return found
