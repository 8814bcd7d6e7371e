"""One control plane per database: its tenure, its name on the `control_plane` row.

Besides its serving lock (`store/locks.py`), a control plane keeps its database
by the `control_plane` row, which names it as `host:pid:id`; the clock checks the
row and the lock every second, so a control plane that finds another name there,
or lost its lock, knows it lost the database.
"""

from __future__ import annotations

import os
import secrets
import socket

from stateous.control.store import ControlRow, Lock, Store, TenureLost, Tx


class Tenure:
    """This control plane's tenure of its database: its name on the `control_plane` row."""

    #: How often the row's `since` is written again, in seconds.
    RENEW_EVERY = 10.0

    def __init__(self, store: Store, lock: Lock) -> None:
        self.store = store
        self.lock = lock
        self.name = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self._renewed = 0.0

    def take(self, structure: str, checksum: str) -> None:
        """Write this control plane and the graph on record into the row."""

        def operation(tx: Tx) -> None:
            tx.put_control(ControlRow(structure, checksum, self.name, tx.now))
            self._renewed = tx.now

        self.store.write(operation)
        self.lock.serve_as(self.name)

    def renew(self) -> None:
        """Check the lock, and that the row still names this control plane; refresh `since`
        now and then."""
        self.lock.check()

        def operation(tx: Tx) -> None:
            row = tx.control()
            if row is None or row.serving != self.name:
                other = "nobody" if row is None or row.serving is None else row.serving
                raise TenureLost(f"another control plane took this database ({other} holds it)")
            if tx.now - self._renewed >= self.RENEW_EVERY:
                tx.put_control(ControlRow(row.structure, row.checksum, self.name, tx.now))
                self._renewed = tx.now

        self.store.write(operation)

    def give_up(self) -> None:
        """Clear the row's name at a graceful stop."""

        def operation(tx: Tx) -> None:
            row = tx.control()
            if row is not None and row.serving == self.name:
                tx.put_control(ControlRow(row.structure, row.checksum, None, row.since))

        self.store.write(operation)
