"""A control plane that answers each GET from a table of JSON answers: a real HTTP server.

It stands for a control plane that answers in a shape this version does not expect (an
older or another implementation's), so that the commands' words for it can be checked.
A path not in the table gets 404 `not_found`.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any


@contextmanager
def canned_control_plane(answers: Mapping[str, Any]) -> Iterator[str]:
    """Serve `answers` (path with its query -> JSON answer) on a free local port; yield its
    URL."""

    class Answer(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            found = self.path in answers
            body = json.dumps(
                answers[self.path] if found else {"error": "no such path", "code": "not_found"}
            ).encode()
            self.send_response(200 if found else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return

    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer) as server:
        serving = threading.Thread(target=server.serve_forever, name="canned", daemon=True)
        serving.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}"
        finally:
            server.shutdown()
            serving.join(timeout=5)
