"""The options of the commands that talk to a control plane: `--token-file` and `--ca-file`.

The secret itself never goes on the command line, where the list of processes
would show it to every user of the machine: `--token` is refused without
echoing what followed it (argparse would otherwise take it for `--token-file`,
and name the secret as a file that cannot be read). This module imports only
the standard library, so that the token commands stay quick to start.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from stateous.cli.errors import CommandError

if TYPE_CHECKING:
    from stateous.client.access import Access

#: Where the refusal of `--token` sends a person, for the commands with `--token-file`.
TOKEN_FILE_HINT = "put the secret in a file and give --token-file PATH, or set STATEOUS_TOKEN"
#: The same for `supervise`, whose settings are in the folder.
SETTINGS_HINT = (
    "put the secret in a file named by token_file in stateous.yaml, or set STATEOUS_TOKEN"
)


class _NoSecretOption(argparse.Action):
    """`--token`: refused with a usage error that does not repeat its value."""

    def __init__(self, *args: Any, hint: str, **keywords: Any) -> None:
        super().__init__(*args, **keywords)
        self.hint = hint

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        parser.error(
            "there is no --token option, so that the secret never shows in the list of "
            f"processes; {self.hint}"
        )


def refuse_token_option(parser: argparse.ArgumentParser, hint: str = TOKEN_FILE_HINT) -> None:
    """Refuse `--token SECRET` and `--token=SECRET` with a sentence that ends with `hint`."""
    parser.add_argument(
        "--token",
        nargs="?",
        default=argparse.SUPPRESS,
        # argparse calls `action` to make the action; its stubs take a class only.
        action=cast("type[argparse.Action]", functools.partial(_NoSecretOption, hint=hint)),
        help=argparse.SUPPRESS,
    )


def add_access_options(parser: argparse.ArgumentParser) -> None:
    """Add `--token-file` and `--ca-file`, and the refusal of `--token`."""
    parser.add_argument(
        "--token-file",
        metavar="PATH",
        help="a file that holds the secret to send, one line (default: $STATEOUS_TOKEN)",
    )
    parser.add_argument(
        "--ca-file",
        metavar="PATH",
        help="the CA certificates (PEM) that an https:// control plane must be signed by "
        "(default: $STATEOUS_CA_FILE, else the system's)",
    )
    refuse_token_option(parser)


def access_of(args: argparse.Namespace) -> Access:
    """Read the secret and the trusted CAs that the options, or else the environment, name."""
    from stateous.client.access import Access
    from stateous.client.http import BadSetting

    try:
        return Access.read(token_file=args.token_file, ca_file=args.ca_file)
    except BadSetting as ex:
        raise CommandError(str(ex)) from None
