"""The store: where the control plane keeps tokens, the ledger, tasks and timers.

Nothing here decides: the engine does. The engine hands the store an operation, a
function of one `Tx`, and the store promises:

- **One transaction.** `write` runs the operation in one transaction and commits
  everything it wrote (tokens, ledger rows, tasks, timers, memory) together or
  nothing; it returns only once the commit is on disk, so an answer means the
  change is kept. `read` runs it on one consistent snapshot and writes nothing.
- **Or one unit of work.** Inside `with store.turn() as turn:` (`turn.py`), a write
  joins the turn's transaction instead, in a savepoint of its own (one that fails
  rolls back alone), and a read sees what the turn wrote; leaving the block commits
  them all, or raises `DatabaseBusy` with none kept, and only then runs what was
  given to `turn.after` (an answer, a waking). On SQLite a turn waits for the
  database a short while (`sqlite.TURN_BUSY_MILLISECONDS`), not the busy timeout,
  then refuses its writes as busy; `turn.begin(wake)` waits for no write of this
  process at all: it answers False while one holds the database, and `wake` is called
  once that one has passed it on (the turn goes next). On Postgres, where each write
  commits on its own, a turn opens nothing.
- **Run again, so pure.** An operation may run more than once: the Postgres store
  runs it once more when it met another transaction (a deadlock, a unique key
  taken at the same moment); SQLite runs it once. So an operation is a function
  of its arguments and of what it reads through its `Tx`: it changes nothing
  outside, and keeps nothing from one run for the next.
- **Keep, then refuse.** An operation that raises `KeepAndRaise(error)` has what
  it wrote so far committed, then `error` raised to the caller: a refused event
  is recorded (`event_rejected`) and still answered as a refusal. Any other
  exception rolls the whole operation back.
- **Refusals of its own.** `DatabaseBusy` when the database cannot take the
  request now (nothing was written; try again); on Postgres, `OutcomeUnknown`
  when a COMMIT went unanswered and the database cannot say whether it kept it;
  after `fence`, the error it was fenced with.
- **One token at a time.** In a write, a token read is held until the commit:
  SQLite has one writer; Postgres locks the token's row (the top token of its
  family first), so each token moves one step at a time while others move beside.

`Tx.now` is the transaction's time; every row it writes carries it. Rows come
back typed (`rows.py`). The SQL is written once for both databases, each verb in one
class of statements (`sql.py` and those beside it), and what a change keeps beside its
rows (its counts, the queues it woke) by watchers its transaction holds (`watchers.py`);
each backend adds only what its database does its own way. A control plane
holds its database by a `Lock` that lives as long as its process (`locks.py`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from types import ModuleType

from stateous.control.store.budget_sql import BudgetRow
from stateous.control.store.columns import QueueBy, Queues
from stateous.control.store.contract import KeepAndRaise, Result, Store, Tx
from stateous.control.store.counts import Counter
from stateous.control.store.fleet_sql import Seen
from stateous.control.store.listing_sql import SupervisorRow, TaskQuery, TokenQuery
from stateous.control.store.locks import Lock, TenureLost, TenureRefused
from stateous.control.store.parking_sql import ParkingRow
from stateous.control.store.plan_sql import PlanRow, PlanTokenRow
from stateous.control.store.resource_sql import KeyRow, ResourceRow, TakerRow, UseRow
from stateous.control.store.retention_sql import Removed, Tree
from stateous.control.store.rows import (
    ClaimReads,
    ControlRow,
    CredentialRow,
    Entry,
    GrantReads,
    GraphVersion,
    TaskRow,
    TimerRow,
    TokenRow,
    from_column,
    to_column,
    to_iso,
)
from stateous.control.store.schedule_sql import ScheduleRow
from stateous.control.store.turn import COMMITTED, Turn, joined
from stateous.model.errors import Failure

#: The schemes of a Postgres URL.
POSTGRES = ("postgresql://", "postgres://")

__all__ = [
    "COMMITTED",
    "POSTGRES",
    "BudgetRow",
    "ClaimReads",
    "ControlRow",
    "Counter",
    "CredentialRow",
    "Entry",
    "GrantReads",
    "GraphVersion",
    "KeepAndRaise",
    "KeyRow",
    "Lock",
    "ParkingRow",
    "PlanRow",
    "PlanTokenRow",
    "QueueBy",
    "Queues",
    "Removed",
    "ResourceRow",
    "Result",
    "ScheduleRow",
    "Seen",
    "Store",
    "StoreError",
    "SupervisorRow",
    "TakerRow",
    "TaskQuery",
    "TaskRow",
    "TenureLost",
    "TenureRefused",
    "TimerRow",
    "TokenQuery",
    "TokenRow",
    "Tree",
    "Turn",
    "Tx",
    "UnknownUrl",
    "UseRow",
    "from_column",
    "joined",
    "open_database",
    "open_locked",
    "open_store",
    "serving_lock",
    "sqlite_path",
    "to_column",
    "to_iso",
]


class StoreError(Failure):
    """A database cannot be opened; the message says why in one sentence."""


class UnknownUrl(StoreError):
    """A database URL names neither a SQLite file nor a Postgres database."""


def sqlite_path(url: str) -> str:
    """The file of a `sqlite:///path` URL (four slashes for an absolute path)."""
    if url.startswith("sqlite:///") and len(url) > len("sqlite:///"):
        return url[len("sqlite:///") :]
    raise UnknownUrl(f"{url!r} is neither a sqlite:/// nor a postgresql:// URL")


def serving_lock(url: str) -> Lock:
    """The serving lock of the database at `url`, not taken yet."""
    if url.startswith(POSTGRES):
        lock: Lock = _postgres().AdvisoryLock(url)
        return lock
    from stateous.control.store.locks import FileLock

    return FileLock(sqlite_path(url))


def open_store(url: str, *, connections: int) -> tuple[Lock, Store]:
    """Take the serving lock of the database at `url`, then open its store, making or
    upgrading its tables; Postgres gets up to `connections` connections."""
    lock = serving_lock(url)
    lock.take()
    return lock, open_locked(url, lock, connections=connections)


def open_locked(
    url: str, lock: Lock, *, connections: int, clock: Callable[[], float] = time.time
) -> Store:
    """Open the store at `url` under its serving `lock`, taken already; give the lock back if
    the store cannot be opened. `clock` is the time of its transactions."""
    try:
        if url.startswith(POSTGRES):
            store: Store = _postgres().PostgresStore(url, size=connections, clock=clock, lock=lock)
            return store
        from stateous.control.store.sqlite import SqliteStore

        return SqliteStore(sqlite_path(url), clock=clock)
    except BaseException:
        lock.release()
        raise


def _postgres() -> ModuleType:
    """The Postgres store's package, or a sentence saying that its driver is missing."""
    try:
        from stateous.control.store import postgres
    except ModuleNotFoundError as ex:
        if (ex.name or "").partition(".")[0] != "psycopg":
            raise
        raise StoreError(
            "serving Postgres needs psycopg, which is missing; install stateous[postgres]"
        ) from None
    return postgres


def open_database(url: str, *, make: bool = True) -> Store:
    """Open the store at `url` without its serving lock, making or upgrading its tables: for
    the commands that work beside a running `serve` (its credentials), through the
    database's own locks. Without `make`, a SQLite file that is not there is refused
    instead of made (a mistyped path must not leave an empty database behind)."""
    if url.startswith(POSTGRES):
        try:
            from stateous.control.store.postgres import PostgresStore
        except ModuleNotFoundError as ex:
            if (ex.name or "").partition(".")[0] != "psycopg":
                raise
            raise StoreError(
                "Postgres needs psycopg, which is missing; install stateous[postgres]"
            ) from None
        return PostgresStore(url, size=1)
    from stateous.control.store.sqlite import SqliteStore

    path = sqlite_path(url)
    if not make and not os.path.isfile(path):
        raise StoreError(f"there is no database at {path}")
    return SqliteStore(path)
