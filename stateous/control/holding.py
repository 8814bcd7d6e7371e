"""Which task a sender may still act on: the one rule behind every report, note and memory
write, so that each refuses the same way."""

from __future__ import annotations

from stateous.control.errors import AttemptOver, TaskNotFound, TaskNotHeld
from stateous.control.store import TaskRow, TokenRow, Tx
from stateous.model.vocabulary import WORKED_ON, TaskStatus


def held_task(
    tx: Tx,
    ident: int,
    attempt: int | None,
    supervisor: str | None,
    *,
    outside: bool = False,
) -> tuple[TaskRow, TokenRow]:
    """Find a task that the sender still works on, on this attempt, and its token (locked
    in a write).

    A supervisor's report, note or memory write needs its own claim; a report from
    outside needs a waiting task; a note or a memory write that names no supervisor
    needs a live attempt. A refusal names only what the sender sent: never the
    supervisor that holds the task, nor the attempt it is at.
    """
    task = tx.task(ident)
    if task is None:
        raise TaskNotFound(f"no task has the id {ident}")
    if attempt is not None and attempt != task.attempt:
        if attempt < task.attempt:
            raise AttemptOver(f"task {ident} has moved on from attempt {attempt}")
        raise TaskNotHeld(f"task {ident} is not at attempt {attempt}")
    if outside:
        if task.status != TaskStatus.WAITING or tx.retry_planned(task.token):
            raise TaskNotHeld(f"task {ident} is not waiting for an outcome from outside")
    elif supervisor is not None:
        if task.status != TaskStatus.CLAIMED or task.claimed_by != supervisor:
            raise TaskNotHeld(f"task {ident} is not held by supervisor {supervisor!r}")
    elif task.status not in WORKED_ON or tx.retry_planned(task.token):
        raise TaskNotHeld(f"nobody works on task {ident} now")
    token = tx.token(task.token)
    assert token is not None  # a task's token is deleted only with it
    return task, token
