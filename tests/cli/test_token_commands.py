"""`stateous token ...` run as real processes against a real `stateous serve` process.

Each test serves a fresh database on a free port and runs the commands with
`python -m stateous`, in the time zone of Kolkata (UTC+05:30), so that a history
shown in the local zone instead of UTC would be seen. The expected lines take each
entry's number and moment from the API's own history; the sentences are written
out in full.
"""

from __future__ import annotations

import re
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import closing
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest

from stateous import END, START, Workflow
from stateous.model.fingerprints import fingerprint
from tests.client.canned import canned_control_plane
from tests.client.silent import silent_control_plane
from tests.conftest import run_stateous
from tests.control.serving import Launcher, Served, timers, write_graph
from tests.control.support import BACKENDS, POSTGRES, fresh_schema

ZONE = "Asia/Kolkata"
#: A history line as the docs give it: `HH:MM:SS  #N  what happened`.
HISTORY_LINE = re.compile(r"^(\d\d:\d\d:\d\d)  #(\d+)  (.+)$")
#: The line of a day, before its first entry.
DAY_LINE = re.compile(r"^-- (\d{4}-\d\d-\d\d), times in UTC --$")


class Ticket(msgspec.Struct):
    """The context of the `sdlc` workflow."""

    repo: str


class Results(msgspec.Struct):
    """The payload of `passed` and `failed`."""

    passed: int
    failed: int


def sdlc() -> Workflow:
    """The workflow of the docs: coding, then testing, back to coding at most twice."""
    flow = Workflow("sdlc", context=Ticket)
    coding = flow.state("coding", timeout="6h", retries=2)
    testing = flow.state("testing", timeout="1h")
    done = flow.event("done")
    stuck = flow.event("stuck")
    passed = flow.event("passed", payload=Results)
    failed = flow.event("failed", payload=Results)
    flow.transition(START, coding)
    flow.transition(coding, testing, on=done)
    flow.transition(coding, END, on=stuck)
    flow.transition(testing, END, on=passed)
    flow.transition(testing, coding, on=failed, when="count('failed') < 3")
    flow.transition(testing, END, on=failed, otherwise=True)
    return flow


def review(name: str) -> Workflow:
    """A child workflow with one state, `review`, that `approved` ends."""
    flow = Workflow(name, context=Ticket)
    state = flow.state("review")
    flow.transition(START, state)
    flow.transition(state, END, on=flow.event("approved"))
    return flow


def plan() -> Workflow:
    """A workflow whose `reviews` state runs two child workflows at the same time."""
    flow = Workflow("plan", context=Ticket)
    coding = flow.state("coding")
    reviews = flow.state(
        "reviews", parallel=[review("security-review"), review("design-review")], inputs=["repo"]
    )
    flow.transition(START, coding)
    flow.transition(coding, reviews, on=flow.event("done"))
    flow.transition(reviews, END, on="joined", when="branches.all(status == 'completed')")
    flow.transition(reviews, coding, on="joined", otherwise=True)
    return flow


class Cli:
    """Runs `stateous token ...` against one served control plane."""

    def __init__(self, served: Served, folder: Path) -> None:
        self.served = served
        self.folder = folder
        self.url = served.url

    def run(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        return run_stateous("token", *args, cwd=self.folder, env={"TZ": ZONE, **(env or {})})

    def lines(self, *args: str) -> list[str]:
        """Run a command that must succeed; return its lines."""
        result = self.run(*args, "--url", self.url)
        assert result.returncode == 0, result.stderr
        assert result.stderr == ""
        return result.stdout.splitlines()

    def line(self, *args: str) -> str:
        [only] = self.lines(*args)
        return only

    def error(self, *args: str, env: dict[str, str] | None = None) -> str:
        """Run a command that must fail with one `error:` line; return that line."""
        result = self.run(*args, env=env)
        assert result.returncode == 1, result.stdout
        assert result.stdout == ""
        assert "Traceback" not in result.stderr
        [only] = result.stderr.splitlines()
        return only

    def refused(self, status: int, sentence: str) -> str:
        return f"error: the control plane at {self.url} refused ({status}): {sentence}"

    def history(self, token: str, *sentences: str) -> list[str]:
        """The lines that `show` must print for the whole history, from the API's entries.

        A sentence may hold `{due}`: the due time, in UTC, of the timer that the entry set.
        """
        entries = self.served.history(token)
        assert len(entries) == len(sentences), [entry["kind"] for entry in entries]
        return [f"-- {utc(entries[0]['at'])[:10]}, times in UTC --", *self.last(token, *sentences)]

    def last(self, token: str, *sentences: str) -> list[str]:
        """The lines that `show` must print for the last entries of the history, all of one day."""
        entries = self.served.history(token)[-len(sentences) :]
        lines = []
        for entry, text in zip(entries, sentences, strict=True):
            due = utc(entry["data"].get("due_at", ""))
            lines.append(f"{utc(entry['at'])[11:]}  #{entry['seq']}  " + text.replace("{due}", due))
            if "fingerprint" in entry["data"]:  # a failure's fingerprint: a line of its own
                lines.append(f"          fingerprint {entry['data']['fingerprint']}")
        return lines

    def claim(self, supervisor: str, state: str) -> dict[str, Any]:
        return self.served.ok("POST", "/tasks/claim", {"supervisor": supervisor, "states": [state]})

    def report(self, task: int, **body: Any) -> None:
        self.served.ok("POST", f"/tasks/{task}/report", body)


def utc(moment: str) -> str:
    """Show an API moment as `show` does, date and time in UTC; an empty moment stays empty."""
    if not moment:
        return ""
    return datetime.fromisoformat(moment).astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def serve(launcher: Launcher, folder: Path, flow: Workflow) -> Cli:
    graph = folder / f"{flow.name}.json"
    write_graph(graph, flow)
    return Cli(launcher.serve(graph, folder / f"{flow.name}.sqlite"), folder)


@pytest.fixture
def cli(launcher: Launcher, tmp_path: Path) -> Cli:
    """The `sdlc` workflow, served on a fresh database."""
    return serve(launcher, tmp_path, sdlc())


@pytest.fixture
def parallel(launcher: Launcher, tmp_path: Path) -> Cli:
    """The `plan` workflow, with a parallel state, served on a fresh database."""
    return serve(launcher, tmp_path, plan())


def closed_port() -> int:
    """A local port that nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# the examples of the docs


def test_pause_fire_resume_cancel_fire_prints_what_the_docs_show(cli: Cli) -> None:
    assert cli.line("start", "TICKET-3", '{"repo": "acme/api"}') == "TICKET-3: coding, active"
    assert cli.line("pause", "TICKET-3") == "TICKET-3: coding, paused"
    assert cli.line("fire", "TICKET-3", "done") == "TICKET-3: coding, paused"
    assert cli.line("resume", "TICKET-3") == "TICKET-3: testing, active"
    assert cli.line("cancel", "TICKET-3") == "TICKET-3: testing, cancelled"
    assert cli.error("fire", "TICKET-3", "done", "--url", cli.url) == cli.refused(
        409, "token 'TICKET-3' is cancelled; it takes no events"
    )
    assert cli.lines("show", "TICKET-3") == [
        "TICKET-3: testing, cancelled",
        "accepts now: no events; the token has ended",
        *cli.history(
            "TICKET-3",
            "started",
            "__started__ in START",
            "entered coding",
            "task 1 queued for coding",
            "timer set: timeout at {due}",
            "paused",
            "done held while paused",
            "resumed",
            "done applied on resume",
            "done in coding",
            "task 1 cancelled",
            "entered testing",
            "task 2 queued for testing",
            "timer set: timeout at {due}",
            "task 2 cancelled",
            "cancelled",
            "done refused: token 'TICKET-3' is cancelled; it takes no events",
        ),
    ]


def test_a_second_delivery_of_a_key_prints_duplicate_and_the_token_as_it_is(cli: Cli) -> None:
    cli.line("start", "TICKET-1", '{"repo": "acme/api"}')
    fire = ("fire", "TICKET-1", "done", "--key", "gh-delivery-1")
    assert cli.line(*fire) == "TICKET-1: testing, active"
    assert cli.line(*fire) == "duplicate: TICKET-1: testing, active"
    passed = cli.line("fire", "TICKET-1", "passed", '{"passed": 1, "failed": 0}')
    assert passed == "TICKET-1: testing, completed"
    assert cli.line(*fire) == "duplicate: TICKET-1: testing, completed"


def test_show_tells_the_story_of_a_token_that_a_supervisor_worked_on(cli: Cli) -> None:
    cli.line("start", "TICKET-1", '{"repo": "acme/api"}')
    cli.line("fire", "TICKET-1", "done")
    task = cli.claim("build-box-1", "testing")["task"]
    cli.report(
        task,
        kind="event",
        event="passed",
        payload={"passed": 1, "failed": 0},
        supervisor="build-box-1",
    )
    assert cli.lines("show", "TICKET-1") == [
        "TICKET-1: testing, completed",
        "accepts now: no events; the token has ended",
        *cli.history(
            "TICKET-1",
            "started",
            "__started__ in START",
            "entered coding",
            "task 1 queued for coding",
            "timer set: timeout at {due}",
            "done in coding",
            "task 1 cancelled",
            "entered testing",
            "task 2 queued for testing",
            "timer set: timeout at {due}",
            "build-box-1 took task 2 (attempt 1)",
            'passed in testing: {"passed": 1, "failed": 0}',
            "task 2 done",
            "completed",
        ),
    ]


# the token line and the history


def test_start_of_an_existing_token_shows_it_and_starts_no_second(cli: Cli) -> None:
    assert cli.line("start", "TICKET-1", '{"repo": "acme/api"}') == "TICKET-1: coding, active"
    cli.line("fire", "TICKET-1", "done")
    again = cli.run("start", "TICKET-1", '{"repo": "other"}', "--url", cli.url)
    assert again.returncode == 0
    assert again.stdout == "TICKET-1: testing, active\n"
    assert again.stderr == "token 'TICKET-1' exists already; nothing was started\n"
    assert cli.served.kinds("TICKET-1").count("started") == 1


def test_the_api_answers_201_for_a_new_token_and_200_for_one_that_exists(cli: Cli) -> None:
    body = {"token": "TICKET-9", "context": {"repo": "acme/api"}}
    assert cli.served.request("POST", "/tokens", body)[0] == 201
    assert cli.served.request("POST", "/tokens", body)[0] == 200


def test_the_token_line_counts_the_visits_from_the_second(cli: Cli) -> None:
    cli.line("start", "TICKET-2", '{"repo": "acme/api"}')
    cli.line("fire", "TICKET-2", "done")
    again = cli.line("fire", "TICKET-2", "failed", '{"passed": 2, "failed": 1}')
    assert again == "TICKET-2: coding (visit 2), active"
    lines = cli.lines("show", "TICKET-2")
    assert lines[0] == "TICKET-2: coding (visit 2), active"
    assert lines[-5:] == cli.last(
        "TICKET-2",
        'failed in testing: {"passed": 2, "failed": 1}',
        "task 2 cancelled",
        "entered coding (visit 2)",
        "task 3 queued for coding",
        "timer set: timeout at {due}",
    )


def test_show_has_a_sentence_for_each_kind_of_work_on_a_task(cli: Cli) -> None:
    cli.line("start", "TICKET-5", '{"repo": "acme/api"}')
    assert cli.error("fire", "TICKET-5", "nope", "--url", cli.url) == cli.refused(
        409, "workflow 'sdlc' has no event 'nope'"
    )
    task = cli.claim("build-box-1", "coding")["task"]
    cli.served.ok("POST", f"/tasks/{task}/note", {"text": "cloned acme/api"})
    cli.served.ok("PUT", f"/tasks/{task}/memory", {"key": "dev", "value": {"session": "s1"}})
    cli.served.ok("PUT", f"/tasks/{task}/memory", {"key": "dev", "value": None})
    lost = "build-box-1 stopped answering: no heartbeat for 2 minutes"
    cli.report(task, kind="failed", error=lost, attempt=1, supervisor="build-box-1")
    cli.claim("build-box-2", "coding")
    cli.report(
        task,
        kind="waiting",
        context={"repo": "acme/web"},
        schedules=[{"event": "stuck", "after": "1s"}],
        supervisor="build-box-2",
    )
    cli.served.wait_history("TICKET-5", "completed")
    assert cli.lines("show", "TICKET-5") == [
        "TICKET-5: coding, completed",
        "accepts now: no events; the token has ended",
        *cli.history(
            "TICKET-5",
            "started",
            "__started__ in START",
            "entered coding",
            "task 1 queued for coding",
            "timer set: timeout at {due}",
            "nope refused: workflow 'sdlc' has no event 'nope'",
            "build-box-1 took task 1 (attempt 1)",
            "cloned acme/api",
            "memory set: dev (in coding)",
            "memory deleted: dev (in coding)",
            f"task 1 failed: {lost}",
            "task 1 is tried again (attempt 2)",
            "build-box-2 took task 1 (attempt 2)",
            "context changed: repo",
            "timer set: stuck at {due}",
            "task 1 waits: the work goes on outside",
            "timer fired: stuck",
            "stuck in coding",
            "task 1 done",
            "completed",
        ),
    ]
    assert f"          fingerprint {fingerprint(lost)}" in cli.lines("show", "TICKET-5")


def test_show_tells_dropped_events_and_a_failed_token(cli: Cli) -> None:
    cli.line("start", "TICKET-6", '{"repo": "acme/api"}')
    cli.line("pause", "TICKET-6")
    cli.line("fire", "TICKET-6", "done")
    cli.line("fire", "TICKET-6", "done")
    assert cli.line("resume", "TICKET-6") == "TICKET-6: testing, active"
    task = cli.claim("build-box-1", "testing")["task"]
    cli.report(task, kind="failed", error="the tests did not run", supervisor="build-box-1")
    failed = "'testing' failed, and has no transition on 'error': the tests did not run"
    lines = cli.lines("show", "TICKET-6")
    assert lines[0] == "TICKET-6: testing, failed"
    assert lines[-11:] == cli.last(
        "TICKET-6",
        "done applied on resume",
        "done in coding",
        "task 1 cancelled",
        "entered testing",
        "task 2 queued for testing",
        "timer set: timeout at {due}",
        "done dropped on resume: 'testing' has no transition on 'done'",
        "build-box-1 took task 2 (attempt 1)",
        "task 2 failed: the tests did not run",
        f"failed: {failed}",
    )


def test_cancel_of_a_paused_token_drops_its_held_events(cli: Cli) -> None:
    cli.line("start", "TICKET-7", '{"repo": "acme/api"}')
    cli.line("pause", "TICKET-7")
    cli.line("fire", "TICKET-7", "done")
    assert cli.line("cancel", "TICKET-7") == "TICKET-7: coding, cancelled"
    assert cli.lines("show", "TICKET-7")[-5:] == cli.last(
        "TICKET-7",
        "paused",
        "done held while paused",
        "done dropped: the token was cancelled",
        "task 1 cancelled",
        "cancelled",
    )


def test_show_of_a_token_that_waits_for_days_shows_dates_in_utc(
    launcher: Launcher, tmp_path: Path
) -> None:
    waits = serve(launcher, tmp_path, timers("3d"))
    waits.line("start", "JOB-1", '{"kind": "wait"}')
    lines = waits.lines("show", "JOB-1")
    assert lines == [
        "JOB-1: waiting, active",
        "accepts now: no events from outside; waiting moves on timeout",
        *waits.history(
            "JOB-1",
            "started",
            "__started__ in START",
            "entered waiting",
            "task 1 queued for waiting",
            "timer set: timeout at {due}",
        ),
    ]
    day = DAY_LINE.match(lines[2])
    assert day is not None, lines[2]
    due = date.fromisoformat(day[1]) + timedelta(days=3)
    assert f"timer set: timeout at {due.isoformat()} " in lines[-1]


def back_one_day(database: str, token: str, seqs: tuple[int, ...]) -> None:
    """Move the ledger entries `seqs` of `token` one day back, straight in the database
    (a SQLite file's path or a postgresql:// URL), as if the token had waited since."""
    moved = "at = {} WHERE token = {} AND seq = {}"
    if database.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(database, autocommit=True) as connection:
            for seq in seqs:
                at = connection.execute(
                    "SELECT at FROM ledger WHERE token = %s AND seq = %s", (token, seq)
                ).fetchone()[0]
                update = "UPDATE ledger SET " + moved.format("%s", "%s", "%s")
                connection.execute(update, (day_before(at), token, seq))
        return
    import sqlite3

    with closing(sqlite3.connect(database)) as connection, connection:
        for seq in seqs:
            [(at,)] = connection.execute(
                "SELECT at FROM ledger WHERE token = ? AND seq = ?", (token, seq)
            ).fetchall()
            update = "UPDATE ledger SET " + moved.format("?", "?", "?")
            connection.execute(update, (day_before(at), token, seq))


def day_before(at: str) -> str:
    """The ledger's moment (`YYYY-MM-DD HH:MM:SS.ffffff`, UTC) one day earlier."""
    return (datetime.fromisoformat(at) - timedelta(days=1)).isoformat(sep=" ")


@pytest.fixture(params=BACKENDS)
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A SQLite file's path, or a fresh Postgres schema's URL."""
    if request.param == "sqlite":
        yield str(tmp_path / "days.sqlite")
        return
    assert POSTGRES is not None
    with fresh_schema(POSTGRES) as url:
        yield url


def test_a_history_over_two_days_keeps_the_documented_line_and_dates_each_day(
    launcher: Launcher, tmp_path: Path, database: str
) -> None:
    graph = tmp_path / "timers.json"
    write_graph(graph, timers("3d"))
    where = ["--db", database if "://" in database else f"sqlite:///{database}"]
    waits = Cli(launcher.serve(graph, None, *where), tmp_path)
    waits.line("start", "JOB-1", '{"kind": "wait"}')
    back_one_day(database, "JOB-1", (1, 2))
    entries = waits.served.history("JOB-1")
    days: list[tuple[str, int]] = []
    history: list[tuple[str, int, str]] = []
    for line in waits.lines("show", "JOB-1")[2:]:
        day, entry = DAY_LINE.match(line), HISTORY_LINE.match(line)
        if day:
            days.append((day[1], len(history)))
        else:
            assert entry, line
            history.append((f"{days[-1][0]} {entry[1]}", int(entry[2]), entry[3]))
    assert days == [(utc(entries[0]["at"])[:10], 0), (utc(entries[2]["at"])[:10], 2)]
    assert days[0][0] < days[1][0]
    assert [line[:2] for line in history] == [(utc(entry["at"]), entry["seq"]) for entry in entries]
    assert [line[2] for line in history][:4] == [
        "started",
        "__started__ in START",
        "entered waiting",
        "task 1 queued for waiting",
    ]


def test_show_says_which_events_the_token_accepts_now(cli: Cli) -> None:
    cli.line("start", "TICKET-1", '{"repo": "acme/api"}')
    assert cli.lines("show", "TICKET-1")[1] == "accepts now: done, stuck"
    cli.line("fire", "TICKET-1", "done")
    assert cli.lines("show", "TICKET-1")[1] == "accepts now: passed, failed"
    cli.line("pause", "TICKET-1")
    assert cli.lines("show", "TICKET-1")[1] == (
        "accepts now: passed, failed (held until the token is resumed)"
    )
    cli.line("cancel", "TICKET-1")
    assert cli.lines("show", "TICKET-1")[1] == "accepts now: no events; the token has ended"


def test_show_without_an_id_lists_the_most_recently_moved_first(cli: Cli) -> None:
    assert cli.lines("show") == []
    for token in ("TICKET-1", "TICKET-2", "TICKET-3"):
        cli.line("start", token, '{"repo": "acme/api"}')
    cli.line("fire", "TICKET-1", "done")
    assert cli.lines("show") == [
        "TICKET-1: testing, active",
        "TICKET-3: coding, active",
        "TICKET-2: coding, active",
    ]


def test_show_lists_at_most_100_tokens(cli: Cli) -> None:
    for number in range(101):
        cli.served.ok("POST", "/tokens", {"token": f"T-{number}", "context": {"repo": "r"}})
    listed = cli.lines("show")
    assert len(listed) == 100
    assert "T-0: coding, active" not in listed


def test_show_of_a_parent_shows_its_children_and_their_start(parallel: Cli) -> None:
    parallel.line("start", "PLAN-1", '{"repo": "acme/api"}')
    assert parallel.line("fire", "PLAN-1", "done") == "PLAN-1: reviews, active"
    security, design = "PLAN-1.reviews.1.security-review", "PLAN-1.reviews.1.design-review"
    assert parallel.lines("show", "PLAN-1") == [
        "PLAN-1: reviews, active",
        f"  {design}: review, active",
        f"  {security}: review, active",
        "accepts now: no events from outside; reviews moves on joined",
        *parallel.history(
            "PLAN-1",
            "started",
            "__started__ in START",
            "entered coding",
            "task 1 queued for coding",
            "done in coding",
            "task 1 cancelled",
            "entered reviews",
            f"branch security-review started: {security}",
            f"branch design-review started: {design}",
        ),
    ]
    assert parallel.lines("show", security) == [
        f"{security}: review, active",
        "accepts now: approved",
        *parallel.history(
            security,
            "started as a branch of PLAN-1",
            "__started__ in START",
            "entered review",
            "task 2 queued for review",
        ),
    ]
    assert parallel.error("pause", security, "--url", parallel.url) == parallel.refused(
        409, f"token '{security}' is a child of 'PLAN-1'; pause its top token instead"
    )


# the graph


def test_show_graph_draws_the_workflow_with_guards_on_its_edges(cli: Cli) -> None:
    assert cli.lines("show", "--graph") == [
        "stateDiagram-v2",
        "    direction LR",
        "    [*] --> coding",
        "    coding --> testing: done",
        "    coding --> [*]: stuck",
        "    testing --> [*]: passed",
        "    testing --> coding: failed [count('failed') < 3]",
        "    testing --> [*]: failed [otherwise]",
    ]


def test_show_graph_draws_child_workflows_inside_their_parallel_state(parallel: Cli) -> None:
    assert parallel.lines("show", "--graph") == [
        "stateDiagram-v2",
        "    direction LR",
        "    state reviews {",
        '        state "security-review" as security_review {',
        "            [*] --> review",
        "            review --> [*]: approved",
        "        }",
        "        --",
        '        state "design-review" as design_review {',
        '            state "review" as design_review_review',
        "            [*] --> design_review_review",
        "            design_review_review --> [*]: approved",
        "        }",
        "    }",
        "    [*] --> coding",
        "    coding --> reviews: done",
        "    reviews --> [*]: joined [branches.all(status == 'completed')]",
        "    reviews --> coding: joined [otherwise]",
    ]


@pytest.mark.parametrize(
    ("workflow", "reason"),
    [
        ({"workflow": "sdlc", "states": {}}, "it has no 'transitions'"),
        ({"workflow": "sdlc", "transitions": [{"to": "coding"}]}, "it has no 'from'"),
        ([1, 2], "it is not a graph file"),
        ({"workflow": "sdlc", "transitions": 7}, "it is not a graph file"),
    ],
)
def test_show_of_a_token_whose_served_workflow_is_no_graph_file_says_so_in_one_line(
    tmp_path: Path, workflow: Any, reason: str
) -> None:
    token = {"token": "T-1", "state": "coding", "status": "active", "visit": 1, "parent": None}
    answers = {
        "/tokens/T-1": token,
        "/tokens?parent=T-1&limit=1000": [],
        "/workflow": workflow,
        "/tokens/T-1/history": [],
    }
    with canned_control_plane(answers) as url:
        result = run_stateous("token", "show", "T-1", "--url", url, cwd=tmp_path)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == f"error: the control plane's workflow cannot be read: {reason}\n"


@pytest.mark.parametrize(
    ("workflow", "reason"),
    [
        ([1, 2], "it is not a Stateous graph file (no 'stateous' key)"),
        ({"stateous": 99}, "its format is 99; this version of Stateous reads format 1"),
        (
            {"stateous": 1, "workflow": 5},
            "it is not a valid graph file: Expected `str`, got `int` - at `$.workflow`",
        ),
    ],
)
def test_show_graph_of_a_served_workflow_that_is_no_graph_file_says_so_in_one_line(
    tmp_path: Path, workflow: Any, reason: str
) -> None:
    with canned_control_plane({"/workflow": workflow}) as url:
        result = run_stateous("token", "show", "--graph", "--url", url, cwd=tmp_path)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == f"error: the control plane's workflow cannot be read: {reason}\n"


def test_show_graph_takes_no_token_id(cli: Cli) -> None:
    assert cli.error("show", "TICKET-1", "--graph", "--url", cli.url) == (
        "error: --graph draws the workflow; give it no token ID"
    )


# errors and the URL


def test_a_refusal_names_the_control_plane_its_status_and_its_sentence(cli: Cli) -> None:
    assert cli.error("show", "NOPE", "--url", cli.url) == cli.refused(
        404, "no token has the id 'NOPE'"
    )
    assert cli.error("resume", "NOPE", "--url", cli.url) == cli.refused(
        404, "no token has the id 'NOPE'"
    )
    cli.line("start", "TICKET-1", '{"repo": "acme/api"}')
    assert cli.error("resume", "TICKET-1", "--url", cli.url) == cli.refused(
        409, "token 'TICKET-1' is active; it cannot be resumed"
    )
    bad_payload = cli.error("fire", "TICKET-1", "done", '{"x": 1}', "--url", cli.url)
    assert bad_payload == cli.refused(422, "'done' has no payload")
    bad_id = cli.error("start", "no spaces", "--url", cli.url)
    assert bad_id.startswith(cli.refused(422, "'no spaces' is not a token id"))


def test_arguments_that_are_not_json_objects_are_named(cli: Cli) -> None:
    not_json = cli.error("start", "TICKET-1", "{repo}", "--url", cli.url)
    assert not_json.startswith("error: CONTEXT_JSON is not valid JSON: ")
    assert cli.error("fire", "TICKET-1", "done", "[1, 2]", "--url", cli.url) == (
        """error: PAYLOAD_JSON must be a JSON object, like '{"key": 1}'"""
    )
    assert cli.served.ok("GET", "/tokens") == []


def test_json_whose_text_is_no_unicode_is_refused_by_the_control_plane_in_one_line(
    cli: Cli,
) -> None:
    # `\ud800` is valid JSON syntax, but half of a UTF-16 pair: no character of its own.
    lone = '{"repo": "\\ud800"}'
    refused = cli.error("start", "TICKET-1", lone, "--url", cli.url)
    assert refused.startswith(cli.refused(400, "the body is not valid JSON: "))
    assert cli.served.ok("GET", "/tokens") == []


def test_a_control_plane_that_cannot_be_reached_is_one_line(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    result = run_stateous("token", "show", "TICKET-1", "--url", url, cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == f"error: cannot reach the control plane at {url} (Connection refused)\n"


def test_a_control_plane_that_never_answers_stops_the_command_after_its_timeout(
    tmp_path: Path,
) -> None:
    with silent_control_plane() as url:
        began = time.monotonic()
        result = run_stateous(
            "token", "show", "TICKET-1", "--url", url, "--timeout", "0.5", cwd=tmp_path
        )
        waited = time.monotonic() - began
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == f"error: the control plane at {url} did not answer within 0.5 seconds\n"
    assert waited < 10


def test_a_url_that_is_not_http_is_refused(tmp_path: Path) -> None:
    result = run_stateous("token", "pause", "TICKET-1", "--url", "ftp://cp", cwd=tmp_path)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == "error: 'ftp://cp' is not an http:// or https:// URL\n"


def test_the_url_comes_from_stateous_url_else_the_default(cli: Cli) -> None:
    result = cli.run("start", "TICKET-1", '{"repo": "acme/api"}', env={"STATEOUS_URL": cli.url})
    assert (result.returncode, result.stdout) == (0, "TICKET-1: coding, active\n")
    default = cli.run("show", "TICKET-1", env={"STATEOUS_URL": ""})
    assert default.returncode == 1
    assert default.stderr.startswith("error: ")
    assert "http://127.0.0.1:8080" in default.stderr


def test_stateous_url_may_name_several_control_planes_and_the_one_that_serves_answers(
    cli: Cli,
) -> None:
    dead = f"http://127.0.0.1:{closed_port()}"
    cli.line("start", "TICKET-1", '{"repo": "acme/api"}')
    shown = cli.run("show", "TICKET-1", env={"STATEOUS_URL": f"{dead},{cli.url}"})
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("TICKET-1: coding, active\n")
    listed = cli.run("show", "--url", f"{dead},{cli.url}")
    assert (listed.returncode, listed.stdout) == (0, "TICKET-1: coding, active\n")
    assert cli.error("show", "NOPE", "--url", f"{dead},{cli.url}") == cli.refused(
        404, "no token has the id 'NOPE'"
    )


def test_every_ledger_kind_reads_as_a_sentence_of_its_own() -> None:
    from stateous.model.sentences import SENTENCES
    from stateous.model.vocabulary import Kind

    assert set(SENTENCES) == set(Kind)
