"""A stand-in language-model provider for the agents example: `python provider.py PORT`.

It answers `POST /v1/answer` with `{"text": ..., "cost": {"usd": 0.002, "tokens": N}}`
(a token per word of the prompt and the answer), except that its first `QUOTA_429S` calls
(1 by default) are answered 429 with `Retry-After: 2`, as a provider whose quota is used
up does; a 429 costs nothing. It stands in for the real one in the how-to and its test.
"""

import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

REFUSALS = int(os.environ.get("QUOTA_429S", "1"))
#: What an answer costs in usd, whatever its length.
PRICE = 0.002
_lock = threading.Lock()
_calls = 0


class Provider(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        global _calls
        asked = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with _lock:
            _calls += 1
            refused = _calls <= REFUSALS
        if refused:
            body, status = {"error": "rate limit reached for this account"}, 429
        else:
            text = f"an answer to {asked['prompt']!r}"
            used = len(asked["prompt"].split()) + len(text.split())
            body, status = {"text": text, "cost": {"usd": PRICE, "tokens": used}}, 200
        data = json.dumps(body).encode()
        self.send_response(status)
        if refused:
            self.send_header("Retry-After", "2")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Provider)
    print(f"provider on http://127.0.0.1:{server.server_port}", flush=True)
    server.serve_forever()
