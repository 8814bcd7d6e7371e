"""The app's one door to the server that serves it: what a request may ask beyond WSGI.

Three things a request of ours needs that WSGI has no word for: a live stream takes its
connection's socket (`adopt`), a claim that waits leaves the server's loop until it is
woken (`park`), and a claim served again after its wait finds its waiter (`resumed`).
The app is given a `Hooks` when it is made (`app.create_app`) and asks it with the
request's environ; it never learns which server serves it. The control plane's server
gives its own (`server.SERVER_HOOKS`); under any other server (`PLAIN`) a stream ends at
once and a claim is answered without waiting, and a test may give a fake.
"""

from __future__ import annotations

from typing import Any, Protocol

from stateous.control.http.stream_sockets import Outlet
from stateous.control.waiting_claims import Waiter

#: A request's WSGI environ.
Environ = dict[str, Any]


class Hooks(Protocol):
    """What the server that serves the app does for a request beyond WSGI."""

    def adopt(self, environ: Environ) -> Outlet | None:
        """Take the request's socket for a live stream, with the answer's headers (already
        started) to send first; None when this server cannot, and the stream ends."""

    def park(self, environ: Environ, waiter: Waiter) -> bool:
        """Keep the request's connection out of the server's loop until `waiter` is woken or
        its wait ends, then serve the request again; False when it cannot wait now."""

    def resumed(self, environ: Environ) -> Waiter | None:
        """The waiter of a claim served again after its wait; None for a new request."""


class Plain:
    """The hooks of a server that does nothing beyond WSGI."""

    def adopt(self, environ: Environ) -> Outlet | None:
        return None

    def park(self, environ: Environ, waiter: Waiter) -> bool:
        return False

    def resumed(self, environ: Environ) -> Waiter | None:
        return None


PLAIN = Plain()
