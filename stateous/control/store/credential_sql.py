"""The SQL of credentials and settings: who may call the control plane, and whether they must.

The verbs of `Tx` over the `execute` of a store's transaction; the credentials' columns
and rows are in `columns.py`.
"""

from __future__ import annotations

from stateous.control.store.columns import (
    CREDENTIAL_COLUMNS,
    CREDENTIAL_MARKS,
    credential_row,
    credential_values,
)
from stateous.control.store.rows import CredentialRow
from stateous.control.store.statements import Statements

#: The row of `settings` that says whether authentication is on.
AUTH = "auth"


class CredentialSql(Statements):
    """The credential and setting verbs of `Tx`."""

    def credential(self, secret_hash: str) -> CredentialRow | None:
        """The credential whose secret has this hash, revoked or not."""
        row = self.one(
            f"SELECT {CREDENTIAL_COLUMNS} FROM credentials WHERE secret_hash = ?", (secret_hash,)
        )
        return None if row is None else credential_row(row)

    def credential_live(self, name: str) -> bool:
        """Whether a credential of this name exists and is not revoked."""
        found = self.one("SELECT 1 FROM credentials WHERE name = ? AND revoked_at IS NULL", (name,))
        return found is not None

    def credentials(self) -> list[CredentialRow]:
        rows = self.execute(f"SELECT {CREDENTIAL_COLUMNS} FROM credentials ORDER BY name")
        return [credential_row(row) for row in rows]

    def put_credential(self, row: CredentialRow) -> None:
        self.change(
            f"INSERT INTO credentials ({CREDENTIAL_COLUMNS}) VALUES ({CREDENTIAL_MARKS})",
            credential_values(row),
        )

    def revoke_credential(self, name: str) -> bool:
        """Revoke a credential that is not revoked yet; tell whether there was one."""
        rows = self.execute(
            "UPDATE credentials SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL "
            "RETURNING name",
            (self.stamp, name),
        )
        return bool(rows)

    def touch_credential(self, name: str) -> None:
        self.change("UPDATE credentials SET last_used = ? WHERE name = ?", (self.stamp, name))

    def auth_on(self) -> bool:
        """Whether authentication is on: set by the first credential added, until disabled."""
        row = self.one("SELECT value FROM settings WHERE name = ?", (AUTH,))
        return row is not None and row[0] == "on"

    def set_auth(self, on: bool) -> None:
        self.change(
            "INSERT INTO settings (name, value) VALUES (?, ?) "
            "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
            (AUTH, "on" if on else "off"),
        )
