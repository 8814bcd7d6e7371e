"""The SQL of parked keys: one row of `key_parkings` per key of a resource that a quota report
or its breaker closed, or whose breaker counts failed attempts.

A row says why the key closed (`cause`, `reason`, the `fingerprint` that tripped a breaker)
and until when (`until`; the key's own `closed_until` keeps it closed), how many parkings
in a row it had (`times`), and, while it reopens, its `step` (0: the probe, then cohorts)
and how many tasks that step `admitted`. A breaker keeps the `fingerprint` of the key's
last failed attempt and the `streak` of them alike. Nothing here decides:
`stateous.control.parking` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stateous.control.store.columns import time_or_none
from stateous.control.store.rows import to_column
from stateous.control.store.statements import Statements

PARKING_COLUMNS = "resource, key, cause, reason, until, times, step, admitted, fingerprint, streak"


@dataclass(slots=True)
class ParkingRow:
    """A key's parking (`cause` None: not parked, only a breaker's streak kept)."""

    resource: str
    key: str
    cause: str | None = None
    reason: str | None = None
    until: float | None = None
    times: int = 0
    step: int | None = None
    admitted: int = 0
    fingerprint: str | None = None
    streak: int = 0


def _parking(row: tuple[Any, ...]) -> ParkingRow:
    resource, key, cause, reason, until, times, step, admitted, fingerprint, streak = row
    return ParkingRow(
        resource,
        key,
        cause,
        reason,
        time_or_none(until),
        times,
        step,
        admitted,
        fingerprint,
        streak,
    )


class ParkingSql(Statements):
    """The verbs of parked keys."""

    def parking(self, resource: str, key: str) -> ParkingRow | None:
        """A key's parking row, if it has one (read under its key's lock)."""
        row = self.one(
            f"SELECT {PARKING_COLUMNS} FROM key_parkings WHERE resource = ? AND key = ?",
            (resource, key),
        )
        return None if row is None else _parking(row)

    def parkings(self, resource: str) -> list[ParkingRow]:
        """The parked keys of a resource (those only counting failures left out)."""
        rows = self.execute(
            f"SELECT {PARKING_COLUMNS} FROM key_parkings WHERE resource = ? "
            "AND cause IS NOT NULL ORDER BY key",
            (resource,),
        )
        return [_parking(row) for row in rows]

    def put_parking(self, row: ParkingRow) -> None:
        self.change(
            f"INSERT INTO key_parkings ({PARKING_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (resource, key) DO UPDATE SET cause = excluded.cause, "
            "reason = excluded.reason, until = excluded.until, times = excluded.times, "
            "step = excluded.step, admitted = excluded.admitted, "
            "fingerprint = excluded.fingerprint, streak = excluded.streak",
            (
                row.resource,
                row.key,
                row.cause,
                row.reason,
                None if row.until is None else to_column(row.until),
                row.times,
                row.step,
                row.admitted,
                row.fingerprint,
                row.streak,
            ),
        )

    def drop_parking(self, resource: str, key: str) -> None:
        self.change("DELETE FROM key_parkings WHERE resource = ? AND key = ?", (resource, key))
