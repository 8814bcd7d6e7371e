"""The statements of one transaction on one connection, sent in libpq's pipeline mode.

A move is a handful of small statements, on which psycopg's cursors spend more
time than Postgres does, so a transaction goes out through psycopg's binding of
libpq itself: each statement is prepared once per connection, then executed with
its values bound as parameters (dumped as text by psycopg's adapters, typed by the
server from the statement, as it types literals); a statement whose rows are not
read goes out at once without waiting, and `sync` reads the answers of everything
sent so far in one round trip. Rows come back through psycopg's loaders.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from psycopg import errors, generators, pq
from psycopg.adapt import PyFormat, Transformer

if TYPE_CHECKING:
    from stateous.control.store.postgres.connection import Connection

TUPLES_OK = pq.ExecStatus.TUPLES_OK
FATAL_ERROR = pq.ExecStatus.FATAL_ERROR
PIPELINE_SYNC = pq.ExecStatus.PIPELINE_SYNC
Rows = list[tuple[Any, ...]]


class Prepared:
    """The statements a connection has prepared, by their SQL (`$1` placeholders)."""

    def __init__(self) -> None:
        self.names: dict[str, bytes] = {}
        #: A name is never used twice: a PREPARE whose round trip failed may still exist.
        self._numbers = itertools.count(1)

    def new_name(self) -> bytes:
        return f"stateous_{next(self._numbers)}".encode()


class Pipeline:
    """One transaction's statements on `connection`, in pipeline mode until `close`."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.pgconn = connection.pgconn
        self.prepared: Prepared = connection.prepared_statements
        self.transformer = Transformer(connection)
        #: For each answer due before the next sync: whether its rows are wanted.
        self._due: list[bool] = []
        #: Statements prepared since the last sync, known prepared once it succeeds.
        self._fresh: dict[str, bytes] = {}
        self.pgconn.enter_pipeline_mode()

    def send(self, sql: str, values: tuple[Any, ...], *, rows: bool = False) -> None:
        """Send one statement with its values as parameters; `rows` when its rows are read
        at the next `sync`."""
        name = self.prepared.names.get(sql) or self._fresh.get(sql)
        if name is None:
            name = self._fresh[sql] = self.prepared.new_name()
            self.pgconn.send_prepare(name, sql.encode())
            self._due.append(False)
        params = self.transformer.dump_sequence(values, [PyFormat.TEXT] * len(values))
        self.pgconn.send_query_prepared(name, params or None)
        self._due.append(rows)

    def sync(self) -> list[Rows]:
        """Wait for the answers of everything sent so far; answer the rows of each statement
        sent with `rows`, in order. The first error is raised once every answer is in, so
        the connection is ready for the ROLLBACK."""
        self.pgconn.pipeline_sync()
        self.connection.wait(generators.send(self.pgconn))
        due, self._due = self._due, []
        fresh, self._fresh = self._fresh, {}
        answers: list[Rows] = []
        error: Exception | None = None
        at = 0
        while True:
            for result in self.connection.wait(generators.fetch_many(self.pgconn)):
                if result.status == PIPELINE_SYNC:
                    if error is not None:
                        raise error
                    self.prepared.names.update(fresh)
                    return answers
                if result.status == FATAL_ERROR and error is None:
                    error = errors.error_from_result(result, encoding="utf-8")
                wanted = at < len(due) and due[at]
                at += 1
                if wanted:
                    answers.append(self._rows(result))

    def _rows(self, result: pq.abc.PGresult) -> Rows:
        if result.status != TUPLES_OK:
            return []
        self.transformer.set_pgresult(result)
        return self.transformer.load_rows(0, result.ntuples, tuple)

    def close(self) -> None:
        """Leave pipeline mode, with every answer read; a broken connection is left as it is."""
        if self.pgconn.status == pq.ConnStatus.OK:
            self.pgconn.exit_pipeline_mode()
