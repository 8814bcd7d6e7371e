"""How a supervisor runs: as its own process (`stateous supervise`), or in a thread beside
a control plane in the same process (`stateous serve --supervise`, the demo)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from stateous.supervisor.supervisor import Supervisor


def supervise(folder: Path, url: str | None = None) -> int:
    """Run the supervisor of a folder until it stops; return its exit code."""
    supervisor = Supervisor.open(folder, url)
    return asyncio.run(supervisor.run())


class Beside:
    """A supervisor in a thread of its own, beside a control plane in the same process."""

    def __init__(self, folder: Path, url: str) -> None:
        self.supervisor = Supervisor.open(folder, url)
        self.code = 0
        self._thread = threading.Thread(target=self._run, name="stateous-supervisor", daemon=True)

    def _run(self) -> None:
        self.code = asyncio.run(self.supervisor.run(signals=False))

    def start(self) -> None:
        self._thread.start()

    def request_stop(self) -> None:
        self.supervisor.request_stop()

    def wait(self) -> None:
        self._thread.join()
