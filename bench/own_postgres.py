"""A Postgres server of the benchmark's own, beside the machine's: `initdb` in a folder, the
settings below, a free port; stopped and removed when the benchmark ends.

The machine's server keeps its packaged defaults (128 MB of shared buffers, a checkpoint
every 5 minutes or 1 GB of WAL), which suit a small database; a database of a million
tokens is served as a Postgres shop would serve it, with the settings of `TUNED`. As root,
the server runs as the `postgres` user (through `runuser`), as `initdb` refuses root.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from autofailover import free_port, pg_ctl

#: The settings of the benchmark's server; durability as on the machine's (fsync, synchronous
#: commit and full-page writes on).
TUNED = {
    "shared_buffers": "2GB",
    "effective_cache_size": "8GB",
    "work_mem": "16MB",
    "maintenance_work_mem": "512MB",
    "max_wal_size": "8GB",
    "checkpoint_timeout": "30min",
    "checkpoint_completion_target": "0.9",
    "wal_compression": "on",
    "wal_buffers": "16MB",
    "random_page_cost": "1.1",
    "fsync": "on",
    "synchronous_commit": "on",
    "full_page_writes": "on",
}


def settings_line() -> str:
    """The settings, as the benchmark prints them with its figures."""
    return ", ".join(f"{name}={value}" for name, value in TUNED.items())


@contextmanager
def own_postgres() -> Iterator[str]:
    """Start a server of our own; yield its URL (database `postgres`, user `postgres`)."""
    folder = Path(tempfile.mkdtemp(prefix="stateous-pg-"))
    as_root = os.geteuid() == 0
    user = ["runuser", "-u", "postgres", "--"] if as_root else []
    if as_root:
        shutil.chown(folder, "postgres", "postgres")
    data = folder / "data"
    binaries = Path(pg_ctl()).parent
    subprocess.run(
        [*user, str(binaries / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust"],
        check=True,
        capture_output=True,
    )
    port = free_port()
    options = " ".join(
        [f"-c port={port}", "-c listen_addresses=127.0.0.1", f"-c unix_socket_directories={folder}"]
        + [f"-c {name}={value}" for name, value in TUNED.items()]
    )
    start = [*user, pg_ctl(), "-D", str(data), "-l", str(folder / "log"), "-o", options, "-w"]
    subprocess.run([*start, "start"], check=True, capture_output=True)
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(
            [*user, pg_ctl(), "-D", str(data), "-m", "fast", "-w", "stop"], capture_output=True
        )
        shutil.rmtree(folder, ignore_errors=True)
