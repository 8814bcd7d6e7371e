"""A pg_auto_failover formation on this computer: a monitor and two Postgres nodes.

Debian's `postgresql-15-auto-failover` gives `pg_autoctl`, which refuses to run as
root: as root, each of its processes runs as the `postgres` user (through `runuser`),
in a folder that user owns. The monitor and each node run as `pg_autoctl ... --run`
in a process group of their own, so that `kill` takes a node whole: its `pg_autoctl`
processes and its postmaster, as when its computer dies (a postmaster killed alone is
started again by its own `pg_autoctl` at once, and no failover follows).

Replication is synchronous, as `pg_autoctl` sets it up for a primary and one
standby (`synchronous_standby_names = 'ANY 1 (...)'`): a COMMIT is answered once the
standby has it. The applications' URL names both nodes, for libpq to find the one
that accepts writes (`target_session_attrs=read-write`).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

#: Where Debian puts the server programs that `pg_autoctl` drives.
PG_CTL = "/usr/lib/postgresql/15/bin/pg_ctl"
#: The database that the nodes make for the applications.
DATABASE = "stateous"
#: The monitor's settings for a quick failover on one computer (pg_auto_failover's defaults:
#: a health check every 5 s, a node unhealthy after 20 s, 30 s for an old primary to demote).
QUICK = {
    "pgautofailover.health_check_period": "1000",
    "pgautofailover.health_check_retry_delay": "500",
    "pgautofailover.health_check_timeout": "1000",
    "pgautofailover.node_considered_unhealthy_timeout": "3000",
    "pgautofailover.primary_demote_timeout": "3000",
}
#: How long the formation may take to come up, and a failover to end, in seconds.
UP_SECONDS = 120.0


class FormationError(Exception):
    """The formation did not come up, or did not fail over, in time."""


def missing() -> str | None:
    """Why no formation can be made here, or None."""
    if shutil.which("pg_autoctl") is None:
        return "pg_autoctl is missing (Debian's postgresql-15-auto-failover)"
    if not Path(pg_ctl()).exists():
        return f"pg_ctl is missing ({PG_CTL})"
    return None


def pg_ctl() -> str:
    return os.environ.get("PG_CTL", PG_CTL)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Node:
    """One `pg_autoctl ... --run` process group: the monitor, or a Postgres node."""

    name: str
    port: int
    pgdata: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """kill -9 the whole node: its pg_autoctl processes and its postmaster."""
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


class Formation:
    """A monitor and two nodes in a temporary folder of their own (which the `postgres`
    user can reach: a test's folder may be closed to it), on free ports of 127.0.0.1."""

    def __init__(self, *, quick: bool = False) -> None:
        self.folder = folder = Path(tempfile.mkdtemp(prefix="stateous-formation-"))
        self.quick = quick
        self.as_root = os.geteuid() == 0
        if self.as_root:
            shutil.chown(folder, "postgres", "postgres")
        self.monitor = Node("monitor", free_port(), folder / "monitor")
        self.nodes = [Node(f"node{n}", free_port(), folder / f"node{n}") for n in (1, 2)]

    # the URLs

    @property
    def monitor_url(self) -> str:
        return f"postgresql://autoctl_node@127.0.0.1:{self.monitor.port}/pg_auto_failover"

    def node_url(self, node: Node) -> str:
        return f"postgresql://postgres@127.0.0.1:{node.port}/{DATABASE}"

    @property
    def url(self) -> str:
        """The multi-host URL of the applications: both nodes, the primary found by libpq."""
        hosts = ",".join(f"127.0.0.1:{node.port}" for node in self.nodes)
        return f"postgresql://postgres@{hosts}/{DATABASE}?target_session_attrs=read-write"

    # the processes

    def _command(self, *args: str) -> list[str]:
        user = ["runuser", "-u", "postgres", "--"] if self.as_root else []
        return [*user, "pg_autoctl", *args]

    def _environment(self, node: Node) -> dict[str, str]:
        home = self.folder / f"{node.name}-home"
        home.mkdir(exist_ok=True)
        if self.as_root:
            shutil.chown(home, "postgres", "postgres")
        return {
            **os.environ,
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / "config"),
            "XDG_DATA_HOME": str(home / "data"),
            "PG_CONFIG": str(Path(pg_ctl()).with_name("pg_config")),
        }

    def _spawn(self, node: Node, args: list[str]) -> None:
        log = (self.folder / f"{node.name}.log").open("ab")
        node.process = subprocess.Popen(
            self._command(*args),
            cwd=self.folder,
            env=self._environment(node),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        log.close()

    def start(self) -> None:
        """Make the monitor and the two nodes; return once the second is a synchronous
        standby."""
        common = ["--pgctl", pg_ctl(), "--hostname", "127.0.0.1", "--auth", "trust", "--no-ssl"]
        self._spawn(
            self.monitor,
            [
                "create", "monitor", "--pgdata", str(self.monitor.pgdata),
                "--pgport", str(self.monitor.port), *common, "--run",
            ],
        )  # fmt: skip
        self._wait_sql(self.monitor_url, "SELECT 1")
        if self.quick:
            self._quicken()
        for node in self.nodes:
            self.create(node, common)
            if node is self.nodes[0]:
                self._wait_sql(self.node_url(node), "SELECT 1")
        self.wait_states({"primary", "secondary"})

    def create(self, node: Node, common: list[str]) -> None:
        self._spawn(
            node,
            [
                "create", "postgres", "--pgdata", str(node.pgdata), "--pgport", str(node.port),
                "--listen", "127.0.0.1", "--name", node.name, "--dbname", DATABASE,
                "--monitor", f"{self.monitor_url}?sslmode=disable", *common, "--run",
            ],
        )  # fmt: skip

    def rejoin(self, node: Node) -> None:
        """Start a killed node again: it joins the formation as the standby of the new
        primary (pg_autoctl rewinds it), and this returns once it is one."""
        self._spawn(node, ["run", "--pgdata", str(node.pgdata)])
        self.wait_states({"primary", "secondary"})

    def _quicken(self) -> None:
        import psycopg

        with psycopg.connect(self.monitor_url, autocommit=True, user="postgres") as monitor:
            for name, value in QUICK.items():
                monitor.execute(f"ALTER SYSTEM SET {name} = '{value}'")
            monitor.execute("SELECT pg_reload_conf()")

    def _wait_sql(self, url: str, sql: str) -> None:
        import psycopg

        deadline = time.monotonic() + UP_SECONDS
        while True:
            try:
                with psycopg.connect(url, autocommit=True, connect_timeout=2) as link:
                    link.execute(sql)
                    return
            except psycopg.Error as ex:
                if time.monotonic() > deadline:
                    raise FormationError(f"{url} did not answer: {ex}") from None
            time.sleep(0.2)

    def states(self) -> dict[str, tuple[str, str]]:
        """Each node's reported and assigned state, as the monitor has them."""
        import psycopg

        with psycopg.connect(self.monitor_url, autocommit=True, connect_timeout=2) as monitor:
            rows = monitor.execute(
                "SELECT nodename, reportedstate, goalstate FROM pgautofailover.node"
            ).fetchall()
        return {str(name): (str(reported), str(goal)) for name, reported, goal in rows}

    def wait_states(self, wanted: set[str]) -> None:
        """Wait until the nodes report and are assigned exactly `wanted` states.

        A base backup waits for a checkpoint, which Postgres spreads over minutes by
        default: while a node catches up, the primary is asked for one at once.
        """
        import psycopg

        deadline = time.monotonic() + UP_SECONDS
        seen: dict[str, tuple[str, str]] = {}
        while time.monotonic() < deadline:
            try:
                seen = self.states()
            except psycopg.Error:
                time.sleep(0.2)
                continue
            steady = all(reported == goal for reported, goal in seen.values())
            if steady and {reported for reported, _ in seen.values()} == wanted:
                return
            primary = self.primary()
            if primary is not None and any("catchingup" in pair for pair in seen.values()):
                try:
                    with psycopg.connect(self.node_url(primary), autocommit=True) as link:
                        link.execute("CHECKPOINT")
                except psycopg.Error:
                    pass
            time.sleep(0.5)
        raise FormationError(f"the formation did not reach {sorted(wanted)}: {seen}")

    def primary(self) -> Node | None:
        """The node the monitor has as the primary now, if any."""
        import psycopg

        try:
            states = self.states()
        except psycopg.Error:
            return None
        for node in self.nodes:
            if states.get(node.name, ("", ""))[0] in ("primary", "wait_primary", "single"):
                return node
        return None

    def close(self, keep: bool = False) -> None:
        """Kill every node; remove the folder unless `keep`."""
        for node in [*self.nodes, self.monitor]:
            if node.alive:
                node.kill()
        if not keep:
            shutil.rmtree(self.folder, ignore_errors=True)
