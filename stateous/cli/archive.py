"""`stateous archive`: write the token trees that ended before a date to a file of JSON lines,
and show one of them as `token show` would.

Like `backup`, it reads the database itself (`--db`), beside a running `serve`, so
whoever may read the database may archive it. The file is written beside FILE and
renamed once whole (gzip when FILE ends in `.gz`); `--remove` then removes the trees
written, in the small batches of retention, each only if it gained no ledger row
since it was read. Without `--remove`, `serve --keep-ended` removes them later.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from stateous.cli.backup import USAGE, FileExists, size, staged
from stateous.cli.errors import CommandError
from stateous.cli.history import shown_lines
from stateous.cli.parser import Commands
from stateous.control.defaults import DEFAULT_DB

if TYPE_CHECKING:
    from stateous.control.store import Removed

#: The line that says how to write the date of `--ended-before`.
DATE_HINT = "a date like 2026-01-31, or a time with its zone like 2026-01-31T18:00:00Z"


def cutoff(text: str) -> float:
    """The moment that `--ended-before` names: a date (its midnight, UTC) or a zoned time."""
    try:
        if len(text) == 10:
            day = date.fromisoformat(text)
            return datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()
        moment = datetime.fromisoformat(text)
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise CommandError(f"--ended-before takes {DATE_HINT}, not {text!r}")
    return moment.timestamp()


def opened(path: Path, mode: str, name: Path | None = None) -> IO[bytes]:
    """A file of the archive, through gzip when its name (`name`, else its own) ends in
    `.gz`."""
    if (name or path).name.endswith(".gz"):
        return gzip.open(path, mode + "b")  # type: ignore[return-value]
    return open(path, mode + "b")


def run_archive(args: argparse.Namespace) -> int:
    if args.ended_before is None or args.out is None:
        raise CommandError("archive needs --ended-before DATE and --out FILE (or: archive show)")
    before = cutoff(args.ended_before)
    target = Path(args.out)
    from stateous.control.archive import ended_trees, tree_line
    from stateous.control.retention import remove_written
    from stateous.control.store import open_database, to_column

    store = open_database(args.db, make=False)
    try:
        written: dict[str, int] = {}
        tokens = 0
        try:
            with staged(target, args.force) as temporary, opened(temporary, "w", target) as out:
                for tree in ended_trees(store, to_column(before)):
                    out.write(tree_line(tree))
                    written[tree.top] = tree.last
                    tokens += len(tree.tokens)
        except FileExists as ex:
            print(f"error: {ex}", file=sys.stderr)
            return USAGE
        print(
            f"wrote {target}: {len(written)} token tree(s), {tokens} token(s), "
            f"{size(target.stat().st_size)}"
        )
        if args.remove:
            say_removed(remove_written(store, written, to_column(before)), len(written))
    finally:
        store.close()
    return 0


def say_removed(removed: Removed, written: int) -> None:
    """Print what `--remove` did with the `written` trees: those it removed, those that
    changed and stay, and on a line of its own those that something else (retention,
    another archive) removed first, which are no longer there to change."""
    changed = written - removed.trees - removed.gone
    print(f"removed {removed.trees} token tree(s), {removed.tokens} token(s)", end="")
    print(f"; {changed} changed since they were written and stay" if changed else "")
    if removed.gone:
        print(
            f"{removed.gone} token tree(s) were removed already, by serve --keep-ended "
            "or another archive --remove"
        )


def trees_in(path: Path) -> Iterator[dict[str, Any]]:
    """The trees of an archive file, one by one."""
    try:
        with opened(path, "r") as lines:
            for line in lines:
                yield json.loads(line)
    except FileNotFoundError:
        raise CommandError(f"there is no archive at {path}") from None
    except (OSError, EOFError, ValueError) as ex:
        raise CommandError(f"{path} is not an archive of stateous: {ex}") from None


def run_show(args: argparse.Namespace) -> int:
    """Print one token of an archive as `token show` prints it."""
    for tree in trees_in(Path(args.file)):
        tokens = tree["tokens"]
        for kept in tokens:
            token = kept["token"]
            if token["token"] == args.id:
                children = [
                    other["token"] for other in tokens if other["token"].get("parent") == args.id
                ]
                print("\n".join(shown_lines(token, children, [], kept["history"])))
                return 0
    raise CommandError(f"the archive {args.file} holds no token {args.id!r}")


def add_commands(commands: Commands) -> None:
    """Add `archive` and `archive show` to the parser."""
    archive = commands.add_parser(
        "archive",
        help="write the token trees that ended before a date to a file, or show one",
        description="Write every token tree (a top token and its children) that ended before "
        "DATE, whole, as one line of JSON each, to FILE (gzip when it ends in .gz); the "
        "database is read beside a running serve. Or show one token of such a file.",
    )
    archive.add_argument(
        "--db", default=DEFAULT_DB, metavar="URL", help=f"the database (default: {DEFAULT_DB})"
    )
    archive.add_argument(
        "--ended-before", metavar="DATE", help=f"archive the trees that ended before: {DATE_HINT}"
    )
    archive.add_argument("--out", metavar="FILE", help="the file to write")
    archive.add_argument(
        "--force", action="store_true", help="replace FILE when it exists (kept otherwise)"
    )
    archive.add_argument(
        "--remove",
        action="store_true",
        help="then remove the trees written from the database (each only if it did not "
        "change meanwhile); without it, serve --keep-ended removes them in time",
    )
    archive.set_defaults(run=run_archive)
    verbs = archive.add_subparsers(dest="verb", metavar="VERB")
    show = verbs.add_parser("show", help="print one token of an archive as token show does")
    show.add_argument("file", metavar="FILE", help="the archive")
    show.add_argument("id", metavar="ID", help="the token's id (a top token or a child)")
    show.set_defaults(run=run_show)
