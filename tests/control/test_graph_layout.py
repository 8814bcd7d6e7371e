"""The graph laid out for the dashboard: layers from START to END, back edges drawn upwards,
loops beside their state, no box over another, every line and label inside the drawing,
and an order within the layers that avoids crossings the file's order would make."""

from __future__ import annotations

import itertools

from stateous import END, START, Workflow
from stateous.compiler.compile import compile_workflow
from stateous.control.http.graph_layout import Drawing, Edge, Node, label_span, layout
from tests.control.support import fan_out, one_step, orders


def drawn(flow: Workflow, name: str | None = None) -> Drawing:
    found = layout(compile_workflow(flow))
    return found.workflows[name or found.top]


def boxes(drawing: Drawing) -> dict[str, Node]:
    return {node.name: node for node in drawing.nodes}


def edge(drawing: Drawing, source: str, target: str) -> Edge:
    return next(one for one in drawing.edges if (one.source, one.target) == (source, target))


def test_start_is_on_top_end_at_the_bottom_and_each_state_below_what_leads_to_it() -> None:
    drawing = drawn(orders())
    box = boxes(drawing)
    assert [node.label for node in drawing.nodes] == ["START", "draft", "review", "held", "END"]
    assert box["__start__"].y < box["draft"].y < box["review"].y < box["held"].y
    assert box["__end__"].y == max(node.y for node in drawing.nodes)
    assert {node.kind for node in drawing.nodes} == {"start", "state", "end"}


def test_each_edge_reads_its_events_and_guards_and_runs_from_box_to_box() -> None:
    drawing = drawn(orders())
    box = boxes(drawing)
    assert edge(drawing, "review", "__end__").label == "reviewed [payload.approved == true]"
    assert edge(drawing, "review", "draft").label == "reviewed [otherwise]"
    assert edge(drawing, "__start__", "draft").label == ""
    for one in drawing.edges:
        if one.source == one.target:
            continue
        source, target = box[one.source], box[one.target]
        first, last = one.points[0], one.points[-1]
        assert source.x <= first[0] <= source.x + source.width
        assert first[1] in (source.y, source.y + source.height)
        assert target.x <= last[0] <= target.x + target.width
        assert last[1] in (target.y, target.y + target.height)


def test_a_transition_back_is_drawn_upwards_beside_the_one_forward() -> None:
    drawing = drawn(orders())
    back, forward = edge(drawing, "review", "draft"), edge(drawing, "draft", "review")
    assert back.back and not forward.back
    assert back.points[0][1] > back.points[-1][1]
    assert forward.points[0][1] < forward.points[-1][1]
    assert back.points[0][0] != forward.points[-1][0]
    assert (back.anchor, forward.anchor) in (("start", "end"), ("end", "start"))


def test_a_transition_to_the_same_state_loops_on_its_right() -> None:
    drawing = drawn(orders())
    draft = boxes(drawing)["draft"]
    loop = edge(drawing, "draft", "draft")
    assert loop.label == "remind"
    assert len(loop.points) == 4
    assert all(x >= draft.x + draft.width for x, _ in loop.points)
    assert all(draft.y <= y <= draft.y + draft.height for _, y in loop.points)


def test_an_edge_across_layers_passes_beside_the_states_between() -> None:
    drawing = drawn(orders())
    held = boxes(drawing)["held"]
    across = edge(drawing, "review", "__end__")
    assert len(across.points) == 3
    x, y = across.points[1]
    assert held.y <= y <= held.y + held.height
    assert not held.x <= x <= held.x + held.width
    assert across.label_at[1] == y, "the label sits at the passing point, between the boxes"


def overlap(one: Node, other: Node) -> bool:
    return (
        one.x < other.x + other.width
        and other.x < one.x + one.width
        and one.y < other.y + other.height
        and other.y < one.y + one.height
    )


def test_no_box_covers_another_and_everything_lies_inside_the_drawing() -> None:
    for drawing in layout(compile_workflow(orders())).workflows.values():
        for one, other in itertools.combinations(drawing.nodes, 2):
            assert not overlap(one, other), (one.name, other.name)
        for node in drawing.nodes:
            assert node.x > 0 and node.x + node.width < drawing.width
            assert node.y > 0 and node.y + node.height < drawing.height
        for one in drawing.edges:
            left, right = label_span(one)
            assert left > 0 and right < drawing.width, one
            assert all(0 < x < drawing.width and 0 < y < drawing.height for x, y in one.points)


def test_the_order_within_a_layer_avoids_a_crossing_of_the_files_order() -> None:
    flow = Workflow("crossed")
    top, left, right, low_a, low_b = map(flow.state, ("top", "left", "right", "a", "b"))
    go, other = flow.event("go"), flow.event("other")
    flow.transition(START, top)
    flow.transition(top, left, on=go)
    flow.transition(top, right, on=other)
    # The file lists `a` before `b`, but `right` leads to `a` and `left` to `b`.
    flow.transition(left, low_b, on=go)
    flow.transition(right, low_a, on=go)
    flow.transition(low_a, END, on=go)
    flow.transition(low_b, END, on=go)
    box = boxes(drawn(flow))
    assert (box["left"].x < box["right"].x) == (box["b"].x < box["a"].x)


def test_every_workflow_of_the_file_is_laid_out_and_a_parallel_state_names_its_children() -> None:
    found = layout(compile_workflow(fan_out("plan", "fan", one_step("kid", "done"))))
    assert found.top == "plan"
    assert set(found.workflows) == {"plan", "kid"}
    fan = boxes(found.workflows["plan"])["fan"]
    assert (fan.kind, fan.parallel) == ("parallel", ["kid"])
    assert [node.label for node in found.workflows["kid"].nodes] == ["START", "step", "END"]
