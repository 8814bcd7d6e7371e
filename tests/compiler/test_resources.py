"""Resources in flow.py and the graph file: refused on the spot or by compile (and by serve's
checks of a file edited by hand) naming the field; kept in the checksum, outside the
structure."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from stateous import END, START, Workflow
from stateous.compiler.compile import CompileError, compile_workflow
from stateous.control import graph_rules
from stateous.model import graph_file
from stateous.model.errors import DefinitionError


def coding(uses: dict[str, Any] | None = None, *, declare: bool = True) -> Workflow:
    flow = Workflow("coding")
    if declare:
        flow.resource("repo", slots=2)
        flow.resource("llm", slots=3, rate="60/minute")
    code = flow.state("code", uses=uses)
    flow.transition(START, code)
    flow.transition(code, END, on=flow.event("done"))
    return flow


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"slots": 0}, "slots: 0 must be a whole number, 1 or more"),
        ({"rate": "60/min"}, "rate: '60/min' is not a rate; write N/second, N/minute or N/hour"),
        ({"rate": "0/second"}, "rate: '0/second' is not a rate"),
        ({"colour": "red"}, "unknown keyword 'colour'"),
        ({"breaker": 1}, "breaker: 1 must be a whole number from 2 to 1000"),
        ({"breaker": "3"}, "breaker: '3' must be a whole number from 2 to 1000"),
    ],
)
def test_a_bad_resource_is_refused_in_flow_py_naming_its_field(
    options: dict[str, Any], named: str
) -> None:
    with pytest.raises(DefinitionError) as refused:
        Workflow("coding").resource("repo", **options)
    assert str(refused.value).startswith("resource 'repo': ")
    assert named in str(refused.value)


@pytest.mark.parametrize(
    ("uses", "named"),
    [
        ({"repo": "ctx['repo"}, "uses 'repo': \"ctx['repo\" is no key expression"),
        ({"repo": "'acme'"}, "uses 'repo': \"'acme'\" is no key expression"),
        ({"repo": "ctx['a'] == 1"}, "reads one value of the context"),
        ({"repo": 1.5}, "uses 'repo': 1.5 is neither a key expression nor a count"),
    ],
)
def test_a_bad_use_is_refused_in_flow_py(uses: dict[str, Any], named: str) -> None:
    with pytest.raises(DefinitionError) as refused:
        coding(uses)
    assert named in str(refused.value)


def test_a_resource_used_but_not_declared_and_a_count_past_the_slots_are_refused_by_compile() -> (
    None
):
    with pytest.raises(CompileError) as refused:
        compile_workflow(coding({"gpu": 1, "llm": 4}))
    assert refused.value.problems == [
        "state 'code' of workflow 'coding': uses 'gpu', which is not declared; declare it with "
        "flow.resource(...)",
        "state 'code' of workflow 'coding': uses 'llm': a count is 1 to its slots (3), not 4",
    ]


def test_the_resources_are_in_the_checksum_and_outside_the_structure() -> None:
    plain = compile_workflow(coding(declare=False))
    assert b'"resources"' not in graph_file.dump(plain)
    used = compile_workflow(coding({"repo": "ctx['repo']", "llm": 1}))
    document = msgspec.to_builtins(used)
    assert document["resources"] == {"repo": {"slots": 2}, "llm": {"slots": 3, "rate": "60/minute"}}
    assert document["states"]["code"]["uses"] == {"repo": "ctx['repo']", "llm": 1}
    assert graph_file.checksum(used) != graph_file.checksum(plain)
    assert graph_file.structure(used) == graph_file.structure(plain)
    assert graph_file.load(graph_file.dump(used)) == used


def test_serve_refuses_a_hand_edited_file_naming_the_field() -> None:
    document = msgspec.to_builtins(compile_workflow(coding({"repo": "ctx['repo']"})))
    document["resources"]["repo"]["rate"] = "fast"
    document["states"]["code"]["uses"]["gpu"] = "ctx['box"
    problems = list(graph_rules.problems(graph_file.from_document(document)))
    assert problems == [
        "resources.repo.rate: 'fast' is not a rate; write N/second, N/minute or N/hour",
        "states.code.uses: uses 'gpu', which is not declared; declare it with flow.resource(...)",
    ]


def test_a_breaker_is_in_the_graph_file_and_a_hand_edited_one_is_checked_by_serve() -> None:
    flow = Workflow("coding")
    flow.resource("repo", slots=1, breaker=3)
    code = flow.state("code", uses={"repo": "ctx['repo']"})
    flow.transition(START, code)
    flow.transition(code, END, on=flow.event("done"))
    document = msgspec.to_builtins(compile_workflow(flow))
    assert document["resources"]["repo"] == {"breaker": 3}  # 1 slot by default
    document["resources"]["repo"]["breaker"] = 0
    problems = list(graph_rules.problems(graph_file.from_document(document)))
    assert problems == ["resources.repo.breaker: 0 must be a whole number from 2 to 1000"]
