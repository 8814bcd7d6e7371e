"""The parser of the `stateous` command: every command's options, built as a run needs them.

A run needs the options of one command only, the one its command line names, so only
that command's module is imported and asked to add its parser; every other command is
added by its name and its line of `stateous --help` alone, from `COMMANDS`. The help of
the whole command and the refusals of the parser read the same either way, and
`build_parser()` with no command builds every command in full (for the reference's
tests). A command's module imports what running it needs only when it runs.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Sequence
from typing import TypeAlias, TypeVar, overload

from stateous._version import __version__

#: The namespace that a caller gives to fill.
N = TypeVar("N")


class Parser(argparse.ArgumentParser):
    """A parser that refuses what it does not know itself, rather than pass it up.

    argparse hands the arguments a subcommand does not know back to the parser
    above it, so `token show --bogus` would be refused with the top-level usage.
    Refused here, at every depth, a mistake shows the usage of the command typed.
    The subcommands' parsers are of this class too, since argparse makes them of
    the class of their parent.
    """

    # argparse's own overloads: the namespace answered is the one given, else a new one.
    @overload
    def parse_known_args(
        self, args: Iterable[str] | None = None, namespace: None = None
    ) -> tuple[argparse.Namespace, list[str]]: ...
    @overload
    def parse_known_args(self, args: Iterable[str] | None, namespace: N) -> tuple[N, list[str]]: ...
    @overload
    def parse_known_args(self, *, namespace: N) -> tuple[N, list[str]]: ...
    def parse_known_args(
        self, args: Iterable[str] | None = None, namespace: object = None
    ) -> tuple[object, list[str]]:
        parsed, unknown = super().parse_known_args(args, namespace)
        if unknown:
            self.error(f"unrecognized arguments: {' '.join(unknown)}")
        return parsed, unknown


#: What `add_subparsers` answers, which every command's module adds its parser to (argparse
#: names its class privately; a string, as it is generic in the stubs only).
Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def add_init(commands: Commands) -> None:
    from stateous.cli import init_supervisor, workflows

    init_command = commands.add_parser(
        "init",
        help=COMMANDS["init"][0],
        description="Write a starter folder for a workflow.",
    )
    init = init_command.add_subparsers(dest="what", metavar="WHAT", required=True)
    workflows.add_init_workflow(init)
    init_supervisor.add_command(init)


def add_compile(commands: Commands) -> None:
    from stateous.cli import workflows

    workflows.add_compile(commands)


def add_serve(commands: Commands) -> None:
    from stateous.cli import serving

    serving.add_commands(commands)


def add_auth(commands: Commands) -> None:
    from stateous.cli import auth

    auth.add_commands(commands)


def add_backup(commands: Commands) -> None:
    from stateous.cli import backup

    backup.add_commands(commands)


def add_archive(commands: Commands) -> None:
    from stateous.cli import archive

    archive.add_commands(commands)


def add_token(commands: Commands) -> None:
    from stateous.cli import listing, migrate, retry, tokens

    url = tokens.url_options()
    verbs = tokens.add_commands(commands, url)
    retry.add_command(verbs, url)
    migrate.add_command(verbs, url)
    listing.add_token_list(verbs, url)


def add_schedule(commands: Commands) -> None:
    from stateous.cli import schedules, tokens

    schedules.add_commands(commands, tokens.url_options())


def add_resource(commands: Commands) -> None:
    from stateous.cli import resources, tokens

    resources.add_commands(commands, tokens.url_options())


def add_tasks(commands: Commands) -> None:
    from stateous.cli import listing, tokens

    listing.add_commands(commands, tokens.url_options())


def add_workflow(commands: Commands) -> None:
    from stateous.cli import tokens, versions

    versions.add_commands(commands, tokens.url_options())


def add_supervise(commands: Commands) -> None:
    from stateous.cli import supervising

    supervising.add_commands(commands)


def add_demo(commands: Commands) -> None:
    from stateous.cli import demo

    demo.add_commands(commands)


#: Every command, in the order of `stateous --help`: its line there, which the parser that
#: its module adds shows too (a test compares them), and the function that adds that parser.
COMMANDS: dict[str, tuple[str, Callable[[Commands], None]]] = {
    "init": ("write a starter folder", add_init),
    "compile": ("check a workflow and write its graph file", add_compile),
    "serve": ("run the control plane", add_serve),
    "auth": (
        "add, list and revoke the credentials of a control plane; turn authentication on or off",
        add_auth,
    ),
    "backup": ("copy a live database into a file", add_backup),
    "archive": (
        "write the token trees that ended before a date to a file, or show one",
        add_archive,
    ),
    "token": ("start, fire, show and steer tokens", add_token),
    "schedule": (
        "add, list, pause, resume and remove the schedules that start tokens",
        add_schedule,
    ),
    "resource": (
        "list, pause, resume and set the slots of the resources that tasks share",
        add_resource,
    ),
    "tasks": ("list the live tasks, the oldest queued first", add_tasks),
    "workflow": ("list the graph files kept, or print one", add_workflow),
    "supervise": ("run the routines of a supervisor's folder", add_supervise),
    "demo": ("run the orders workflow end to end on SQLite, in one process", add_demo),
}


def command_named(argv: Sequence[str]) -> str | None:
    """Return the command that a command line names: its first word that is no option (the
    command line's own options take no value), or None when it names none of `COMMANDS`."""
    for word in argv:
        if not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Build the parser: in full for `command`, and for every command when it is None; any
    other command by its name and help line only."""
    # Typed as its base, as the commands' parsers are (their parents are plain parsers).
    parser: argparse.ArgumentParser = Parser(
        prog="stateous",
        description="Durable workflows: compile a graph of states, serve it, and do its work.",
    )
    parser.add_argument("--version", action="version", version=f"stateous {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (line, add) in COMMANDS.items():
        if command is None or name == command:
            add(commands)
        else:
            commands.add_parser(name, help=line)
    return parser
