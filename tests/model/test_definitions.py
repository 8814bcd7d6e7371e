"""Misuse of the workflow model is refused at once, with a sentence that names it."""

import msgspec
import pytest

from stateous import END, START, DefinitionError, Workflow
from stateous.model.durations import parse_duration


class Ticket(msgspec.Struct):
    repo: str


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30), ("10m", 600), ("6h", 21600), ("2d", 172800), ("3650d", 3650 * 86400)],
)
def test_a_duration_is_a_whole_number_and_one_unit(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["2 hours", "1.5h", "10", "h", "-1s", "0s", "1w", "", 30, None])
def test_anything_else_is_not_a_duration(text: object) -> None:
    with pytest.raises(ValueError, match="is not a duration"):
        parse_duration(text)


def test_the_longest_duration_is_3650_days() -> None:
    with pytest.raises(ValueError, match="the longest duration is '3650d'"):
        parse_duration("3651d")


def test_a_bad_duration_names_the_state() -> None:
    flow = Workflow("orders")
    with pytest.raises(DefinitionError) as caught:
        flow.state("review", timeout="2 hours")
    assert str(caught.value) == (
        "state 'review': '2 hours' is not a duration; write e.g. '30s', '10m', '2h', '1d'"
    )


@pytest.mark.parametrize("name", ["Review", "1st", "re view", "", "a" * 65, "_x", "ünï"])
def test_a_bad_state_name_is_refused(name: str) -> None:
    with pytest.raises(DefinitionError, match="state:"):
        Workflow("orders").state(name)


def test_a_name_of_64_characters_is_accepted() -> None:
    assert Workflow("orders").state("a" * 64).name == "a" * 64


def test_a_bad_workflow_name_is_refused() -> None:
    with pytest.raises(DefinitionError, match="workflow: 'Orders' is not a valid name"):
        Workflow("Orders")


def test_a_state_declared_twice_is_refused() -> None:
    flow = Workflow("orders")
    flow.state("draft")
    with pytest.raises(DefinitionError, match="state 'draft' is declared twice"):
        flow.state("draft")


def test_an_event_declared_twice_is_refused() -> None:
    flow = Workflow("orders")
    flow.event("done")
    with pytest.raises(DefinitionError, match="event 'done' is declared twice"):
        flow.event("done")


@pytest.mark.parametrize("name", ["timeout", "error", "joined"])
def test_the_events_of_stateous_cannot_be_declared(name: str) -> None:
    with pytest.raises(DefinitionError, match=f"use it by name, as on='{name}'"):
        Workflow("orders").event(name)


def test_an_unknown_keyword_is_named() -> None:
    with pytest.raises(DefinitionError) as caught:
        Workflow("orders").state("draft", timout="1h")
    assert "unknown keyword 'timout'" in str(caught.value)
    assert "timeout, retries" in str(caught.value)


def test_an_unknown_keyword_of_a_transition_is_named() -> None:
    flow = Workflow("orders")
    draft = flow.state("draft")
    with pytest.raises(DefinitionError, match="unknown keyword 'guard'"):
        flow.transition(START, draft, guard="true")


@pytest.mark.parametrize("retries", [-1, 1.5, "2", True])
def test_retries_is_a_whole_number(retries: object) -> None:
    with pytest.raises(DefinitionError, match="must be a whole number"):
        Workflow("orders").state("draft", retries=retries)


def test_a_context_must_be_a_model() -> None:
    with pytest.raises(DefinitionError, match=r"is not a model; give a msgspec\.Struct class"):
        Workflow("orders", context=dict)


def test_a_payload_must_be_a_model() -> None:
    with pytest.raises(DefinitionError, match="event 'done': payload"):
        Workflow("orders").event("done", payload=int)


def test_a_pydantic_model_is_a_model() -> None:
    pydantic = pytest.importorskip("pydantic")

    class Item(pydantic.BaseModel):
        title: str

    assert Workflow("orders", context=Item).context is Item


def test_a_transition_from_start_has_no_event() -> None:
    flow = Workflow("orders")
    draft = flow.state("draft")
    done = flow.event("done")
    with pytest.raises(DefinitionError, match="a transition from START has no on="):
        flow.transition(START, draft, on=done)


def test_other_transitions_need_an_event() -> None:
    flow = Workflow("orders")
    draft = flow.state("draft")
    with pytest.raises(DefinitionError, match="say which event takes it, with on="):
        flow.transition(draft, END)


def test_nothing_leaves_end_and_nothing_enters_start() -> None:
    flow = Workflow("orders")
    draft = flow.state("draft")
    with pytest.raises(DefinitionError, match="nothing leaves END"):
        flow.transition(END, draft, on="done")
    with pytest.raises(DefinitionError, match="nothing goes into START"):
        flow.transition(draft, START, on="done")


def test_a_guard_and_a_fallback_do_not_go_together() -> None:
    flow = Workflow("orders")
    draft = flow.state("draft")
    with pytest.raises(DefinitionError, match="not both"):
        flow.transition(draft, END, on="done", when="true", otherwise=True)


def test_a_state_of_another_workflow_is_refused() -> None:
    other = Workflow("other")
    foreign = other.state("x")
    flow = Workflow("orders")
    with pytest.raises(DefinitionError, match="state 'x' belongs to workflow 'other'"):
        flow.transition(START, foreign)


def test_an_event_of_another_workflow_is_refused() -> None:
    other = Workflow("other")
    done = other.event("done")
    flow = Workflow("orders")
    draft = flow.state("draft")
    with pytest.raises(DefinitionError, match="event 'done' belongs to workflow 'other'"):
        flow.transition(draft, END, on=done)


def test_a_parallel_state_takes_a_list_of_workflows() -> None:
    flow = Workflow("orders")
    with pytest.raises(DefinitionError, match="non-empty list of workflows"):
        flow.state("reviews", parallel=[])
    with pytest.raises(DefinitionError, match="is not a Workflow"):
        flow.state("reviews", parallel=["security"])
    with pytest.raises(DefinitionError, match="cannot run itself"):
        flow.state("reviews", parallel=[flow])


def test_a_parallel_state_has_no_retries_and_a_known_join() -> None:
    flow = Workflow("orders")
    child = Workflow("child")
    with pytest.raises(DefinitionError, match="cannot have retries="):
        flow.state("reviews", parallel=[child], retries=1)
    with pytest.raises(DefinitionError, match="join='some' must be 'all' or 'any'"):
        flow.state("reviews", parallel=[child], join="some")


def test_join_and_inputs_go_with_parallel() -> None:
    with pytest.raises(DefinitionError, match="join= and inputs= go with parallel="):
        Workflow("orders").state("draft", join="any")


def test_a_good_definition_keeps_what_was_declared() -> None:
    flow = Workflow("sdlc", context=Ticket)
    coding = flow.state("coding", timeout="6h", retries=2)
    done = flow.event("done")
    flow.transition(START, coding)
    flow.transition(coding, END, on=done)
    assert list(flow.states) == ["coding"]
    assert list(flow.events) == ["done"]
    assert [(t.source_name, t.target_name, t.event_name) for t in flow.transitions] == [
        ("__start__", "coding", None),
        ("coding", "__end__", "done"),
    ]
