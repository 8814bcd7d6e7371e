"""What `GET /metrics` answers: the figures of the control plane, named `stateous_*`.

Three sources feed it. The database, through the read that `/stats` makes:
the live tokens and tasks, the oldest queued task of each state, the pending
timers, and the counters kept beside the ledger rows they count, so that they
survive a restart and agree with the history. The HTTP server, in memory: every
request by route template (never the raw path, whose ids would make a series
each), method and status, with a histogram of the time it took. The store's
writer, in memory: the time of each commit and how many operations it took.
The GitHub deliveries that a webhook does not take, in memory: they are kept in
no token, so they are counted here. The in-memory figures start again at zero
with the process, as Prometheus expects of counters and histograms. For a
fleet: when each supervisor of the last day was last heard from (a claim or a
heartbeat), as a Unix time, and the build.
"""

from __future__ import annotations

import platform
import threading
import time
from typing import TYPE_CHECKING, Any

from stateous._version import __version__
from stateous.control import stats
from stateous.control.histogram import SECONDS, Histogram
from stateous.control.http.exposition import Family, render
from stateous.control.http.hooks import Hooks
from stateous.control.store import Counter, joined
from stateous.model.codes import RefusalCode
from stateous.model.vocabulary import ENDING, LIVE_TASK, ReportKind

if TYPE_CHECKING:
    from stateous.control.engine import Engine

#: The route label of a request that matched no route.
UNMATCHED = "unmatched"
#: The methods counted under their own name; any other counts as `other`, so that
#: made-up methods cannot add series without end.
METHODS = frozenset(("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"))
OTHER_METHOD = "other"
#: The outcomes of a report, as `ReportBody.kind` names them.
OUTCOMES = tuple(ReportKind)
#: The codes an event is refused with once it is in the ledger (`event_rejected`).
REFUSALS = (RefusalCode.EVENT_NOT_ALLOWED, RefusalCode.TOKEN_NOT_ACTIVE)
#: The counters of the database without a label: name, help, counter.
PLAIN = (
    ("stateous_tokens_started_total", "Tokens started, children included.", Counter.TOKENS_STARTED),
    ("stateous_events_fired_total", "Events accepted: each moved a token.", Counter.EVENTS_FIRED),
    ("stateous_tasks_claimed_total", "Tasks granted to a supervisor.", Counter.TASKS_CLAIMED),
    (
        "stateous_attempts_failed_total",
        "Attempts of tasks that failed, by a report or an ended lease.",
        Counter.ATTEMPTS_FAILED,
    ),
    (
        "stateous_leases_ended_total",
        "Leases that ended without a heartbeat, each a failed attempt.",
        Counter.LEASES_ENDED,
    ),
    (
        "stateous_retries_stopped_total",
        "Tasks whose retries ended early: the same failure on the same context (stop_on_repeat).",
        Counter.RETRIES_STOPPED,
    ),
    ("stateous_timers_fired_total", "Timers and timeouts that fired.", Counter.TIMERS_FIRED),
    (
        "stateous_retention_removed_tokens_total",
        "Ended tokens that retention removed (serve --keep-ended), children included.",
        Counter.TOKENS_REMOVED,
    ),
    (
        "stateous_budget_warnings_total",
        "Trees whose spend crossed the warning share of a unit of their budget (budget_warn=).",
        Counter.BUDGET_WARNINGS,
    ),
    (
        "stateous_budgets_spent_total",
        "Trees whose spend reached their budget: over_budget, routed or the tree paused.",
        Counter.BUDGETS_SPENT,
    ),
)


class HttpMetrics:
    """Falcon middleware that counts every request and times it, by route template.

    A write that the server's loop serves is answered once its turn commits, after the
    app is done with it, so its time runs to that commit (`turn.after`)."""

    def __init__(self, hooks: Hooks) -> None:
        self.hooks = hooks
        self._lock = threading.Lock()
        self.requests: dict[tuple[str, str, str], int] = {}
        self.latency: dict[tuple[str, str], Histogram] = {}

    def process_request(self, req: Any, resp: Any) -> None:
        # A claim served again after its wait is timed from its arrival.
        waiter = self.hooks.resumed(req.env)
        req.context.started = time.perf_counter() if waiter is None else waiter.arrived

    def process_response(self, req: Any, resp: Any, resource: object, succeeded: bool) -> None:
        started = getattr(req.context, "started", None)
        if started is None or getattr(req.context, "parked", False):
            return  # a claim parked to wait is counted once answered
        method = req.method if req.method in METHODS else OTHER_METHOD
        route, status = req.uri_template or UNMATCHED, str(resp.status_code)
        joined().after(lambda: self.observe(route, method, status, time.perf_counter() - started))

    def observe(self, route: str, method: str, status: str, seconds: float) -> None:
        with self._lock:
            key = (route, method, status)
            self.requests[key] = self.requests.get(key, 0) + 1
            histogram = self.latency.get((route, method))
            if histogram is None:
                histogram = self.latency[(route, method)] = Histogram(SECONDS)
        histogram.observe(seconds)

    def families(self) -> list[Family]:
        requests = Family(
            "stateous_http_requests_total",
            "counter",
            "HTTP requests answered, by route template, method and status.",
        )
        latency = Family(
            "stateous_http_request_duration_seconds",
            "histogram",
            "Time from a request's arrival to its answer, by route template and method.",
        )
        with self._lock:
            counted, timed = sorted(self.requests.items()), sorted(self.latency.items())
        for (route, method, status), n in counted:
            requests.add(n, route=route, method=method, status=status)
        for (route, method), histogram in timed:
            latency.add_reading(histogram.read(), route=route, method=method)
        return [requests, latency]


class Deliveries:
    """The GitHub deliveries that their webhook ignored (a kind it does not take), by
    webhook and kind: only signed deliveries are counted, and a kind is a short word, so the
    series stay few."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.ignored: dict[tuple[str, str], int] = {}

    def ignore(self, webhook: str, kind: str) -> None:
        with self._lock:
            self.ignored[(webhook, kind)] = self.ignored.get((webhook, kind), 0) + 1

    def families(self) -> list[Family]:
        ignored = Family(
            "stateous_webhook_deliveries_ignored_total",
            "counter",
            "GitHub deliveries of a kind that their webhook does not take, by webhook and kind.",
        )
        with self._lock:
            counted = sorted(self.ignored.items())
        for (webhook, kind), n in counted:
            ignored.add(n, webhook=webhook, kind=kind)
        return [ignored]


def gauge_families(shot: stats.Snapshot, states: list[str]) -> list[Family]:
    """The gauges read from the database; every state of `states` has its task counts,
    zero or not, so that a query finds the series before the first task."""
    tokens = Family("stateous_tokens", "gauge", "Tokens that can still move, by state and status.")
    for state, status, n in shot.tokens:
        tokens.add(n, state=state, status=status)
    tasks = Family(
        "stateous_tasks", "gauge", "Tasks queued, claimed or waiting, by state and status."
    )
    counted = {(state, status): n for state, status, n in shot.tasks}
    for state in sorted({*states, *(state for state, _ in counted)}):
        for status in LIVE_TASK:
            tasks.add(counted.get((state, status), 0), state=state, status=status)
    oldest = Family(
        "stateous_oldest_queued_task_age_seconds",
        "gauge",
        "Age of each state's oldest queued task (states with a queued task only).",
    )
    for state, age in sorted(shot.ages().items()):
        oldest.add(age, state=state)
    timers = Family("stateous_timers_pending", "gauge", "Timers and timeouts not yet fired.")
    timers.add(shot.timers_pending)
    return [tokens, tasks, oldest, timers]


def counter_families(shot: stats.Snapshot) -> list[Family]:
    """The counters read from the database."""
    ended = Family(
        "stateous_tokens_ended_total", "counter", "Tokens that ended for good, by status."
    )
    for status in ENDING:
        ended.add(shot.total(Counter.TOKENS_ENDED, status), status=status)
    found = [ended]
    for name, text, counter in PLAIN:
        family = Family(name, "counter", text)
        family.add(shot.total(counter))
        found.append(family)
    refused = Family(
        "stateous_events_refused_total",
        "counter",
        "Events that the ledger records as refused, by the code of the refusal.",
    )
    by_code: dict[str, int] = dict.fromkeys(REFUSALS, 0)
    by_code.update(shot.labels(Counter.EVENTS_REFUSED))
    for code, n in sorted(by_code.items()):
        refused.add(n, code=code)
    reports = Family("stateous_reports_total", "counter", "Reports of tasks taken, by outcome.")
    for outcome in OUTCOMES:
        reports.add(shot.total(Counter.REPORTS, outcome), outcome=outcome)
    parkings = Family(
        "stateous_resource_parkings_total",
        "counter",
        "Keys parked by a quota report or a breaker, by resource and cause.",
    )
    for label, n in sorted(shot.labels(Counter.PARKINGS).items()):
        resource, _, cause = label.partition(" ")
        parkings.add(n, resource=resource, cause=cause)
    return [*found, refused, reports, parkings]


def writer_families(engine: Engine) -> list[Family]:
    """The families of the store's writer."""
    writer = engine.store.writer
    commits = Family(
        "stateous_writer_commit_seconds",
        "histogram",
        "Time of each commit of the store's writer (SQLite: a batch; Postgres: a transaction).",
    )
    commits.add_reading(writer.commit_seconds.read())
    batches = Family(
        "stateous_writer_batch_size",
        "histogram",
        "Operations that each commit of the store's writer took together.",
    )
    batches.add_reading(writer.batch_size.read())
    return [commits, batches]


#: The most supervisors that `stateous_supervisor_last_seen_seconds` names (the first by
#: name): heartbeats under made-up names must not make a scrape grow without bound.
SEEN_SERIES = 1000


def fleet_families(engine: Engine) -> list[Family]:
    """When each supervisor seen in the last day was last heard from, and the build: the
    supervisors are those of the last day, at most `SEEN_SERIES`, so series do not pile up."""

    last_seen = Family(
        "stateous_supervisor_last_seen_seconds",
        "gauge",
        "Unix time of each supervisor's last claim or heartbeat (supervisors of the last day).",
    )
    for supervisor, moment in stats.last_seen(engine, SEEN_SERIES):
        last_seen.add(moment, supervisor=supervisor)
    build = Family("stateous_build_info", "gauge", "The version, Python and database; always 1.")
    database = engine.store.database
    build.add(1, version=__version__, python=platform.python_version(), database=database)
    return [last_seen, build]


def exposition(engine: Engine, http: HttpMetrics, deliveries: Deliveries) -> str:
    """The text of `GET /metrics`."""
    shot = stats.read(engine)
    return render(
        [
            *gauge_families(shot, stats.task_states(engine.graph)),
            *counter_families(shot),
            *http.families(),
            *deliveries.families(),
            *writer_families(engine),
            *fleet_families(engine),
        ]
    )
