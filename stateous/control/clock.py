"""The clock: about once a second, renew the hold, end leases that are over, fire timers.

It runs in a thread of its own. A tick that fails is logged in one line and tried
again on the next beat; a lost hold stops the clock and tells the server.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from stateous.control.engine import Engine
from stateous.control.errors import DatabaseBusy, OutcomeUnknown
from stateous.control.hold import Hold
from stateous.control.store import HoldLost

log = logging.getLogger("stateous.control.clock")


class Clock(threading.Thread):
    """Beats every `interval` seconds until stopped."""

    def __init__(
        self,
        engine: Engine,
        hold: Hold,
        on_lost: Callable[[HoldLost], None],
        interval: float = 1.0,
        also: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(name="stateous-clock", daemon=True)
        self.engine = engine
        self.hold = hold
        self.on_lost = on_lost
        self.interval = interval
        #: What else runs at each beat, after the tick (the API's credentials, looked at again).
        self.also = also
        self._stopped = threading.Event()

    def run(self) -> None:
        while not self._stopped.wait(self.interval):
            try:
                self.hold.renew()
            except HoldLost as ex:
                self.on_lost(ex)
                return
            except (DatabaseBusy, OutcomeUnknown) as ex:
                # The database did not answer: no lease may end for this silence.
                self.engine.leases_owed = True
                self._failed(ex)
                continue
            except Exception as ex:
                self._failed(ex)
                continue
            try:
                self.engine.tick()
                if self.also is not None:
                    self.also()
            except Exception as ex:
                self._failed(ex)

    def _failed(self, ex: Exception) -> None:
        log.warning(
            "the clock's tick failed (%s); it tries again in %.1f seconds", ex, self.interval
        )

    def stop(self) -> None:
        self._stopped.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join()
