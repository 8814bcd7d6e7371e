"""A supervisor's folder whose `contract.py` holds pydantic models, as the other
implementation writes it, run by a real `stateous supervise` and by `serve --supervise`.

The routines hand the supervisor pydantic models everywhere a user value goes: an
event's payload, a context change, a memory value and a timer's payload. Each token
must reach its end, with the models sent as the JSON the control plane checks.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tests.control.serving import Launcher, Served
from tests.supervisor.fake_plane import FakePlane, grant, json
from tests.supervisor.support import Supervisors, Verdict, wait_until, write_folder, write_graph

pytest.importorskip("pydantic")


class Order(msgspec.Struct, forbid_unknown_fields=True):
    """The context of an order: a title, and the verdict of a first look."""

    title: str
    look: Verdict | None = None


#: contract.py for `orders` with the context `Order`, in the form the other
#: implementation's `stateous init supervisor` gives it: pydantic models.
PYDANTIC_CONTRACT = """\
# GENERATED from the `orders` workflow - do not edit.
from __future__ import annotations

from pydantic import BaseModel

from stateous import Context, Occurrence, StateRef

__workflow__ = "orders"
__checksum__ = "{checksum}"


class Verdict(BaseModel):
    approved: bool
    note: str = ""


class Order(BaseModel):
    title: str
    look: Verdict | None = None


ItemContext = Context[Order]


class events:
    class submitted(Occurrence[None]):
        name = "submitted"

    class reviewed(Occurrence[Verdict]):
        name = "reviewed"


class states:
    draft = StateRef("draft", emits=(events.submitted,))
    review = StateRef("review", emits=(events.reviewed,))
"""

#: The first attempt of draft keeps a model in memory and fails; the second reads it
#: back, sets a model in the context and submits. Review approves with a model, at once
#: or, for the title "by the timer", through a timer whose payload is a model.
MODELS_EVERYWHERE = """
@on_state(states.draft)
def draft(ctx: ItemContext) -> events.submitted:
    if ctx.attempt == 1:
        ctx.memory["look"] = Verdict(approved=True, note="kept")
        raise RuntimeError("one more time")
    ctx.note(f"memory: {ctx.memory['look']}")
    ctx["look"] = Verdict(approved=True, note="a first look")
    return events.submitted


@on_state(states.review)
def review(ctx: ItemContext) -> events.reviewed | None:
    if ctx["title"] == "by the timer":
        ctx.schedule(events.reviewed(Verdict(approved=True, note="on time")), after="1s")
        return None
    return events.reviewed(Verdict(approved=True, note="at once"))
"""


def pydantic_folder(folder: Path, url: str, graph: Path, checksum: str) -> Path:
    """A folder made by `stateous init supervisor`, its contract.py replaced by pydantic's."""
    write_folder(folder, url, graph, MODELS_EVERYWHERE)
    (folder / "contract.py").write_text(PYDANTIC_CONTRACT.format(checksum=checksum))
    return folder


def supervised_apart(
    launcher: Launcher, supervisors: Supervisors, graph: Path, folder: Callable[[str], Path]
) -> Served:
    served = launcher.serve(graph, graph.with_suffix(".sqlite"))
    supervisors.serving(folder(served.url))
    return served


def supervised_beside(
    launcher: Launcher, supervisors: Supervisors, graph: Path, folder: Callable[[str], Path]
) -> Served:
    return launcher.serve(
        graph, graph.with_suffix(".sqlite"), "--supervise", str(folder("http://127.0.0.1:1"))
    )


def kinds_and_data(history: list[dict[str, Any]], *kinds: str) -> list[tuple[str, Any]]:
    return [(entry["kind"], entry["data"]) for entry in history if entry["kind"] in kinds]


@pytest.mark.parametrize(
    "supervised", [supervised_apart, supervised_beside], ids=["supervise", "serve-supervise"]
)
def test_a_contract_of_pydantic_models_runs_its_tokens_to_the_end(
    launcher: Launcher,
    supervisors: Supervisors,
    tmp_path: Path,
    supervised: Callable[..., Served],
) -> None:
    graph = tmp_path / "orders.json"
    checksum = write_graph(graph, context=Order)
    served = supervised(
        launcher,
        supervisors,
        graph,
        lambda url: pydantic_folder(tmp_path / "box-1", url, graph, checksum),
    )

    for token, title in (("ORDER-1", "at once"), ("ORDER-2", "by the timer")):
        status, body = served.request(
            "POST", "/tokens", {"token": token, "context": {"title": title}}
        )
        assert status == 201, body
    for token in ("ORDER-1", "ORDER-2"):
        wait_until(
            lambda token=token: served.ok("GET", f"/tokens/{token}")["status"] != "active",
            f"{token} ended",
            timeout=20,
        )

    for token, title, note in (
        ("ORDER-1", "at once", "at once"),
        ("ORDER-2", "by the timer", "on time"),
    ):
        shown = served.ok("GET", f"/tokens/{token}")
        assert (shown["status"], shown["context"]) == (
            "completed",
            {"title": title, "look": {"approved": True, "note": "a first look"}},
        )
        history = served.history(token)
        (failed,) = kinds_and_data(history, "task_failed")
        assert failed[1]["error"].startswith("RuntimeError: one more time")
        assert [data["text"] for _, data in kinds_and_data(history, "note")] == [
            "memory: {'approved': True, 'note': 'kept'}"
        ]
        reviewed = [data for _, data in kinds_and_data(history, "event_accepted")][-1]
        assert (reviewed["event"], reviewed["payload"]) == (
            "reviewed",
            {"approved": True, "note": note},
        )
    assert "timer_fired" in served.kinds("ORDER-2")


def test_a_grant_whose_context_breaks_a_pydantic_model_fails_naming_the_field(
    supervisors: Supervisors, tmp_path: Path
) -> None:
    graph = tmp_path / "orders.json"
    checksum = write_graph(graph, context=Order)
    plane = FakePlane(graph, claims=[json(grant(2, "ORDER-2", context={"title": 5}))])
    try:
        folder = pydantic_folder(tmp_path / "box-1", plane.url, graph, checksum)
        supervisor = supervisors.serving(folder)
        wait_until(lambda: plane.reported(2), "the report of task 2")

        error = (
            "the context does not fit the model Order: "
            "Input should be a valid string - at `$.title`"
        )
        assert plane.reported(2) == [
            {"kind": "failed", "error": error, "attempt": 1, "supervisor": "box-1"}
        ]
        assert supervisor.stop() == 0
    finally:
        plane.close()
