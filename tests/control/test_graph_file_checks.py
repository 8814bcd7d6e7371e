"""A graph file edited by hand is checked whole when it is loaded to be served: each mistake
is refused in one sentence that names the field, before a token can meet it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from stateous.compiler.compile import compile_workflow
from stateous.control.graph import Graph, GraphError
from stateous.model.graph_file import dump
from tests.control.test_parallel import sdlc

Document = dict[str, Any]


def parallel_document() -> Document:
    """The `sdlc` graph: a parallel state `reviews` running two child workflows."""
    return json.loads(dump(compile_workflow(sdlc())))


def set_in(path: list[Any], value: Any) -> Callable[[Document], None]:
    def change(document: Document) -> None:
        node = document
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = value

    return change


def remove(path: list[Any]) -> Callable[[Document], None]:
    def change(document: Document) -> None:
        node = document
        for part in path[:-1]:
            node = node[part]
        del node[path[-1]]

    return change


def rename_state(old: str, new: str) -> Callable[[Document], None]:
    def change(document: Document) -> None:
        document["states"][new] = document["states"].pop(old)

    return change


REVIEWS = ["workflows", "security-review"]
#: Each case: a change to the sdlc graph file, and the start of the sentence that refuses it.
MISTAKES: dict[str, tuple[Callable[[Document], None], str]] = {
    "a timeout of 3 weeks": (
        set_in(["states", "coding", "timeout"], "3 weeks"),
        "states.coding.timeout: '3 weeks' is not a duration",
    ),
    "a timeout that is a number": (
        set_in(["states", "coding", "timeout"], 60),
        "it is not a valid graph file: Expected `str | null`, got `int` - at "
        "`$.states[...].timeout`",
    ),
    "a child's timeout of no length": (
        set_in([*REVIEWS, "states", "triage", "timeout"], "0s"),
        "workflows.security-review.states.triage.timeout: '0s' is not a duration",
    ),
    "a retry_delay_max shorter than the retry_delay": (
        lambda document: document["states"]["coding"].update(
            retries=2, retry_delay="1m", retry_delay_max="10s"
        ),
        "states.coding: retry_delay_max='10s' is shorter than retry_delay='1m'",
    ),
    "negative retries": (
        set_in(["states", "coding", "retries"], -1),
        "states.coding.retries: -1 is not a whole number, 0 or more",
    ),
    "a state name with capitals": (
        rename_state("merging", "Merging"),
        "states.Merging: 'Merging' is not a valid name",
    ),
    "a workflow name with a space": (
        set_in(["workflow"], "my flow"),
        "workflow: 'my flow' is not a valid name",
    ),
    "a transition to a state that does not exist": (
        set_in(["transitions", 1, "to"], "nowhere"),
        "transitions[1].to: workflow 'sdlc' has no state 'nowhere'",
    ),
    "a transition from a state that does not exist": (
        set_in([*REVIEWS, "transitions", 1, "from"], "nowhere"),
        "workflows.security-review.transitions[1].from: workflow 'security-review' has no "
        "state 'nowhere'",
    ),
    "a transition on an event that does not exist": (
        set_in(["transitions", 1, "on"], "finished"),
        "transitions[1].on: workflow 'sdlc' has no event 'finished'",
    ),
    "a transition without its event": (
        remove(["transitions", 1, "on"]),
        "transitions[1].on: a transition from 'coding' needs an event",
    ),
    "a transition out of END": (
        set_in(["transitions", 1, "from"], "__end__"),
        "transitions[1].from: no transition leaves END",
    ),
    "a transition into START": (
        set_in(["transitions", 1, "to"], "__start__"),
        "transitions[1].to: no transition enters START",
    ),
    "a guard that does not parse": (
        set_in(["transitions", 2, "when"], "branches.all(status =="),
        "transitions[2].when: the guard 'branches.all(status ==' does not parse",
    ),
    "an emitted event that does not exist": (
        set_in(["states", "coding", "emits"], ["done", "shipped"]),
        "states.coding.emits[1]: workflow 'sdlc' has no event 'shipped'",
    ),
    "a parallel state running a workflow that does not exist": (
        set_in(["states", "reviews", "parallel"], ["security-review", "ux-review"]),
        "states.reviews.parallel[1]: the graph file has no workflow 'ux-review'",
    ),
    "a join of neither all nor any": (
        set_in(["states", "reviews", "join"], "most"),
        "states.reviews.join: 'most' is not a join; it is 'all' or 'any'",
    ),
    "a payload model that does not exist": (
        set_in([*REVIEWS, "events", "judged", "payload"], "Opinion"),
        "workflows.security-review.events.judged.payload: the graph file has no schema 'Opinion'",
    ),
    "a context model that does not exist": (
        set_in(["context"], "Order"),
        "context: the graph file has no schema 'Order'",
    ),
    "a schema that does not compile": (
        set_in(["schemas", "Ticket", "properties", "repo"], {"type": "string", "pattern": "("}),
        "schemas.Ticket: ",
    ),
    "a schema with a reference that goes nowhere": (
        set_in(["schemas", "Ticket", "properties", "repo"], {"$ref": "#/$defs/Nothing"}),
        "schemas.Ticket: cannot resolve $ref '#/$defs/Nothing'",
    ),
    "a budget in a unit that is no word": (
        set_in(["budget"], {"US Dollars": 5}),
        "budget: 'US Dollars' is not a unit name",
    ),
    "a budget_warn above 1": (
        set_in(["budget_warn"], 1.5),
        "budget_warn is 1.5; it must be a share above 0 and at most 1",
    ),
    "a reservation larger than the budget": (
        lambda document: (
            document.update(budget={"usd": 1})
            or document["states"]["coding"].update(reserve={"usd": 2})
        ),
        "states.coding.reserve: usd 2 is more than the budget's 1",
    ),
    "a negative reservation in a child workflow": (
        set_in([*REVIEWS, "states", "triage", "reserve"], {"usd": -1}),
        "workflows.security-review.states.triage.reserve: usd is -1",
    ),
}


@pytest.mark.parametrize("case", list(MISTAKES))
def test_a_graph_file_that_cannot_be_run_is_refused_naming_the_field(
    tmp_path: Path, case: str
) -> None:
    change, sentence = MISTAKES[case]
    document = parallel_document()
    change(document)
    path = tmp_path / "sdlc.json"
    path.write_text(json.dumps(document))

    with pytest.raises(GraphError) as refused:
        Graph.load(path)

    assert str(refused.value).startswith(f"{path} cannot be served: {sentence}"), refused.value
    assert "\n" not in str(refused.value)


def test_the_compiled_graph_files_of_the_examples_are_served(tmp_path: Path) -> None:
    examples = Path(__file__).resolve().parents[2] / "examples"
    graphs = sorted(examples.glob("*/build/*.json"))
    assert len(graphs) >= 2
    for graph in [*graphs, tmp_path / "sdlc.json"]:
        if not graph.exists():
            graph.write_text(json.dumps(parallel_document()))
        assert Graph.load(graph).name
