"""The SQL of leases: the claimed tasks whose lease has ended, and the renewals, of every
lease at once (the clock's parole after an outage) or of the tasks one supervisor holds (its
heartbeat, one statement however many tasks it names)."""

from __future__ import annotations

from stateous.control.store.columns import EXPIRED_LEASES, json_text, word
from stateous.control.store.rows import to_column
from stateous.control.store.statements import Statements
from stateous.model.vocabulary import TaskStatus


def renewal_sql(listed: str) -> str:
    """The renewal of the leases of a list of tasks that one supervisor has claimed: found by
    the supervisor's tasks (`tasks_held`), each looked up in the list, which SQLite keeps in
    a temporary table the size of the list (a heartbeat names 1,000 tasks at most)."""
    return (
        f"UPDATE tasks SET lease_until = ? WHERE status = {word(TaskStatus.CLAIMED)} "
        f"AND claimed_by = ? AND id IN (SELECT CAST(value AS BIGINT) FROM {listed}) "
        "RETURNING id"
    )


class LeaseSql(Statements):
    """The verbs of `Tx` that read and renew leases."""

    def expired_leases(self, limit: int) -> list[int]:
        return [row[0] for row in self.execute(EXPIRED_LEASES, (self.stamp, limit))]

    def renew_leases(self, until: float) -> int:
        """Give every claimed task whose lease ends before `until` a lease to `until`;
        answer how many."""
        stamp = to_column(until)
        rows = self.execute(
            f"UPDATE tasks SET lease_until = ? WHERE status = {word(TaskStatus.CLAIMED)} "
            "AND lease_until < ? RETURNING id",
            (stamp, stamp),
        )
        return len(rows)

    def renew_leases_of(self, supervisor: str, tasks: list[int], until: float) -> set[int]:
        """Give each task of `tasks` that `supervisor` has claimed a lease to `until`, in one
        statement; answer the ids it renewed."""
        rows = self.execute(
            renewal_sql(self.listed), (to_column(until), supervisor, json_text(tasks))
        )
        return {row[0] for row in rows}
