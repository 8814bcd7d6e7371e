"""The outbox keeps spends: one made before spends existed is made anew with them at the
supervisor's start, its messages kept in their order."""

from __future__ import annotations

from pathlib import Path

import apsw

from stateous.supervisor.outbox import Outbox

#: The messages table as an outbox made before spends has it.
BEFORE = """
CREATE TABLE messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    task INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    token TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('report', 'note', 'memory')),
    body TEXT NOT NULL,
    created_at REAL NOT NULL
)
"""


def test_an_outbox_made_before_spends_keeps_its_messages_and_takes_a_spend(
    tmp_path: Path,
) -> None:
    place = tmp_path / ".stateous"
    place.mkdir()
    old = apsw.Connection(str(place / "outbox.db"))
    old.execute(BEFORE)
    old.execute(
        "INSERT INTO messages (task, attempt, token, kind, body, created_at) "
        "VALUES (3, 1, 'T', 'note', '{\"text\": \"step 1\"}', 0)"
    )
    old.close()
    outbox = Outbox(tmp_path)
    try:
        outbox.put(3, 1, "T", "spend", {"spent": {"usd": 0.12}})
        kept = [(message.kind, message.body) for message in outbox.pending()]
    finally:
        outbox.close()
    assert kept == [("note", {"text": "step 1"}), ("spend", {"spent": {"usd": 0.12}})]
