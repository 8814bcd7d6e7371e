"""`stop_on_repeat` over real HTTP, on both databases: the same failure on the same context
ends a task's retries early with a `retries_stopped` row, a changed context starts the
count again, every failed attempt's row carries its fingerprint, `/metrics` counts the
stops; and the option's checks in `flow.py` and in a served graph file."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

from stateous import END, START, Workflow
from stateous.compiler.compile import compile_workflow
from stateous.control.engine import Engine
from stateous.control.graph import Graph, GraphError
from stateous.model.errors import DefinitionError
from stateous.model.fingerprints import fingerprint
from stateous.model.graph_file import dump, structure
from stateous.model.repeats import context_digest
from stateous.model.wire import ReportBody
from tests.control.conftest import Served, serving
from tests.control.support import Backend, counts_drift
from tests.control.test_migrate import versions

SUPERVISOR = "box-1"
#: The place a supervisor writes after the error: the same line each time.
PLACE = "(routines/call.py:7)"


class Job(msgspec.Struct):
    repo: str
    model: str = "small"


def calls(stop_on_repeat: int | None = 3, retries: int = 10) -> Workflow:
    """One state `call`, retried up to `retries` times, that `done` ends."""
    flow = Workflow("calls", context=Job)
    call = flow.state("call", retries=retries, stop_on_repeat=stop_on_repeat)
    flow.transition(START, call)
    flow.transition(call, END, on=flow.event("done"))
    return flow


@pytest.fixture
def served(backend: Backend) -> Iterator[Served]:
    path = backend.folder / "calls.json"
    path.write_bytes(dump(compile_workflow(calls())))
    with serving(Engine(Graph.load(path), backend.store(), lease=120)) as control_plane:
        yield control_plane


def fail_once(served: Served, token: str, error: str, **fields: Any) -> dict[str, Any]:
    """Claim the token's task and report it failed with `error`; answer the token after."""
    ask = {"supervisor": SUPERVISOR, "states": ["call"]}
    status, _, grant = served.request("POST", "/tasks/claim", ask)
    assert status == 200, grant
    assert grant["token"] == token
    body = {"kind": "failed", "error": error, "attempt": grant["attempt"], **fields}
    status, _, answer = served.request(
        "POST", f"/tasks/{grant['task']}/report", {**body, "supervisor": SUPERVISOR}
    )
    assert status == 200, answer
    return answer


def history(served: Served, token: str) -> list[dict[str, Any]]:
    status, _, entries = served.request("GET", f"/tokens/{token}/history")
    assert status == 200, entries
    return entries


def rows(served: Served, token: str, kind: str) -> list[dict[str, Any]]:
    return [entry["data"] for entry in history(served, token) if entry["kind"] == kind]


def start(served: Served, token: str) -> None:
    status, _, body = served.request(
        "POST", "/tokens", {"token": token, "context": {"repo": "acme/api"}}
    )
    assert status == 201, body


def test_the_same_failure_three_times_ends_ten_retries_after_three_attempts(
    served: Served,
) -> None:
    start(served, "CALL-1")
    errors = [f"TimeoutError: read timed out after {seconds} s {PLACE}" for seconds in (30, 31, 47)]
    answers = [fail_once(served, "CALL-1", error) for error in errors]
    assert [answer["status"] for answer in answers] == ["active", "active", "failed"]
    ask = {"supervisor": SUPERVISOR, "states": ["call"]}
    assert served.request("POST", "/tasks/claim", ask)[0] == 204, "a fourth attempt was granted"

    same = fingerprint(errors[0])
    failed = rows(served, "CALL-1", "task_failed")
    assert [row["fingerprint"] for row in failed] == [same, same, same]
    assert [row["error"] for row in failed] == errors
    assert {row["context_digest"] for row in failed} == {
        context_digest({"repo": "acme/api", "model": "small"})
    }
    assert rows(served, "CALL-1", "retries_stopped") == [
        {
            "task": failed[0]["task"],
            "fingerprint": same,
            "shape": f"TimeoutError: read timed out after # s {PLACE}",
            "repeats": 3,
        }
    ]
    shown = [entry for entry in history(served, "CALL-1") if entry["kind"] == "retries_stopped"]
    assert shown[0]["text"] == (
        f"task {failed[0]['task']}: the same failure 3 times with the same input: not tried again"
    )
    kinds = [entry["kind"] for entry in history(served, "CALL-1")][-3:]
    assert kinds == ["task_failed", "retries_stopped", "failed"]

    status, _, text = served.request("GET", "/metrics")
    assert status == 200
    assert b"\nstateous_retries_stopped_total 1\n" in text
    assert counts_drift(served.engine.store) == {}, "the counts drifted from the rows"


def test_a_context_changed_between_attempts_starts_the_count_again(served: Served) -> None:
    start(served, "CALL-1")
    error = f"RuntimeError: the model answered nothing {PLACE}"
    fail_once(served, "CALL-1", error)
    fail_once(served, "CALL-1", error)
    # The routine asks for a bigger model as it fails: the next attempt has another input.
    assert fail_once(served, "CALL-1", error, context={"model": "large"})["status"] == "active"
    assert fail_once(served, "CALL-1", error)["status"] == "active"
    assert rows(served, "CALL-1", "retries_stopped") == []
    assert fail_once(served, "CALL-1", error)["status"] == "failed"
    digests = [row["context_digest"] for row in rows(served, "CALL-1", "task_failed")]
    assert digests[0] == digests[1] != digests[2] == digests[3] == digests[4]
    assert rows(served, "CALL-1", "context_changed") == [{"changes": {"model": "large"}}]
    assert [row["repeats"] for row in rows(served, "CALL-1", "retries_stopped")] == [3]


def test_another_failure_in_between_breaks_the_run(served: Served) -> None:
    start(served, "CALL-1")
    one, other = f"KeyError: 'name' {PLACE}", "KeyError: 'name' (routines/call.py:9)"
    for error in (one, one, other, one, one):
        assert fail_once(served, "CALL-1", error)["status"] == "active"
    assert rows(served, "CALL-1", "retries_stopped") == []
    assert fail_once(served, "CALL-1", one)["status"] == "failed"


def test_a_failure_of_a_state_without_the_option_has_its_fingerprint_and_is_retried(
    backend: Backend,
) -> None:
    path = backend.folder / "calls.json"
    path.write_bytes(dump(compile_workflow(calls(stop_on_repeat=None, retries=1))))
    with serving(Engine(Graph.load(path), backend.store(), lease=120)) as served:
        start(served, "CALL-1")
        assert fail_once(served, "CALL-1", "flaky")["status"] == "active"
        (row,) = rows(served, "CALL-1", "task_failed")
        assert row["fingerprint"] == fingerprint("flaky")
        assert rows(served, "CALL-1", "task_retrying") == [{"task": row["task"], "attempt": 2}]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"stop_on_repeat": 1}, "stop_on_repeat=1 must be a whole number, 2 or more"),
        ({"stop_on_repeat": 2.5}, "stop_on_repeat=2.5 must be a whole number, 2 or more"),
        ({"stop_on_repeat": "3"}, "stop_on_repeat='3' must be a whole number, 2 or more"),
        ({"stop_on_repeat": True}, "stop_on_repeat=True must be a whole number, 2 or more"),
        ({"stop_on_repeat": 3, "retries": 0}, "stop_on_repeat= needs retries= of 1 or more"),
    ],
)
def test_flow_py_refuses_a_stop_on_repeat_that_is_no_count_of_repeats(
    options: dict[str, Any], message: str
) -> None:
    flow = Workflow("calls", context=Job)
    with pytest.raises(DefinitionError, match=f"state 'call': {message}"):
        flow.state("call", **{"retries": 5, **options})


def test_a_served_graph_file_with_a_bad_stop_on_repeat_is_refused_naming_the_field(
    tmp_path: Any,
) -> None:
    document = msgspec.to_builtins(compile_workflow(calls()))
    document["states"]["call"]["stop_on_repeat"] = 1
    path = tmp_path / "calls.json"
    path.write_bytes(msgspec.json.encode(document))
    with pytest.raises(GraphError, match=r"states\.call\.stop_on_repeat: stop_on_repeat=1"):
        Graph.load(path)


def test_stop_on_repeat_is_in_the_graph_file_and_keeps_the_structure() -> None:
    with_it, without = compile_workflow(calls(3)), compile_workflow(calls(None))
    assert with_it.states["call"].stop_on_repeat == 3
    assert b"stop_on_repeat" not in dump(without)
    # Like `retries`, it says when the work runs again, not how a token moves: a token
    # may move between the two graphs (`token migrate`).
    assert structure(with_it) == structure(without)


def test_a_token_migrated_to_a_graph_with_stop_on_repeat_counts_the_failures_it_had(
    backend: Backend,
) -> None:
    error = f"RuntimeError: the index is locked {PLACE}"

    def two_failures(engine: Engine) -> None:
        engine.start("CALL-1", {"repo": "acme/api"})
        for _ in range(2):
            grant = engine.claim(SUPERVISOR, ["call"])
            assert grant is not None
            engine.report(grant.task, ReportBody(kind="failed", error=error, supervisor=SUPERVISOR))

    with versions(backend, [calls(stop_on_repeat=None), calls(3)], two_failures) as served:
        # As with `retries`, the contract is the same: the token may move.
        status, answer = served.post("/tokens/CALL-1/migrate")
        assert status == 200, answer
        assert fail_once(served.api, "CALL-1", error)["status"] == "failed"
        assert [row["repeats"] for row in rows(served.api, "CALL-1", "retries_stopped")] == [3]


def test_a_failed_report_with_a_bad_context_change_is_refused_and_keeps_nothing(
    served: Served,
) -> None:
    start(served, "CALL-1")
    ask = {"supervisor": SUPERVISOR, "states": ["call"]}
    grant = served.request("POST", "/tasks/claim", ask)[2]
    body = {"kind": "failed", "error": "boom", "context": {"model": 5}, "supervisor": SUPERVISOR}
    status, _, answer = served.request("POST", f"/tasks/{grant['task']}/report", body)
    assert (status, answer["code"]) == (422, "invalid_context")
    kinds = [entry["kind"] for entry in history(served, "CALL-1")]
    assert kinds[-1] == "task_claimed"
