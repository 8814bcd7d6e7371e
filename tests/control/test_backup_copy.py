"""The online copy of a SQLite database: one snapshot, however busy the writer is.

SQLite's backup API starts over when another connection commits between two of its
steps; the copy holds one read transaction from its first step to its last, so it
ends, in small steps, while a writer commits all the time.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import apsw

from stateous.control.store.backup import copy_sqlite
from stateous.control.store.sqlite import SqliteStore, connect

ROWS = 2000
#: How long the writer writes at most; the copy takes a fraction of a second.
WRITING = 10.0


def test_a_copy_in_one_page_steps_ends_while_a_writer_commits_all_the_time(
    tmp_path: Path,
) -> None:
    live = tmp_path / "live.sqlite"
    SqliteStore(live).close()
    writer = connect(str(live))
    writer.execute("PRAGMA synchronous = OFF")
    writer.execute("CREATE TABLE filler (row BLOB)")
    with writer:
        for _ in range(ROWS):
            writer.execute("INSERT INTO filler VALUES (randomblob(1000))")
    deadline = time.monotonic() + WRITING
    stop = threading.Event()
    commits = [0]

    def write() -> None:
        while not stop.is_set() and time.monotonic() < deadline:
            writer.execute("INSERT INTO filler VALUES (randomblob(1000))")
            commits[0] += 1

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    copied = copy_sqlite(str(live), str(tmp_path / "copy.db"), pages=1)
    ended = time.monotonic()
    stop.set()
    thread.join()
    writer.close()

    assert ended < deadline, "the copy ended only once the writer stopped"
    assert copied.tokens == 0
    copy = apsw.Connection(str(tmp_path / "copy.db"))
    rows = copy.execute("SELECT count(*) FROM filler").fetchall()[0][0]
    assert ROWS <= rows < ROWS + commits[0]
    assert copy.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    copy.close()
