"""How a supervisor runs: as its own process (`stateous supervise`), or in a thread beside
a control plane in the same process (`stateous serve --supervise`, the demo)."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
from pathlib import Path

from stateous.model.errors import Failure
from stateous.supervisor.supervisor import Supervisor

log = logging.getLogger("stateous.supervisor")


def supervise(folder: Path, url: str | None = None) -> int:
    """Run the supervisor of a folder until it stops; return its exit code."""
    supervisor = Supervisor.open(folder, url)
    return asyncio.run(supervisor.run())


class Beside:
    """A supervisor in a thread of its own, beside a control plane in the same process.

    A mistake of the folder that shows only once the control plane answers (a contract for
    another version of the workflow), or any other failure, ends the supervisor; it is
    kept as `failure`, and the process is asked to stop, as a stop signal would, so that it
    does not serve on without its supervisor, and says why in one line (an unexpected
    failure logs its traceback first).
    """

    def __init__(self, folder: Path, url: str) -> None:
        self.supervisor = Supervisor.open(folder, url)
        self.code = 0
        self.failure: Exception | None = None
        self._thread = threading.Thread(target=self._run, name="stateous-supervisor", daemon=True)

    def _run(self) -> None:
        try:
            self.code = asyncio.run(self.supervisor.run(signals=False))
        except Exception as ex:
            if not isinstance(ex, Failure):
                log.exception("the supervisor failed")
            self.code, self.failure = 1, ex
            os.kill(os.getpid(), signal.SIGTERM)

    def start(self) -> None:
        self._thread.start()

    def request_stop(self) -> None:
        self.supervisor.request_stop()

    def wait(self) -> None:
        self._thread.join()
