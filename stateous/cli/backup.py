"""`stateous backup --db URL FILE`: a copy of a live database, made beside a running `serve`.

A SQLite database is copied through SQLite's backup API, without stopping `serve`
or taking its serving lock; a Postgres database is dumped by `pg_dump`, when it is
on the PATH. Either way the copy is written to a temporary file beside FILE and
renamed to FILE only once it is whole, so a failed backup leaves nothing, and an
existing FILE is kept unless `--force` is given. The copy holds what the database
holds, credentials' hashes included. The modules that only a backup needs are
imported when it runs, so that every other command starts without them.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from stateous.cli.errors import CommandError
from stateous.cli.parser import Commands
from stateous.control.defaults import DEFAULT_DB

#: The exit code of a command line that cannot be done as typed: the usage errors' code.
USAGE = 2
#: The files that SQLite may keep beside a database.
SIDECARS = ("-wal", "-shm", "-journal")


class FileExists(CommandError):
    """FILE exists and `--force` was not given."""


def size(count: int) -> str:
    """A file's size for a person: `512 bytes`, `12.3 kB`, `4.5 MB`."""
    if count < 1000:
        return f"{count} bytes"
    amount = count / 1000
    units = ["kB", "MB", "GB"]
    while amount >= 1000 and len(units) > 1:
        amount /= 1000
        units.pop(0)
    return f"{amount:.1f} {units[0]}"


def check_target(target: Path, database: Path | None) -> None:
    """Refuse a FILE that is a folder or the database itself."""
    if target.is_dir():
        raise CommandError(f"{target} is a folder; name the backup's file")
    if (
        database is not None
        and target.exists()
        and database.exists()
        and os.path.samefile(target, database)
    ):
        raise CommandError(f"{target} is the database itself")


@contextmanager
def staged(target: Path, force: bool) -> Iterator[Path]:
    """A new, empty file beside `target` that becomes `target` when the block ends well,
    and is removed, with any file SQLite kept beside it, however the block ends."""
    import tempfile

    if target.exists() and not force:
        raise FileExists(f"{target} exists; give --force to replace it")
    try:
        handle, name = tempfile.mkstemp(
            dir=target.parent, prefix=f".{target.name}.", suffix=".partial"
        )
    except OSError as ex:
        raise CommandError(f"cannot write the backup in {target.parent}: {ex.strerror}") from None
    os.close(handle)
    temporary = Path(name)
    try:
        yield temporary
        publish(temporary, target, force)
    finally:
        for leftover in (temporary, *(Path(name + suffix) for suffix in SIDECARS)):
            leftover.unlink(missing_ok=True)


def publish(temporary: Path, target: Path, force: bool) -> None:
    """Put the whole copy on disk under its name: replace FILE with `--force`, else link
    it to a name that must still be free, so a FILE made meanwhile is kept too."""
    with open(temporary, "rb") as copy:
        os.fsync(copy.fileno())
    try:
        if force:
            os.replace(temporary, target)
        else:
            os.link(temporary, target)
    except FileExistsError:
        raise FileExists(f"{target} exists; give --force to replace it") from None
    except OSError as ex:
        raise CommandError(f"cannot write {target}: {ex.strerror}") from None
    folder = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def back_up_sqlite(url: str, target: Path, force: bool) -> None:
    from stateous.control.store import sqlite_path
    from stateous.control.store.backup import copy_sqlite

    database = Path(sqlite_path(url))
    check_target(target, database)
    with staged(target, force) as temporary:
        copied = copy_sqlite(str(database), str(temporary))
    print(
        f"wrote {target}: {size(target.stat().st_size)}, {copied.tokens} "
        f"token{'' if copied.tokens == 1 else 's'}, schema version {copied.version}"
    )
    stale = " and ".join(f"{database}{suffix}" for suffix in SIDECARS[:2])
    print(
        f"to restore: stop serve, delete {stale}, and copy {target} over {database}; "
        f"or serve the copy: stateous serve GRAPH --db sqlite:///{target}"
    )


def back_up_postgres(url: str, target: Path, force: bool) -> None:
    import shlex
    import shutil
    import subprocess

    from stateous.control.store.backup import dump_settings

    settings = dump_settings(url)
    check_target(target, None)
    command = (
        f"pg_dump --format=custom --file {shlex.quote(str(target))} "
        f"--dbname {shlex.quote(settings.shown)}"
    )
    program = shutil.which("pg_dump")
    if program is None:
        raise CommandError(
            f"pg_dump is not on the PATH; install the PostgreSQL client tools and run: {command}"
        )
    if settings.unpassable:
        raise CommandError(
            f"the URL's setting {settings.unpassable[0]} cannot reach pg_dump through its "
            f"environment; run: {command}"
        )
    with staged(target, force) as temporary:
        dumped = subprocess.run(
            [program, "--format=custom", "--no-password", "--file", str(temporary)],
            env={**os.environ, **settings.environment},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
        if dumped.returncode != 0:
            lines = dumped.stderr.strip().splitlines() or [f"exit status {dumped.returncode}"]
            raise CommandError(f"pg_dump failed: {lines[0].removeprefix('pg_dump: error: ')}")
    print(f"wrote {target}: {size(target.stat().st_size)}, a pg_dump archive (custom format)")
    print(
        f"to restore: stop serve, then pg_restore --clean --if-exists --dbname "
        f"{shlex.quote(settings.shown)} {shlex.quote(str(target))}; or restore into a new, "
        "empty database and serve that"
    )


def run_backup(args: argparse.Namespace) -> int:
    from stateous.control.store import POSTGRES

    target = Path(args.file)
    try:
        if args.db.startswith(POSTGRES):
            back_up_postgres(args.db, target, args.force)
        else:
            back_up_sqlite(args.db, target, args.force)
    except FileExists as ex:
        print(f"error: {ex}", file=sys.stderr)
        return USAGE
    return 0


def add_commands(commands: Commands) -> None:
    """Add `backup` to the parser."""
    backup = commands.add_parser(
        "backup",
        help="copy a live database into a file",
        description="Copy the database into FILE while serve runs. SQLite: an online copy "
        "through SQLite's backup API. Postgres: runs pg_dump --format=custom when it is on "
        "the PATH, else prints the command to run. The copy holds the credentials' hashes: "
        "keep it as safe as the database.",
    )
    backup.add_argument(
        "--db", default=DEFAULT_DB, metavar="URL", help=f"the database (default: {DEFAULT_DB})"
    )
    backup.add_argument(
        "--force", action="store_true", help="replace FILE when it exists (kept otherwise)"
    )
    backup.add_argument("file", metavar="FILE", help="the file to write the copy to")
    backup.set_defaults(run=run_backup)
