"""What the supervisor holds: each task whose routine runs, and where its routine's notes go.

A task is held from its grant until its routine ends. It can be gone before that:
the control plane took it back (its token was cancelled or moved on, its lease or
attempt is over), or a forced stop gave it back. From then on its routine sees
`ctx.cancelled`, and its notes and memory writes are dropped with one log line, not
sent to be refused one by one.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from stateous.model.wire import Grant

log = logging.getLogger("stateous.supervisor")

#: Why a task is gone when a heartbeat or a refusal says it is no longer held.
TOOK_BACK = "the control plane took it back"


def given_back(name: str) -> str:
    """The error of the failed attempt that gives a task back at a forced stop."""
    return f"{name} was stopped: task given back"


@dataclass
class Running:
    """A task whose routine runs now."""

    grant: Grant
    job: asyncio.Task[None] | None = None
    #: Why the task is gone; None while the supervisor holds it.
    gone: str | None = None
    #: Whether the log has said that the routine's notes and memory writes are dropped.
    said_dropped: bool = False

    @property
    def label(self) -> str:
        return f"task {self.grant.task} of {self.grant.token}"


class Sink:
    """Where a routine's notes and memory writes go: to the outbox at once, while the task
    is held; nowhere once it is gone."""

    def __init__(
        self, running: Running, keep: Callable[[Grant, str, dict[str, Any]], None]
    ) -> None:
        self._running = running
        self._keep = keep

    @property
    def gone(self) -> str | None:
        return self._running.gone

    def note(self, text: str) -> None:
        self._send("note", {"text": text})

    def memory(self, key: str, value: Any) -> None:
        self._send("memory", {"key": key, "value": value})

    def spend(self, amounts: dict[str, float]) -> None:
        """Keep a spend with a key of its own, in its outbox message: each time it is sent
        again (its answer lost, or this process restarted) the control plane counts it once."""
        self._send("spend", {"spent": amounts, "key": f"spend-{uuid.uuid4().hex}"})

    def _send(self, kind: str, body: dict[str, Any]) -> None:
        running = self._running
        if running.gone is None:
            self._keep(running.grant, kind, body)
            return
        if not running.said_dropped:
            running.said_dropped = True
            log.info(
                "%s: the task is gone (%s); the notes and memory writes of its routine are dropped",
                running.label,
                running.gone,
            )


async def all_ended(running: dict[int, Running]) -> None:
    """Wait until the routine of every task held has ended, of those held meanwhile too."""
    while running:
        jobs = [item.job for item in running.values() if item.job is not None]
        if not jobs:
            return
        await asyncio.wait(jobs)
