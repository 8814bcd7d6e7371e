"""A control plane that takes connections and never answers: a real socket that only listens.

It accepts every connection and holds it open, reading nothing and writing nothing,
as a control plane that hangs would. The client and the token commands must give
up on it after their timeout.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def silent_control_plane() -> Iterator[str]:
    """Listen on a free local port and yield its URL; close every connection at the end."""
    held: list[socket.socket] = []
    with socket.create_server(("127.0.0.1", 0)) as listener:

        def take() -> None:
            while True:
                try:
                    connection, _ = listener.accept()
                except OSError:
                    return
                held.append(connection)

        taker = threading.Thread(target=take, name="silent-control-plane", daemon=True)
        taker.start()
        try:
            yield f"http://127.0.0.1:{listener.getsockname()[1]}"
        finally:
            listener.shutdown(socket.SHUT_RDWR)
            listener.close()
            taker.join(timeout=5)
            for connection in held:
                connection.close()
