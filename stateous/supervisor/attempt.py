"""One attempt of a routine: run it, on the event loop or on a kept thread, and read its result.

An `async def` routine runs on the supervisor's loop, so a lost task can cancel it;
a `def` routine runs on one of the supervisor's daemon threads (workers.py), so a
forced stop never waits for it. What it returns becomes the body of its report: an
event of its state, waiting, or a failed attempt that says what was wrong.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable
from typing import Any

from stateous.model.vocabulary import ReportKind
from stateous.supervisor.routine import (
    Context,
    Occurrence,
    QuotaExhausted,
    RetryLater,
    StateRef,
)
from stateous.supervisor.workers import Workers

log = logging.getLogger("stateous.supervisor")


@functools.cache
def _awaited(routine: Callable[..., Any]) -> bool:
    """Whether a routine is an `async def`, asked once a routine rather than at each of its
    runs (some 5,000 instructions each)."""
    return inspect.iscoroutinefunction(routine)


async def run_routine(routine: Callable[..., Any], ctx: Context[Any], workers: Workers) -> Any:
    """Run a routine with its context and return what it returned."""
    if _awaited(routine):
        return await routine(ctx)
    return await workers.run(routine, ctx)


def report_of(state: StateRef, result: Any, ctx: Context[Any]) -> dict[str, Any]:
    """Turn what a routine returned into the body of its report."""
    if isinstance(result, type) and issubclass(result, Occurrence):
        result = result()
    extra: dict[str, Any] = {}
    if ctx.changes:
        extra["context"] = ctx.changes
    if ctx.schedules:
        extra["schedules"] = ctx.schedules
    if result is None:
        return {"kind": ReportKind.WAITING, **extra}
    if not isinstance(result, Occurrence):
        return failed_report(
            f"the routine returned {result!r:.200}, which is neither an event of "
            f"{state.name!r} nor None"
        )
    if state.event(result.name) is None:
        return failed_report(
            f"the routine returned {result.name!r}, which {state.name!r} cannot emit"
        )
    return {
        "kind": ReportKind.EVENT,
        "event": result.name,
        "payload": result.payload_json(),
        **extra,
    }


def failed_report(error: str, raised: Exception | None = None) -> dict[str, Any]:
    """The body of a failed attempt; a routine that raised `RetryLater` adds the wait it
    asked for, so the control plane takes it instead of the state's `retry_delay`; one that
    raised `QuotaExhausted` reports the quota instead, which spends no attempt."""
    if isinstance(raised, QuotaExhausted):
        return raised.report()
    body: dict[str, Any] = {"kind": ReportKind.FAILED, "error": error}
    if isinstance(raised, RetryLater):
        body["retry_after"] = raised.seconds
    return body


def raised_report(label: str, error: str, raised: Exception) -> dict[str, Any]:
    """The report of a routine that raised, said in the log: a quota as a warning, any other
    failure as an error with its traceback."""
    if isinstance(raised, QuotaExhausted):
        log.warning("%s: the routine met a quota: %s", label, raised.reason)
    else:
        log.error("%s: the routine failed: %s", label, error, exc_info=raised)
    return failed_report(error, raised)


def reported(label: str, body: dict[str, Any]) -> None:
    """Say in the log what a report that landed said."""
    if body["kind"] == ReportKind.EVENT:
        log.info("%s: reported %s", label, body["event"])
    elif body["kind"] == ReportKind.WAITING:
        log.info("%s: waits for a report from outside", label)
    elif body["kind"] == ReportKind.QUOTA:
        log.info("%s: reported a quota: %s", label, body.get("reason"))
    else:
        log.info("%s: reported a failed attempt: %s", label, body.get("error"))
