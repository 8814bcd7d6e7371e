"""Answers that clients leave unread, against a real `stateous serve` process: what the edge
holds for them stays in memory and within its bounds, and the rest of the server answers."""

from __future__ import annotations

import os
import time
from pathlib import Path

from tests.control.raw import closed_by_server, pipelining_without_reading
from tests.control.serving import Launcher, Served, orders, write_graph

#: Tokens of the listing, each with a context of CONTEXT bytes: a page of about 15 MB,
#: more than a connection may hold unread.
TOKENS = 30
CONTEXT = 500_000
#: Connections that ask for the page and never read: about 90 MB, past the bound in all.
STUCK = 6
#: The most that the server's resident memory may grow meanwhile: the answers held until
#: their connections are closed, and the request threads building them (each page is built
#: whole, about three times its size at its peak), which before the bound grew with every
#: connection that never reads.
RSS_GROWTH = 320 * 1024 * 1024
#: How long `/health` may take meanwhile.
HEALTH = 1.0
#: How long the server may take to close a connection that holds past its bound.
CLOSED_WITHIN = 8.0


def resident(pid: int) -> int:
    """The resident memory of process `pid`, in bytes (VmRSS of /proc/PID/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for process {pid}")


def deleted_files(pid: int) -> list[str]:
    """The files that process `pid` holds open after they were unlinked: temporary files."""
    found = []
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except FileNotFoundError:
            continue  # closed meanwhile
        if target.endswith(" (deleted)"):
            found.append(target)
    return found


def fill(served: Served) -> int:
    """Start TOKENS tokens with large contexts; the size of the page that lists them."""
    for number in range(TOKENS):
        body = {"token": f"BIG-{number}", "context": {"title": "x" * CONTEXT}}
        assert served.request("POST", "/tokens", body)[0] == 201
    return page_size(served)


def test_clients_that_never_read_large_answers_are_closed_and_hold_no_temporary_file(
    launcher: Launcher, tmp_path: Path
) -> None:
    write_graph(tmp_path / "orders.json", orders())
    served = launcher.serve(tmp_path / "orders.json", tmp_path / "orders.db")
    pid = served.process.pid
    assert fill(served) > 8 * 1024 * 1024
    before = resident(pid)
    stuck = pipelining_without_reading(served.port, "/tokens?limit=1000", STUCK, depth=2)
    try:
        began = time.monotonic()
        peak, spilled = before, []
        while time.monotonic() - began < 3.0:
            asked = time.monotonic()
            assert served.request("GET", "/health")[0] == 200
            assert time.monotonic() - asked < HEALTH
            peak = max(peak, resident(pid))
            spilled += deleted_files(pid)
            time.sleep(0.2)
        assert spilled == []
        assert peak - before < RSS_GROWTH, (before, peak)
        assert all(closed_by_server(sock, CLOSED_WITHIN) for sock in stuck)
        # A client that reads gets the whole page, larger than a connection's bound.
        assert page_size(served) > 8 * 1024 * 1024
    finally:
        for sock in stuck:
            sock.close()
    served.stop()
    closed = [line for line in served.lines if "left" in line and "unread" in line]
    assert len(closed) == STUCK, served.lines
    assert all("x" * 100 not in line for line in closed)


def page_size(served: Served) -> int:
    """The size of the listing's page, read whole."""
    connection = served.connect()
    try:
        connection.request("GET", "/tokens?limit=1000")
        response = connection.getresponse()
        assert response.status == 200
        return len(response.read())
    finally:
        connection.close()
