"""What the supervisor does with each refusal of the control plane, and what its log says.

A refusal that says "later" (`database_busy`, `not_serving`) is tried again after
the back-off; one that refuses this supervisor's credential keeps every message in
the outbox until a good one is given; one that says the report cannot fit turns it
into a failed attempt; one that says the attempt is over or not held, for a note or a
memory write of a running task, means the task is gone; any other drops the message,
with one log line. A claim refused because the control plane does not keep the graph of
contract.py (a database restored from before it was served) is tried after the back-off.
"""

from __future__ import annotations

import logging
import time

from stateous.client.http import Refused
from stateous.model.codes import RefusalCode
from stateous.model.vocabulary import MessageKind, ReportKind
from stateous.supervisor.attempt import failed_report
from stateous.supervisor.outbox import Message, Outbox

log = logging.getLogger("stateous.supervisor")

#: Seconds to wait before trying an unreachable control plane again.
BACKOFF = (1, 2, 4, 8, 16, 30)

#: Refusals after which a report is turned into a failed attempt.
REPORT_FAILS = (
    RefusalCode.EVENT_NOT_ALLOWED,
    RefusalCode.INVALID_CONTEXT,
    RefusalCode.INVALID_PAYLOAD,
    RefusalCode.INVALID_QUOTA,
    RefusalCode.RESOURCE_NOT_USED,
)
#: Refusals that say "try again later", not "this message is wrong".
TRY_AGAIN = (RefusalCode.DATABASE_BUSY, RefusalCode.NOT_SERVING)
#: Refusals of a claim that are tried again after the back-off, not every second: those that
#: say "later", and one that names a graph the control plane does not keep (contract.py's).
CLAIM_LATER = (*TRY_AGAIN, RefusalCode.GRAPH_NOT_FOUND)
#: Refusals that say that the attempt of a message is over, or its task not held.
GONE = (RefusalCode.ATTEMPT_OVER, RefusalCode.TASK_NOT_HELD)
#: Refusals of this supervisor's credential: its messages wait for a good one.
DENIED = (RefusalCode.UNAUTHORIZED, RefusalCode.FORBIDDEN)
#: How often the log says again that the credential is refused, and a message waiting for
#: a good one is sent again, in seconds.
DENIED_EVERY = 60.0
#: What the log says of a message of each kind left in the outbox at a stop.
KEPT_AT_STOP: dict[str, str] = {
    MessageKind.REPORT: "%s: the control plane cannot be reached; the report stays in the outbox "
    "for the next start",
    MessageKind.NOTE: "%s: the control plane cannot be reached; the note stays in the outbox "
    "for the next start",
    MessageKind.MEMORY: "%s: the control plane cannot be reached; the memory write stays in "
    "the outbox for the next start",
    MessageKind.SPEND: "%s: the control plane cannot be reached; the spend stays in the outbox "
    "for the next start",
}
#: What the log says of a refused note or memory write, which is then dropped.
REFUSED: dict[str, str] = {
    MessageKind.NOTE: "%s: the control plane refused a note: %s",
    MessageKind.MEMORY: "%s: the control plane refused a memory write: %s",
    MessageKind.SPEND: "%s: the control plane refused a spend: %s",
}
#: What the log says of a message kept at a stop because the credential is refused.
KEPT_DENIED: dict[str, str] = {
    MessageKind.REPORT: "%s: the control plane refuses this supervisor's credential; the "
    "report stays in the outbox for a start with a good one",
    MessageKind.NOTE: "%s: the control plane refuses this supervisor's credential; the "
    "note stays in the outbox for a start with a good one",
    MessageKind.MEMORY: "%s: the control plane refuses this supervisor's credential; the "
    "memory write stays in the outbox for a start with a good one",
    MessageKind.SPEND: "%s: the control plane refuses this supervisor's credential; the "
    "spend stays in the outbox for a start with a good one",
}


def backoff(tries: int) -> int:
    """The seconds to wait after `tries` failed tries: 1, 2, 4, 8, 16, then 30."""
    return BACKOFF[min(tries, len(BACKOFF) - 1)]


class Denials:
    """What the log says when the control plane refuses the supervisor's credential."""

    def __init__(self) -> None:
        #: When the log last said it (monotonic seconds).
        self._said_at = -DENIED_EVERY

    def say(self, ex: Refused, then: str) -> None:
        """Say, once a minute at most, that the control plane refuses the credential, and why."""
        now = time.monotonic()
        if now - self._said_at < DENIED_EVERY:
            return
        self._said_at = now
        log.warning(
            "the control plane refuses this supervisor's credential (%s: %s); %s until it is "
            "given a good one (token_file: in stateous.yaml, or STATEOUS_TOKEN)",
            ex.code,
            ex.message,
            then,
        )


def refused_report(outbox: Outbox, message: Message, label: str, ex: Refused) -> bool:
    """Say that a report was refused; turn one that cannot fit into a failed attempt in its
    place (True: it goes again), else drop it."""
    log.warning("%s: the control plane refused the report: %s", label, ex.message)
    if ex.code in REPORT_FAILS and message.body.get("kind") != ReportKind.FAILED:
        failed = failed_report(f"the control plane refused the report: {ex.message}")
        outbox.replace(message.id, MessageKind.REPORT, failed)
        message.body.clear()
        message.body.update(failed)
        return True
    outbox.remove(message.id)
    return False
