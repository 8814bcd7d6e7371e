"""The supervisor's loops: claim tasks, run routines, beat the heart, send the outbox.

Everything runs on one asyncio loop: `async def` routines on it; `def` routines and
the blocking HTTP requests on its kept daemon threads (workers.py). Every report,
note and memory write goes to the outbox first and is sent from there in order,
so a network failure or a crash loses nothing. A first stop signal takes no new
tasks and waits; a second one (or a loop that died) cancels the routines, gives
their tasks back as failed attempts through the outbox, and exits 1. The heartbeat
is heartbeat.py's; what a task is while it runs, held.py's; which graph it claims for,
versions.py's. Every answer is bounded and typed (answers.py): a bad one is one log line
and a try again after the back-off, and a grant whose context does not fit the routine's
model fails its attempt without running the routine.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import signal
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from stateous.client.http import NotServing, Refused, Unreachable
from stateous.client.urls import Urls
from stateous.model.codes import RefusalCode
from stateous.model.heap import freeze_start_up
from stateous.model.vocabulary import MessageKind
from stateous.model.wire import Grant
from stateous.supervisor import answers, granting
from stateous.supervisor.answers import BadAnswer, BoundedConnection, read_grant, read_health
from stateous.supervisor.attempt import (
    failed_report,
    raised_report,
    report_of,
    reported,
    run_routine,
)
from stateous.supervisor.folder import (
    FolderError,
    Routines,
    Settings,
    failure_text,
    load_routines,
    not_served_line,
    read_settings,
)
from stateous.supervisor.heartbeat import Heart
from stateous.supervisor.held import TOOK_BACK, Running, Sink, all_ended, given_back
from stateous.supervisor.outbox import Message, Outbox
from stateous.supervisor.refusals import (
    CLAIM_LATER,
    DENIED,
    DENIED_EVERY,
    GONE,
    KEPT_AT_STOP,
    KEPT_DENIED,
    REFUSED,
    TRY_AGAIN,
    Denials,
    backoff,
    refused_report,
)
from stateous.supervisor.routine import Context, EnteredBy, TaskGone, context_misfit
from stateous.supervisor.streams import Streams
from stateous.supervisor.versions import Watch, unkept
from stateous.supervisor.workers import Workers

log = logging.getLogger("stateous.supervisor")

#: Seconds that a stop with the outbox waiting gives the sender to say what it keeps.
KEPT_SAID_WITHIN = 2.0
#: Seconds a claim waits on the control plane for a task (less than ANSWER_SECONDS).
CLAIM_WAIT = 20


class Supervisor:
    """One supervisor of one folder."""

    def __init__(
        self, folder: Path, settings: Settings, routines: Routines, outbox: Outbox
    ) -> None:
        self.folder = folder
        self.root = folder.resolve()
        self.settings = settings
        self.routines = routines
        self.outbox = outbox
        #: The kept threads of the `def` routines and of every request to the control plane.
        self.workers = Workers()
        self.urls = Urls(settings.urls)  # shared: the connections move together
        self.running: dict[int, Running] = {}
        self.stopping = False
        self.forced = False
        self.broken = False
        self.unreachable = False
        #: The control plane refuses this supervisor's credential: messages wait.
        self.denied = False
        self.denials = Denials()  # what the log says of a refused credential, once a minute
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop = asyncio.Event()
        self.streams = Streams(outbox, self._connect, self._send_message, self._halted)
        self._sender: asyncio.Task[None] | None = None
        self.heart = Heart(
            settings.name, self.running, self._connect, self._lose, outbox.reporting, self.workers
        )
        self.watch = Watch(routines.by_state, routines.checksum, self._connect, self.workers)
        self._nudge = asyncio.Event()
        self._slots = asyncio.Semaphore(settings.tasks)
        #: The connection of the claims, which a stop cuts while a claim waits.
        self._claiming: BoundedConnection | None = None
        #: The request ids of the asks for tasks, and the slots that reports carry (granting.py).
        self.asking = granting.Asking(settings.labels)
        self.eager = granting.Slots(settings.eager)

    @classmethod
    def open(cls, folder: Path, url: str | None = None) -> Supervisor:
        """Read the folder, lock its outbox and import its routines; raise a Failure."""
        if not folder.is_dir():
            raise FolderError(f"{folder} is not a folder")
        settings = read_settings(folder)
        if url is not None:
            settings = replace(settings, urls=(url.rstrip("/"),))
        routines = load_routines(folder)
        return cls(folder, settings, routines, Outbox(folder))

    # the outbox

    def keep(self, grant: Grant, kind: str, body: dict[str, Any]) -> None:
        """Write a message to the outbox, then wake the sender; safe from any thread."""
        self.outbox.put(grant.task, grant.attempt, grant.token, kind, body)
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self.streams.kept, grant.task)

    async def _call(
        self,
        connection: BoundedConnection,
        method: str,
        path: str,
        body: Any = None,
        read: Callable[[int, Any], Any] | None = None,
    ) -> Any:
        """Send one request on a kept thread; return its answer as `read` makes it."""
        return await self.workers.run(connection.ask, method, path, body, read)

    async def _retry_later(self, ex: Exception, tries: int, most: float | None = None) -> int:
        """Log a control plane that is unreachable or answers badly, wait the back-off (no
        longer than `most` seconds); return the count of tries."""
        wait = backoff(tries) if most is None else min(backoff(tries), most)
        log.warning("%s; trying again in %gs", ex, wait)
        await self._pause(wait)
        return tries + 1

    @property
    def outbox_waits(self) -> bool:
        """Whether the outbox waits: the control plane is unreachable or refuses the credential."""
        return self.unreachable or self.denied

    async def _pause(self, seconds: float) -> None:
        """Sleep, but wake at once when a stop is asked."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), seconds)

    def _connect(self) -> BoundedConnection:
        """A new connection to the control plane, with this folder's credential and CA."""
        return BoundedConnection(self.urls, access=self.settings.access)

    def _halted(self) -> bool:
        """Sending ends: a stop came while the outbox waits for the control plane."""
        return self.outbox_waits and self.stopping

    async def _send_message(self, connection: BoundedConnection, message: Message) -> None:
        """Send one message of the outbox; a report that carries its task's slot asks `next`.
        Only the report: a note of the same attempt, sent after its routine ended, would
        free the slot and leave the report to go without `next`."""
        if message.kind == MessageKind.REPORT and self.eager.carries(message.task, message.attempt):
            await self._send_eager(connection, message)
        else:
            await self._send(connection, message)

    async def _send_eager(self, connection: BoundedConnection, message: Message) -> None:
        """Send a report that carries its task's slot, asking `next` with it; run the task it
        is granted in that slot, else free the slot (granting.py)."""
        grant: Grant | None = None
        try:
            if self.stopping:
                await self._send(connection, message)
                return
            request = granting.new_request()
            asked = self.asking.next(self.watch.written, self.routines.checksum, request)
            landed, grant = await self._send(connection, message, asked)
            if not landed:
                self.asking.lost(request)
        finally:
            self.eager.take(message.task, message.attempt)
            if grant is None or not self._run_granted(grant, message.task):
                self._slots.release()
                self._nudge.set()

    def _usable(self, grant: Grant, request: str) -> Grant:
        return granting.usable(grant, self.routines, self.running, self.settings.name, request)

    def _run_granted(self, grant: Grant, task: int) -> bool:
        """Run a task granted in a report's answer; False when it cannot run here. Granted
        to a report sent before a stop, it runs too, and the stop waits for it as for any
        task held (`_finish_running`); only a forced stop gives it back."""
        try:
            self._usable(grant, granting.reporting(task))
        except BadAnswer as ex:
            log.warning("%s", ex)
            return False
        (self._give_back if self.forced else self._start)(grant)
        return not self.forced

    async def _send(
        self, connection: BoundedConnection, message: Message, asked: dict[str, Any] | None = None
    ) -> tuple[bool, Grant | None]:
        """Send a message until it lands or is refused; return whether it landed, and the
        grant in the answer of a report that `asked` its next task."""
        label = f"task {message.task} of {message.token}"
        tries = 0
        while True:
            # Each message names this supervisor: a credential bound to it may send only so.
            body = {**message.body, "attempt": message.attempt, "supervisor": self.settings.name}
            grant = None
            try:
                if message.kind == MessageKind.REPORT:
                    # Sent during a stop, a report asks for no task: the stop takes no new one.
                    if asked is not None and not self.stopping:
                        body["next"] = asked
                    path = f"/tasks/{message.task}/report"
                    grant = await self._call(connection, "POST", path, body, answers.read_next)
                elif message.kind in (MessageKind.NOTE, MessageKind.SPEND):
                    path = f"/tasks/{message.task}/{message.kind}"
                    await self._call(connection, "POST", path, body)
                else:
                    await self._call(connection, "PUT", f"/tasks/{message.task}/memory", body)
            except (Unreachable, BadAnswer) as ex:
                self.unreachable = True
                if self.stopping:
                    log.warning(KEPT_AT_STOP[message.kind], label)
                    return False, None
                tries = await self._retry_later(ex, tries, self._resend_within(message))
                continue
            except Refused as ex:
                if ex.code in DENIED:
                    self.denied = True
                    self.denials.say(ex, "its messages stay in the outbox")
                    if self.stopping:
                        log.warning(KEPT_DENIED[message.kind], label)
                        return False, None
                    await self._pause(DENIED_EVERY)
                    continue
                self.denied = False
                if ex.code in TRY_AGAIN:
                    wait = backoff(tries)
                    log.warning(
                        "the control plane refused (%s): %s; trying again in %ds",
                        ex.code,
                        ex.message,
                        wait,
                    )
                    tries += 1
                    # At a stop too: the last reports wait for a busy database, not in a spin.
                    await asyncio.sleep(wait)
                    continue
                self.unreachable = False
                if self._refused(message, label, ex):
                    continue
                return False, None
            self.unreachable = False
            self.outbox.remove(message.id)
            if message.kind == MessageKind.REPORT:
                reported(label, message.body)
                if asked is None:
                    self._nudge.set()
            return True, grant

    def _resend_within(self, message: Message) -> float | None:
        """The longest wait before a message that got no answer goes again: for a report,
        an eighth of the lease, as for a claim. Its answer may have granted a task (asked
        by this try or an earlier one); sent again, the report is refused as landed, and
        the next claim asks for that grant again, all before the task's lease could end."""
        return self.heart.last_lease / 8 if message.kind == MessageKind.REPORT else None

    def _refused(self, message: Message, label: str, ex: Refused) -> bool:
        """Handle a refusal; return True when the message was replaced and must go again."""
        if message.kind != MessageKind.REPORT:
            self.outbox.remove(message.id)
            if ex.code not in GONE or not self._lose(message.task, TOOK_BACK, message.attempt):
                log.warning(REFUSED[message.kind], label, ex.message)
            return False
        if ex.code == RefusalCode.TASK_NOT_HELD:
            self.heart.asked.set()
        return refused_report(self.outbox, message, label, ex)

    # starting

    async def _await_control_plane(self) -> bool:
        """Wait for /health with the back-off; check the checksum. False if stopped first."""
        connection = self._connect()
        tries = 0
        while not self.stopping:
            try:
                health = await self._call(connection, "GET", "/health", None, read_health)
            except (Unreachable, NotServing) as ex:
                tries = await self._retry_later(ex, tries)
                continue
            except (Refused, BadAnswer) as ex:
                reason = ex.message if isinstance(ex, Refused) else ex.reason
                raise FolderError(
                    f"{self.urls.current} did not answer as a Stateous control plane: {reason}"
                ) from None
            finally:
                connection.close()
            if not await self.watch.start(health.checksum):
                raise unkept(self.folder, self.routines.checksum, health.checksum)
            return True
        return False

    # claiming and running

    async def _claim(self, connection: BoundedConnection, wait: float) -> Grant | None:
        """Claim a task, sending the same request id again after a lost answer (the id of
        the last ask, a report's `next` too, until an answer is read: granting.py).

        After a bad answer the next claim is a new one, with a new request id: the
        same one would get the same answer again.
        """
        request = self.asking.claiming()
        asked = self.asking.next(self.watch.written, self.routines.checksum, request)
        body = {**asked, "supervisor": self.settings.name, "wait": wait}
        tries = 0
        while not self.stopping and body["states"]:
            try:
                grant = await self._call(connection, "POST", "/tasks/claim", body, read_grant)
                self.asking.answered(body["request"])
                if grant is None:
                    return None
                return self._usable(grant, granting.CLAIM)
            except Unreachable as ex:
                if self.stopping:  # the stop cut the waiting claim
                    return None
                # The claim may have been granted: ask again before its lease could end.
                tries = await self._retry_later(ex, tries, self.heart.last_lease / 8)
            except BadAnswer as ex:
                self.asking.answered(body["request"])
                body["request"] = self.asking.claiming()
                tries = await self._retry_later(ex, tries)
            except Refused as ex:
                if ex.code in DENIED:
                    self.denials.say(ex, "it claims no task")
                    await self._pause(DENIED_EVERY)
                    continue
                log.warning("the control plane refused a claim: %s", ex.message)
                await self._pause(granting.IDLE if ex.code not in CLAIM_LATER else backoff(tries))
                tries += 1
        return None

    async def _claim_loop(self) -> None:
        connection = self._claiming = self._connect()
        granted = False
        while not self.stopping:
            await self._slots.acquire()
            if self.stopping:
                self._slots.release()
                break
            # While a task runs or reports here, its report is likely the next ask: claim
            # after a pause or a freed slot, and do not wait on the control plane
            # (granting.py); but at once after a claim that was granted, since more may wait.
            if self._busy() and not self._nudge.is_set() and not granted:
                await granting.idle(self._stop, self._nudge, None)
            self._nudge.clear()
            began = time.monotonic()
            grant = await self._claim(connection, 0 if self._busy() else CLAIM_WAIT)
            granted = grant is not None
            if grant is None:
                self._slots.release()
                # Answered before its wait: a control plane that holds its most waiting
                # claims, or one that does not wait; else its wait ended: claim again.
                if time.monotonic() - began < CLAIM_WAIT / 2:
                    await granting.idle(self._stop, self._nudge, connection.retry_after)
                continue
            if self.forced:  # granted while the supervisor was stopped at once
                self._give_back(grant)
                self._slots.release()
                break
            self._start(grant)
        connection.close()

    def _busy(self) -> bool:
        return self.eager.on and bool(self.running or self.eager.reporting)

    def _start(self, grant: Grant) -> None:
        """Run the routine of a task granted, in the slot its ask took."""
        running = Running(grant)
        self.running[grant.task] = running
        log.info(
            "task %d: %s of %s, attempt %d",
            grant.task,
            grant.state,
            grant.token,
            grant.attempt,
        )
        running.job = asyncio.create_task(self._work(running))
        # The slot is free again whatever happens, even to a job cancelled unstarted.
        running.job.add_done_callback(functools.partial(self._finish, running))
        self.heart.holds(grant)

    async def _work(self, running: Running) -> None:
        """Run a task's routine and keep its report, unless the task is gone."""
        outcome = await self._attempt(running)
        if outcome is not None and running.gone is None:
            if self.eager.on and not self.stopping:
                self.eager.pass_on(running.grant)
            self.keep(running.grant, MessageKind.REPORT, outcome)

    async def _attempt(self, running: Running) -> dict[str, Any] | None:
        """The report of one attempt; None when its routine was cancelled."""
        grant = running.grant
        state, routine = self.routines.by_state[grant.state]
        misfit = context_misfit(grant.context, self.routines.models.get(grant.state))
        if misfit is not None:
            return failed_report(misfit)
        ctx: Context[Any] = Context(
            token=grant.token,
            task=grant.task,
            state=grant.state,
            visit=grant.visit,
            attempt=grant.attempt,
            context=grant.context,
            memory=grant.memory,
            entered_by=EnteredBy(grant.entered_by.name, grant.entered_by.payload),
            sink=Sink(running, self.keep),
        )
        try:
            return report_of(state, await run_routine(routine, ctx, self.workers), ctx)
        except asyncio.CancelledError:
            return None
        except TaskGone as ex:
            if running.gone is not None:
                return None
            return failed_report(failure_text(self.root, ex))
        except Exception as ex:
            return raised_report(running.label, failure_text(self.root, ex), ex)

    def _finish(self, running: Running, job: object = None) -> None:
        self.running.pop(running.grant.task, None)
        if not self.eager.ended(running.grant.task):
            self._slots.release()

    def _lose(self, task: int, why: str, attempt: int | None = None) -> bool:
        """Cancel the routine of a task that is gone and drop its messages; return whether
        the task (of that attempt) runs here."""
        running = self.running.get(task)
        if running is None or attempt not in (None, running.grant.attempt):
            return False
        if running.gone is not None:
            return True
        running.gone = why
        log.info("%s: %s; cancelling its routine", running.label, why)
        self.outbox.drop_attempt(task, running.grant.attempt)
        self.eager.forget(task, running.grant.attempt)
        if running.job is not None:
            running.job.cancel()
        return True

    # stopping

    def request_stop(self) -> None:
        """Stop from another thread or a signal: first gracefully, then at once."""
        if self._loop is not None:
            # A loop that has closed belongs to a supervisor that has ended: nothing to stop.
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._on_signal)

    def _on_signal(self) -> None:
        if not self.stopping:
            self._take_no_more()
            log.info(
                "stopping: no new tasks; waiting for %d routine(s) (signal again to stop now)",
                len(self.running),
            )
            return
        self._stop_now()

    def _take_no_more(self) -> None:
        self.stopping = True
        self._stop.set()
        self.streams.wake.set()
        # The claim loop may wait for a slot that a report holds which will not be sent
        # before the exit (the control plane is out of reach): it wakes, sees the stop, ends.
        self._slots.release()
        if self._claiming is not None:
            self._claiming.abort()

    def _stop_now(self) -> None:
        """Cancel the routines and give their tasks back, so they are tried again at once."""
        self._take_no_more()
        if self.forced:
            return
        self.forced = True
        log.info(
            "stopping now: cancelling %d routine(s) and giving their tasks back", len(self.running)
        )
        for running in list(self.running.values()):
            if running.gone is not None:
                continue
            running.gone = given_back(self.settings.name)
            self._give_back(running.grant)
            if running.job is not None:
                running.job.cancel()

    def _give_back(self, grant: Grant) -> None:
        """Keep the failed attempt that gives a task back; the sender sends it before exit."""
        self.keep(grant, MessageKind.REPORT, failed_report(given_back(self.settings.name)))

    def _watched(self, loop: Any, name: str) -> asyncio.Task[None]:
        """Start a side loop; if it dies, stop taking tasks and exit 1 at the end."""
        task: asyncio.Task[None] = asyncio.create_task(loop, name=name)

        def check(done: asyncio.Task[None]) -> None:
            if done.cancelled() or done.exception() is None:
                return
            log.error("the %s loop failed (%s); stopping", name, done.exception())
            self.broken = True
            self._stop_now()

        task.add_done_callback(check)
        return task

    async def run(self, *, signals: bool = True) -> int:
        """Supervise until stopped; return the exit code."""
        self._loop = asyncio.get_running_loop()
        if signals:
            for number in (signal.SIGINT, signal.SIGTERM):
                self._loop.add_signal_handler(number, self._on_signal)
        try:
            if not await self._await_control_plane():
                return 0
            served = ", ".join(sorted(self.routines.by_state))
            name, url = self.settings.name, self.urls.current
            log.info("%s serves %s; the control plane is %s", name, served, url)
            if self.routines.stubs:
                log.info(not_served_line(self.routines.stubs))
            freeze_start_up()
            left = len(self.outbox.pending())
            if left:
                log.info("sending %d message(s) left in the outbox", left)
            sender = self._sender = self._watched(self.streams.run(), "sending")
            self.streams.wake.set()
            await asyncio.sleep(0)
            await self._drained_or_stopped()
            heart = self._watched(self.heart.loop(), "heartbeat")
            watch = self._watched(self.watch.loop(), "graph watch")
            await self._claim_loop()
            await self._finish_running(sender)
            self._say_kept()
            for loop_task in (sender, heart, watch):
                loop_task.cancel()
            await asyncio.gather(sender, heart, watch, return_exceptions=True)
            return 1 if self.forced or self.broken else 0
        finally:
            self.workers.close()
            self.outbox.close()

    async def _finish_running(self, sender: asyncio.Task[None]) -> None:
        """At a stop: let the tasks held end and their messages go. A report sent before the
        stop may be answered with the next task, which runs too; the reports sent since ask
        for none, so this ends."""
        while True:
            await all_ended(self.running)
            if self.outbox_waits:
                # Woken by the stop, the sender tries once more and says what it keeps.
                await asyncio.wait([sender], timeout=KEPT_SAID_WITHIN)
                return
            self.streams.wake.set()
            await self._drained_or_stopped(final=True)
            if not self.running:
                return

    def _say_kept(self) -> None:
        """Say what stays in the outbox when the sender died, for the next start."""
        sender = self._sender
        if sender is not None and sender.done() and not sender.cancelled() and sender.exception():
            left = len(self.outbox.pending())
            if left:
                log.warning("%d message(s) stay in the outbox for the next start", left)

    async def _drained_or_stopped(self, *, final: bool = False) -> None:
        """Wait until the outbox is empty, the control plane is gone at a stop, or sending died."""
        sending = self._sender
        while not self.streams.drained.is_set() and not (sending is None or sending.done()):
            if self.outbox_waits and (self.stopping or final):
                return
            await asyncio.sleep(0.05)
