"""`stateous token watch ID`: a token's history, then each entry as it commits.

The lines are those of `stateous token show` (`history.py`), printed as the entries
arrive from the control plane's live stream; the command ends, with exit code 0,
once the token has ended (completed, failed or cancelled). A cut connection or a
restarted control plane is followed through (`Client.watch`), so no line is lost
or printed twice.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from stateous.cli.history import history_lines

if TYPE_CHECKING:
    from stateous.client import Client


def watch(client: Client, args: argparse.Namespace) -> list[str]:
    for line in history_lines(client.watch(args.id)):
        print(line, flush=True)
    return []
