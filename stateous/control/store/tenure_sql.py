"""The SQL of the control plane's row: which graph it serves and who serves it since when,
the row by which a control plane keeps its database (`stateous.control.tenure`)."""

from __future__ import annotations

from stateous.control.store.columns import time_or_none
from stateous.control.store.rows import ControlRow, to_column
from stateous.control.store.statements import Statements


class TenureSql(Statements):
    """The control plane's one row (id 1)."""

    def control(self) -> ControlRow | None:
        row = self.one("SELECT structure, checksum, serving, since FROM control_plane WHERE id = 1")
        if row is None:
            return None
        return ControlRow(row[0], row[1], row[2], time_or_none(row[3]))

    def put_control(self, row: ControlRow) -> None:
        self.change(
            "INSERT INTO control_plane (id, structure, checksum, serving, since) "
            "VALUES (1, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET structure = excluded.structure,"
            " checksum = excluded.checksum, serving = excluded.serving, since = excluded.since",
            (
                row.structure,
                row.checksum,
                row.serving,
                None if row.since is None else to_column(row.since),
            ),
        )
