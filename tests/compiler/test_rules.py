"""Every class of compile problem, each named in one line that says how to fix it."""

from typing import Literal

import msgspec
import pytest

from stateous import END, START, Workflow
from stateous.compiler.compile import CompileError, compile_workflow


class Item(msgspec.Struct):
    title: str
    amount: int = 0
    kind: Literal["book", "toy"] = "book"


class Verdict(msgspec.Struct):
    approved: bool
    note: str = ""


class Review(msgspec.Struct):
    repo: str
    branch: str


class Ticket(msgspec.Struct):
    repo: str
    branch: str = "main"


def orders() -> tuple[Workflow, dict]:
    """The orders starter, with its parts, ready for one mistake."""
    flow = Workflow("orders", context=Item)
    parts = {
        "draft": flow.state("draft"),
        "review": flow.state("review"),
        "submitted": flow.event("submitted"),
        "reviewed": flow.event("reviewed", payload=Verdict),
    }
    flow.transition(START, parts["draft"])
    flow.transition(parts["draft"], parts["review"], on=parts["submitted"])
    return flow, parts


def problems(flow: Workflow) -> list[str]:
    with pytest.raises(CompileError) as caught:
        compile_workflow(flow)
    assert str(caught.value).startswith(f"workflow {flow.name!r} is not valid:\n  - ")
    return caught.value.problems


def test_the_orders_starter_compiles() -> None:
    flow, parts = orders()
    flow.transition(parts["review"], END, on=parts["reviewed"], when="payload.approved == true")
    flow.transition(parts["review"], parts["draft"], on=parts["reviewed"], otherwise=True)
    graph = compile_workflow(flow)
    assert graph.workflow == "orders"
    assert graph.states["review"].emits == ["reviewed"]


def test_overlapping_guards_are_refused_with_data_that_makes_both_true() -> None:
    flow, parts = orders()
    review, draft, reviewed = parts["review"], parts["draft"], parts["reviewed"]
    flow.transition(review, END, on=reviewed, when="ctx['amount'] > 100")
    flow.transition(review, draft, on=reviewed, when="ctx['amount'] > 50")
    assert problems(flow) == [
        "'reviewed' from 'review': the guards \"ctx['amount'] > 100\" and "
        "\"ctx['amount'] > 50\" can both be true, e.g. when ctx['amount'] = 101; make them "
        "exclusive, or make one the fallback (otherwise=True)"
    ]


def test_exclusive_guards_compile_without_a_fallback() -> None:
    flow, parts = orders()
    review, draft, reviewed = parts["review"], parts["draft"], parts["reviewed"]
    flow.transition(review, END, on=reviewed, when="ctx['amount'] > 100")
    flow.transition(review, draft, on=reviewed, when="ctx['amount'] <= 100")
    compile_workflow(flow)


def test_two_guards_on_the_payload_that_overlap_show_both_fields() -> None:
    flow, parts = orders()
    review, draft, reviewed = parts["review"], parts["draft"], parts["reviewed"]
    flow.transition(review, END, on=reviewed, when="payload.approved == true")
    flow.transition(review, draft, on=reviewed, when="payload.note != ''")
    [problem] = problems(flow)
    assert "e.g. when payload.approved = True, payload.note = '\\x00';" in problem


def test_a_state_that_cannot_be_reached() -> None:
    flow, parts = orders()
    flow.transition(parts["review"], END, on=parts["reviewed"])
    shipping = flow.state("shipping")
    flow.transition(shipping, END, on=parts["submitted"])
    assert problems(flow) == [
        "state 'shipping' cannot be reached from START; add a transition into it"
    ]


def test_no_transition_from_start_and_none_into_end() -> None:
    flow = Workflow("orders")
    draft = flow.state("draft")
    flow.transition(draft, draft, on="timeout")
    found = problems(flow)
    assert (
        "workflow 'orders' has no transition from START; add flow.transition(START, <state>)"
        in found
    )
    assert (
        "workflow 'orders' has no transition into END; add one, so that a token can complete"
        in (found)
    )


def test_a_state_with_no_way_out() -> None:
    flow, parts = orders()
    flow.transition(parts["draft"], END, on=parts["reviewed"])
    assert problems(flow) == [
        "state 'review' has no transition out of it; a token there could never move on"
    ]


def test_an_unknown_target_and_an_undeclared_event() -> None:
    flow, parts = orders()
    flow.transition(parts["review"], "shipping", on="shipped")
    flow.transition(parts["review"], END, on=parts["reviewed"])
    found = problems(flow)
    assert (
        "a transition names state 'shipping', which workflow 'orders' does not declare; "
        "declare it with flow.state(...)"
    ) in found
    assert (
        "the transition from 'review' on 'shipped' names an event that is not declared; "
        "declare it with flow.event(...)"
    ) in found


def test_an_unguarded_transition_beside_guarded_ones_must_be_the_fallback() -> None:
    flow, parts = orders()
    review, draft, reviewed = parts["review"], parts["draft"], parts["reviewed"]
    flow.transition(review, END, on=reviewed, when="payload.approved == true")
    flow.transition(review, draft, on=reviewed)
    assert problems(flow) == [
        "'reviewed' from 'review' has guarded transitions and an unguarded one; "
        "mark the unguarded one otherwise=True"
    ]


def test_two_unguarded_transitions_on_one_event() -> None:
    flow, parts = orders()
    flow.transition(parts["review"], END, on=parts["reviewed"])
    flow.transition(parts["review"], parts["draft"], on=parts["reviewed"])
    [problem] = problems(flow)
    assert problem.startswith("'reviewed' from 'review' has 2 transitions and no guard")


def test_two_fallbacks_on_one_event() -> None:
    flow, parts = orders()
    review, draft, reviewed = parts["review"], parts["draft"], parts["reviewed"]
    flow.transition(review, END, on=reviewed, when="payload.approved == true")
    flow.transition(review, draft, on=reviewed, otherwise=True)
    flow.transition(review, END, on=reviewed, otherwise=True)
    assert "'reviewed' from 'review' has 2 transitions with otherwise=True; keep one fallback" in (
        problems(flow)
    )


def test_a_guard_with_a_syntax_error_shows_where() -> None:
    flow, parts = orders()
    review, draft, reviewed = parts["review"], parts["draft"], parts["reviewed"]
    flow.transition(review, END, on=reviewed, when="payload.approved = true")
    flow.transition(review, draft, on=reviewed, otherwise=True)
    [problem] = problems(flow)
    assert problem.startswith(
        "'reviewed' from 'review': the guard 'payload.approved = true' has a syntax error "
        "at column 18: "
    )


def test_a_guard_reads_only_fields_of_its_models() -> None:
    flow, parts = orders()
    review, draft, reviewed = parts["review"], parts["draft"], parts["reviewed"]
    flow.transition(review, END, on=reviewed, when="ctx['amont'] > 1 and payload.aproved == true")
    flow.transition(review, draft, on=reviewed, otherwise=True)
    assert problems(flow) == [
        "'reviewed' from 'review': the guard \"ctx['amont'] > 1 and payload.aproved == true\" "
        "reads ctx['amont'], which the context does not have",
        "'reviewed' from 'review': the guard \"ctx['amont'] > 1 and payload.aproved == true\" "
        "reads payload.aproved, which the payload of 'reviewed' does not have",
    ]


def test_a_payload_guard_on_an_event_without_payload() -> None:
    flow, parts = orders()
    review = parts["review"]
    flow.transition(review, END, on=flow.event("cancelled"), when="payload.x == 1")
    flow.transition(review, END, on=parts["reviewed"])
    [problem] = problems(flow)
    assert problem.endswith("reads payload.x, but the payload of 'cancelled' has no model")


def test_count_names_an_event_of_the_workflow() -> None:
    flow, parts = orders()
    review, draft, reviewed = parts["review"], parts["draft"], parts["reviewed"]
    flow.transition(review, END, on=reviewed, when="count('rejected') > 2")
    flow.transition(review, draft, on=reviewed, otherwise=True)
    assert problems(flow) == [
        "'reviewed' from 'review': the guard \"count('rejected') > 2\" counts 'rejected', "
        "which is not an event of workflow 'orders'"
    ]


def test_count_of_an_event_of_stateous_is_fine() -> None:
    flow, parts = orders()
    review, draft, reviewed = parts["review"], parts["draft"], parts["reviewed"]
    flow.transition(review, END, on=reviewed, when="count('timeout') > 2")
    flow.transition(review, draft, on=reviewed, otherwise=True)
    compile_workflow(flow)


def test_a_guard_from_start_reads_only_the_context() -> None:
    flow = Workflow("orders", context=Item)
    draft = flow.state("draft")
    toys = flow.state("toys")
    flow.transition(START, toys, when="count('submitted') > 0")
    flow.transition(START, draft, otherwise=True)
    flow.transition(draft, END, on="timeout")
    flow.transition(toys, END, on="timeout")
    [problem] = problems(flow)
    assert problem.startswith("from START: the guard \"count('submitted') > 0\" reads more")


def test_guards_from_start_on_the_context_choose_the_first_state() -> None:
    flow = Workflow("orders", context=Item)
    draft = flow.state("draft")
    toys = flow.state("toys")
    flow.transition(START, toys, when="ctx['kind'] == 'toy'")
    flow.transition(START, draft, when="ctx['kind'] == 'book'")
    flow.transition(draft, END, on="timeout")
    flow.transition(toys, END, on="timeout")
    graph = compile_workflow(flow)
    assert [t.when for t in graph.transitions[:2]] == [
        "ctx['kind'] == 'toy'",
        "ctx['kind'] == 'book'",
    ]


def test_guards_that_compare_two_values_cannot_be_proven() -> None:
    flow, parts = orders()
    review, draft, reviewed = parts["review"], parts["draft"], parts["reviewed"]
    flow.transition(review, END, on=reviewed, when="ctx['amount'] > count('reviewed')")
    flow.transition(review, draft, on=reviewed, when="ctx['amount'] == 0")
    [problem] = problems(flow)
    assert "compile cannot prove that the guards" in problem
    assert problem.endswith("make one of them the fallback (otherwise=True)")


def test_branches_only_on_joined() -> None:
    flow, parts = orders()
    review, draft, reviewed = parts["review"], parts["draft"], parts["reviewed"]
    flow.transition(review, END, on=reviewed, when="branches.all(status == 'completed')")
    flow.transition(review, draft, on=reviewed, otherwise=True)
    [problem] = problems(flow)
    assert problem.endswith("uses branches, which only 'joined' has")


def reviews_flow(**state: object) -> tuple[Workflow, dict]:
    security = Workflow("security-review", context=Review)
    check = security.state("check")
    security.transition(START, check)
    security.transition(check, END, on=security.event("approved"))
    flow = Workflow("sdlc", context=Ticket)
    coding = flow.state("coding")
    options = {"parallel": [security], "inputs": ["repo", "branch"], **state}
    reviews = flow.state("reviews", **options)
    flow.transition(START, coding)
    flow.transition(coding, reviews, on=flow.event("done"))
    return flow, {"coding": coding, "reviews": reviews, "security": security}


def test_a_parallel_state_compiles_with_its_children() -> None:
    flow, parts = reviews_flow(join="any", timeout="1d")
    flow.transition(parts["reviews"], END, on="joined", when="branches.all(status == 'completed')")
    flow.transition(parts["reviews"], parts["coding"], on="joined", otherwise=True)
    graph = compile_workflow(flow)
    assert graph.states["reviews"].parallel == ["security-review"]
    assert graph.states["reviews"].join == "any"
    assert graph.states["reviews"].emits is None
    assert list(graph.workflows) == ["security-review"]
    assert graph.workflows["security-review"].states["check"].emits == ["approved"]


def test_a_parallel_state_needs_joined_and_has_no_error() -> None:
    flow, parts = reviews_flow()
    flow.transition(parts["reviews"], END, on="error")
    found = problems(flow)
    assert (
        "parallel state 'reviews' has no transition on 'joined'; add one, for when its "
        "children are done"
    ) in found
    assert any("has a transition on 'error', but it has no task" in item for item in found)


def test_joined_belongs_to_parallel_states() -> None:
    flow, parts = orders()
    flow.transition(parts["review"], END, on="joined")
    assert problems(flow) == [
        "state 'review' has a transition on 'joined', but only a parallel state is joined; "
        "remove it"
    ]


def test_inputs_must_give_every_required_field_of_the_child() -> None:
    flow, parts = reviews_flow(inputs=["repo", "colour"])
    flow.transition(parts["reviews"], END, on="joined")
    assert problems(flow) == [
        "parallel state 'reviews': inputs= names 'colour', which the context of workflow "
        "'sdlc' does not have",
        "parallel state 'reviews': the context of workflow 'security-review' requires "
        "'branch'; add it to inputs=",
    ]


def test_a_child_workflow_with_a_mistake_is_named() -> None:
    flow, parts = reviews_flow()
    flow.transition(parts["reviews"], END, on="joined")
    parts["security"].state("lonely")
    found = problems(flow)
    assert (
        "state 'lonely' of workflow 'security-review' cannot be reached from START; "
        "add a transition into it"
    ) in found


def test_a_child_id_must_fit_in_128_characters() -> None:
    long_name = "w" * 40
    child = Workflow(long_name)
    step = child.state("step")
    child.transition(START, step)
    child.transition(step, END, on="timeout")
    flow = Workflow("top")
    state = flow.state("s" * 20, parallel=[child])
    flow.transition(START, state)
    flow.transition(state, END, on="joined")
    [problem] = problems(flow)
    assert "a child id for" in problem and "more than 128" in problem


def test_nesting_counts_every_level() -> None:
    inner = Workflow("i" * 20)
    step = inner.state("step")
    inner.transition(START, step)
    inner.transition(step, END, on="timeout")
    middle = Workflow("m" * 20)
    nested = middle.state("n", parallel=[inner])
    middle.transition(START, nested)
    middle.transition(nested, END, on="joined")
    flow = Workflow("top")
    outer = flow.state("o", parallel=[middle])
    flow.transition(START, outer)
    flow.transition(outer, END, on="joined")
    compile_workflow(flow)  # 64 + 28 + 28 = 120 fits
    deeper = Workflow("d" * 20)
    deep = deeper.state("x", parallel=[middle])
    deeper.transition(START, deep)
    deeper.transition(deep, END, on="joined")
    flow2 = Workflow("top2")
    outer2 = flow2.state("o", parallel=[deeper])
    flow2.transition(START, outer2)
    flow2.transition(outer2, END, on="joined")
    [problem] = problems(flow2)
    assert f"a child id for {'i' * 20!r}" in problem


def test_two_workflows_with_one_name() -> None:
    first = Workflow("review")
    step = first.state("step")
    first.transition(START, step)
    first.transition(step, END, on="timeout")
    second = Workflow("review")
    other = second.state("step")
    second.transition(START, other)
    second.transition(other, END, on="timeout")
    flow = Workflow("top")
    one = flow.state("one", parallel=[first])
    two = flow.state("two", parallel=[second])
    flow.transition(START, one)
    flow.transition(one, two, on="joined")
    flow.transition(two, END, on="joined")
    assert "two different workflows are named 'review'; rename one" in problems(flow)


def test_two_models_with_one_name() -> None:
    flow, parts = orders()

    class Verdict(msgspec.Struct):  # another class with the same name
        ok: bool

    other = flow.event("rejected", payload=Verdict)
    flow.transition(parts["review"], END, on=parts["reviewed"])
    flow.transition(parts["review"], END, on=other)
    assert "two different models are named 'Verdict'; give each model its own name" in (
        problems(flow)
    )


def test_all_problems_are_listed_at_once() -> None:
    flow, parts = orders()
    flow.state("shipping")
    flow.transition(parts["review"], END, on=parts["reviewed"], when="payload.approved = 1")
    assert len(problems(flow)) == 2


class Built(msgspec.Struct):
    ok: bool
    log: str = ""


def build_matrix(guard: str, ends: type | None = Built) -> Workflow:
    """Two builds that end on `built` (with the payload model `ends`), joined by `guard`."""
    builds = []
    for name in ("linux", "mac"):
        child = Workflow(name, context=Review)
        building = child.state("building")
        child.transition(START, building)
        child.transition(building, END, on=child.event("built", payload=ends))
        builds.append(child)
    flow = Workflow("matrix", context=Ticket)
    matrix = flow.state("builds", parallel=builds, inputs=["repo", "branch"])
    fixing = flow.state("fixing")
    flow.transition(START, matrix)
    flow.transition(matrix, END, on="joined", when=guard)
    flow.transition(matrix, fixing, on="joined", otherwise=True)
    flow.transition(fixing, END, on=flow.event("fixed"))
    return flow


def test_a_join_guard_may_read_the_result_that_ended_each_child() -> None:
    graph = compile_workflow(build_matrix("branches.all(result.ok == true)"))
    assert graph.transitions[1].when == "branches.all(result.ok == true)"
    compile_workflow(build_matrix("branches.any(result == null)"))


def test_a_join_guard_cannot_read_a_result_field_that_no_ending_event_has() -> None:
    assert problems(build_matrix("branches.all(result.passed == true)")) == [
        "'joined' from 'builds': the guard 'branches.all(result.passed == true)' reads "
        "result.passed, which no payload of the events that end the children has "
        "('built' of 'linux', 'built' of 'mac')"
    ]


def test_a_join_guard_cannot_read_a_result_field_when_no_ending_event_has_a_model() -> None:
    assert problems(build_matrix("branches.all(result.ok == true)", ends=None)) == [
        "'joined' from 'builds': the guard 'branches.all(result.ok == true)' reads "
        "result.ok, but no event that ends the children has a payload model "
        "('built' of 'linux', 'built' of 'mac')"
    ]


def test_result_is_read_only_inside_branches() -> None:
    [problem] = problems(build_matrix("result.ok == true"))
    assert problem.endswith(
        "has a syntax error at column 1: 'result' can be read only inside "
        "branches.all(...) or branches.any(...)"
    )


def test_a_join_guard_cannot_read_a_branch_payload_field_that_no_entering_event_has() -> None:
    """The builds enter `building` from START, with no event: a branch's payload is always
    null, and `payload.ok` (meant as `result.ok`) would never hold."""
    assert problems(build_matrix("branches.all(payload.ok == true)")) == [
        "'joined' from 'builds': the guard 'branches.all(payload.ok == true)' reads "
        "payload.ok, but no event that brings a child into a state has a payload model"
    ]


def held_reviews(guard: str) -> Workflow:
    """A review that may be held with a `Built` payload before it is approved."""
    flow, parts = reviews_flow()
    security = parts["security"]
    held = security.state("held")
    security.transition(security.states["check"], held, on=security.event("hold", payload=Built))
    security.transition(held, END, on=security.events["approved"])
    flow.transition(parts["reviews"], END, on="joined", when=guard)
    flow.transition(parts["reviews"], parts["coding"], on="joined", otherwise=True)
    return flow


def test_a_join_guard_reads_a_branch_payload_field_of_an_event_that_enters_a_state() -> None:
    compile_workflow(held_reviews("branches.all(payload.ok == true)"))
    assert problems(held_reviews("branches.all(payload.okay == true)")) == [
        "'joined' from 'reviews': the guard 'branches.all(payload.okay == true)' reads "
        "payload.okay, which no payload of the events that bring a child into a state has "
        "('hold' of 'security-review')"
    ]
