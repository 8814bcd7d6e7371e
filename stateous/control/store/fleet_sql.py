"""The SQL of the supervisors' labels, kept in their claim rows (`stateous.control.fleet`):
written by a claim whose labels differ from those its row holds, read once when a control
plane starts, so that what it says of the supervisors seen lately survives a restart."""

from __future__ import annotations

from typing import Any

from stateous.control.store.columns import decode, json_text
from stateous.control.store.rows import from_column, to_column
from stateous.control.store.statements import Statements

#: A supervisor that claimed: its name, its labels (None when its row is of before they were
#: kept: unknown), and when it last claimed, in seconds.
Seen = tuple[str, dict[str, str] | None, float]


class FleetSql(Statements):
    """The claim rows (`claims`: when each supervisor last claimed, with its labels) and the
    request ids that tasks were granted under (`claim_requests`)."""

    def keep_labels(self, supervisor: str, labels: dict[str, Any]) -> None:
        """Write the labels of a supervisor's claim in its claim row (made if missing)."""
        self.change(
            "INSERT INTO claims (supervisor, labels) VALUES (?, ?) "
            "ON CONFLICT (supervisor) DO UPDATE SET labels = excluded.labels",
            (supervisor, json_text(labels)),
        )

    def labels_seen(self, since: float) -> list[Seen]:
        """The supervisors that claimed after `since` (seconds), with their labels."""
        rows = self.execute(
            "SELECT supervisor, labels, claimed_at FROM claims WHERE claimed_at > ?",
            (to_column(since),),
        )
        return [
            (supervisor, None if labels is None else decode(labels), from_column(at))
            for supervisor, labels, at in rows
        ]

    def put_claim(self, supervisor: str) -> None:
        """Write when the supervisor last claimed (`GET /supervisors`)."""
        self.change(
            "INSERT INTO claims (supervisor, claimed_at) VALUES (?, ?) "
            "ON CONFLICT (supervisor) DO UPDATE SET claimed_at = excluded.claimed_at",
            (supervisor, self.stamp),
        )

    def put_grant(self, supervisor: str, request: str, task: int, attempt: int) -> None:
        """Keep the request id that `task` was granted under, for the ask sent again."""
        self.change(
            "INSERT INTO claim_requests (task_id, supervisor, request, attempt) "
            "VALUES (?, ?, ?, ?) "
            "ON CONFLICT (task_id) DO UPDATE SET supervisor = excluded.supervisor, "
            "request = excluded.request, attempt = excluded.attempt",
            (task, supervisor, request, attempt),
        )
