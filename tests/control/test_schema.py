"""The schema's SQL files: a new database made whole from schema.sql is the one that the
numbered migrations make step by step, and the words its CHECKs and indexes name are the
vocabulary's."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

import pytest

from stateous.control.store.migrations import LATEST, VERSIONS, split, statements
from stateous.model.vocabulary import (
    LIVE_TASK,
    Kind,
    ParkingCause,
    Role,
    TaskStatus,
    TimerKind,
    TimerStatus,
    TokenStatus,
)
from tests.control.catalog import allowed, catalog, condition_words
from tests.control.support import Backend, connected, open_backend

#: The vocabulary that each column of words takes its words from.
VOCABULARY: dict[tuple[str, str], type[StrEnum]] = {
    ("tokens", "status"): TokenStatus,
    ("tasks", "status"): TaskStatus,
    ("timers", "status"): TimerStatus,
    ("timers", "kind"): TimerKind,
    ("credentials", "role"): Role,
    ("ledger", "kind"): Kind,
    ("key_parkings", "cause"): ParkingCause,
}
#: The columns whose CHECK lists every word they may hold.
CHECKED = [
    ("tokens", "status"),
    ("tasks", "status"),
    ("timers", "status"),
    ("timers", "kind"),
    ("credentials", "role"),
    ("key_parkings", "cause"),
]
PARTIAL_WITH_WORDS = [
    "ledger_deferred",
    "tasks_claimed_age",
    "tasks_contract_queue",
    "tasks_held",
    "tasks_lease",
    "tasks_live",
    "tasks_live_age",
    "tasks_queue",
    "tasks_queued_age",
    "tasks_state_age",
    "tasks_waiting_age",
    "timers_due",
    "timers_token",
    "tokens_live_checksum",
]
TABLES = {
    "tokens",
    "ledger",
    "tasks",
    "timers",
    "memory",
    "claims",
    "control_plane",
    "plans",
    "plan_tokens",
    "graphs",
}


def described(backend: Backend) -> tuple[dict, list[tuple[str]]]:
    """The backend's database as its catalog describes it, and the version on record."""
    with connected(backend) as run:
        return catalog(run, backend.name), run("SELECT version_num FROM stateous_version")


def made_by_migrate(backend: Backend) -> dict:
    """The catalog of a new database once the store has made its schema."""
    backend.store().close()
    tables, _ = described(backend)
    return tables


def test_a_new_database_made_whole_equals_one_brought_up_from_0001_step_by_step(
    backend: Backend, tmp_path: Path
) -> None:
    backend.store().close()
    folder = tmp_path / "stepwise"
    folder.mkdir()
    with open_backend(backend.name, folder) as stepwise:
        # What Stateous left at version 0001: its tables and its version on record.
        with connected(stepwise) as run:
            run("CREATE TABLE stateous_version (version_num TEXT PRIMARY KEY)")
            run("INSERT INTO stateous_version (version_num) VALUES ('0001')")
            for statement in statements(backend.name, "0001"):
                run(statement)
        stepwise.store().close()
        upgraded = described(stepwise)
    whole = described(backend)

    assert VERSIONS[0] == "0001" and len(VERSIONS) > 1
    assert whole[1] == upgraded[1] == [(LATEST,)]
    assert TABLES | {"stateous_version"} <= set(whole[0])
    assert whole[0] == upgraded[0]


def test_the_check_lists_of_the_schema_are_the_words_of_the_vocabulary(backend: Backend) -> None:
    tables = made_by_migrate(backend)
    checked = {column: allowed(tables, *column) for column in CHECKED}
    assert checked == {column: set(VOCABULARY[column]) for column in CHECKED}


def test_the_words_of_partial_index_conditions_are_words_of_the_vocabulary(
    backend: Backend,
) -> None:
    found = condition_words(made_by_migrate(backend))
    assert sorted(index for _, index in found) == PARTIAL_WITH_WORDS
    unknown = {
        (table, index, column): words - set(VOCABULARY[table, column])
        for (table, index), columns in found.items()
        for column, words in columns.items()
        if not words <= set(VOCABULARY[table, column])
    }
    assert unknown == {}
    assert found["tasks", "tasks_live"] == {"status": set(LIVE_TASK)}


def test_statements_end_at_a_line_that_ends_with_a_semicolon_and_comments_are_not_sent() -> None:
    text = (
        "-- Why this migration exists; what it changes.\n"
        "CREATE TABLE a (\n"
        "    x TEXT\n"
        ");\n"
        "\n"
        "  -- An indented comment line.\n"
        "DROP INDEX b;   \n"
        "-- Nothing after.\n"
    )
    assert split(text, "example.sql") == (
        "CREATE TABLE a (\n    x TEXT\n)",
        "DROP INDEX b",
    )
    assert split("-- No statements for this backend.\n", "example.sql") == ()


def test_a_statement_without_its_semicolon_is_refused_with_the_file_named() -> None:
    with pytest.raises(ValueError, match=r"example\.sql ends with a statement without ';'"):
        split("DROP INDEX a;\nDROP INDEX b\n", "example.sql")
