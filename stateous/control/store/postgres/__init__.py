"""The Postgres store: the store itself, its connections, its serving lock, and the settling
of a COMMIT whose answer was lost, each in a module of its own."""

from stateous.control.store.postgres.lock import LOCK_CLASS, AdvisoryLock
from stateous.control.store.postgres.store import PostgresStore

__all__ = ["LOCK_CLASS", "AdvisoryLock", "PostgresStore"]
