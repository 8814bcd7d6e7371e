"""The guard language: what parses, what does not and where, and what a guard means."""

from __future__ import annotations

import math
from typing import Any

import pytest

from stateous.model.guard_eval import evaluate
from stateous.model.guards import (
    And,
    Branches,
    BranchRef,
    Compare,
    CountRef,
    CtxRef,
    GuardSyntaxError,
    Literal,
    Not,
    Or,
    PayloadRef,
    Truth,
    parse,
)


def holds(text: str, ctx: Any = None, payload: Any = None, counts: Any = None, **kw: Any) -> bool:
    return evaluate(parse(text), ctx=ctx, payload=payload, counts=counts or {}, **kw)


# Parsing


def test_a_comparison_of_a_context_field_with_a_number_parses():
    guard = parse("ctx['amount'] > 100")
    assert guard.root == Compare(">", CtxRef(("amount",)), Literal(100))
    assert guard.refs == (CtxRef(("amount",)),)
    assert guard.text == "ctx['amount'] > 100"
    assert not guard.uses_branches
    assert guard.counted == ()


@pytest.mark.parametrize("op", ["<", "<=", ">", ">=", "==", "!=", "in", "not in"])
def test_every_comparison_operator_parses(op: str):
    guard = parse(f"payload.kind {op} ctx['kinds']")
    assert guard.root == Compare(op, PayloadRef(("kind",)), CtxRef(("kinds",)))


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1", 1),
        ("-2", -2),
        ("-2.5", -2.5),
        ("0.25", 0.25),
        ("'a\\'b'", "a'b"),
        ('"say \\"hi\\""', 'say "hi"'),
        ("'back\\\\slash'", "back\\slash"),
        ("'tab\\there\\n'", "tab\there\n"),
        ("true", True),
        ("false", False),
        ("null", None),
        ("[]", []),
        ("[1, 'a', true, null, [2.5, []],]", [1, "a", True, None, [2.5, []]]),
    ],
)
def test_literals_parse_to_json_values(text: str, value: Any):
    right = parse(f"ctx['x'] == {text}").root.right
    assert isinstance(right, Literal)
    assert right.value == value
    assert type(right.value) is type(value)


def test_an_integer_stays_an_int_and_a_fraction_becomes_a_float():
    assert isinstance(parse("ctx['x'] == 3").root.right.value, int)
    assert isinstance(parse("ctx['x'] == 3.0").root.right.value, float)


def test_nested_context_and_payload_paths_parse():
    guard = parse("ctx['a']['b'] == payload.c.d.e")
    assert guard.root == Compare("==", CtxRef(("a", "b")), PayloadRef(("c", "d", "e")))
    assert [ref.label for ref in guard.refs] == ["ctx['a']['b']", "payload.c.d.e"]


def test_a_payload_field_may_be_named_like_a_keyword():
    assert parse("payload.count == payload.in").root == Compare(
        "==", PayloadRef(("count",)), PayloadRef(("in",))
    )


def test_labels_are_the_canonical_text_of_each_reference():
    assert CtxRef(("amount",)).label == "ctx['amount']"
    assert CtxRef(("a", "b")).label == "ctx['a']['b']"
    assert PayloadRef(("approved",)).label == "payload.approved"
    assert CountRef("failed").label == "count('failed')"
    assert BranchRef(("status",)).label == "status"
    assert BranchRef(("payload", "x")).label == "payload.x"


def test_references_are_equal_and_hashable_whatever_their_column():
    (ref,) = parse("true or ctx['a'] == 1 or ctx['a'] == 2").refs
    assert ref.column == 9
    assert ref == CtxRef(("a",), column=99)
    assert hash(ref) == hash(CtxRef(("a",)))
    assert {CtxRef(("a",), 1), CtxRef(("a",), 7)} == {ref}


def test_references_know_their_column():
    guard = parse("true and payload.x == count('e')")
    assert [ref.column for ref in guard.refs] == [10, 23]


def test_refs_are_deduplicated_in_order_of_first_appearance():
    guard = parse("count('b') > 1 and ctx['a'] == 1 or count('b') < 0 or payload.p")
    assert guard.refs == (CountRef("b"), CtxRef(("a",)), PayloadRef(("p",)))


def test_counted_lists_each_event_once_in_order_including_inside_branches():
    guard = parse("count('b') > 1 and branches.any(count('a') > 0) and count('b') < 5")
    assert guard.counted == ("b", "a")


def test_and_binds_tighter_than_or_and_not_tighter_than_and():
    guard = parse("not ctx['a'] or ctx['b'] and ctx['c']")
    a, b, c = (Truth(CtxRef((key,))) for key in "abc")
    assert guard.root == Or((Not(a), And((b, c))))


def test_parentheses_group():
    guard = parse("(ctx['a'] or ctx['b']) and not (ctx['c'])")
    a, b, c = (Truth(CtxRef((key,))) for key in "abc")
    assert guard.root == And((Or((a, b)), Not(c)))


def test_a_bare_reference_is_a_condition_that_the_value_is_true():
    assert parse("payload.approved").root == Truth(PayloadRef(("approved",)))
    assert parse("not ctx['x']").root == Not(Truth(CtxRef(("x",))))
    assert parse("(count('e'))").root == Truth(CountRef("e"))


def test_true_and_false_are_conditions():
    assert parse("true").root == Literal(True)
    assert parse("not false").root == Not(Literal(False))


def test_branches_all_and_any_parse_with_branch_fields():
    guard = parse("branches.all(status == 'completed' and final == 'approved')")
    assert guard.uses_branches
    assert guard.refs == ()
    assert guard.root == Branches(
        "all",
        And(
            (
                Compare("==", BranchRef(("status",)), Literal("completed")),
                Compare("==", BranchRef(("final",)), Literal("approved")),
            )
        ),
    )
    body = parse("branches.any(payload.ok.deep)").root.body
    assert body == Truth(BranchRef(("payload", "ok", "deep")))


def test_workflow_token_and_context_reads_are_allowed_inside_branches():
    guard = parse("branches.any(workflow == 'w' and token != ctx['t'] and count('e') > 1)")
    assert guard.refs == (CtxRef(("t",)), CountRef("e"))
    assert guard.counted == ("e",)


def test_whitespace_between_tokens_is_free():
    assert parse("  ctx [ 'a' ] [ 'b' ]>=-1 and payload . x\tin[1,2]  ").root == And(
        (
            Compare(">=", CtxRef(("a", "b")), Literal(-1)),
            Compare("in", PayloadRef(("x",)), Literal([1, 2])),
        )
    )


def test_a_syntax_error_reads_as_its_column_and_message():
    with pytest.raises(GuardSyntaxError) as caught:
        parse("payload.approved = true")
    assert caught.value.column == 18
    assert caught.value.message == "'=' is not an operator; write '=='"
    assert str(caught.value) == "at column 18: '=' is not an operator; write '=='"
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    ("text", "column", "words"),
    [
        ("", 1, "empty"),
        ("   ", 1, "empty"),
        ("ctx['a' > 1", 9, "']'"),
        ("payload.approved = true", 18, "'=='"),
        ("ctx.amount > 1", 4, "ctx['amount']"),
        ("ctx.memory", 4, "ctx.memory"),
        ("ctx > 1", 5, "ctx['key']"),
        ("ctx[1] > 1", 5, "quoted key"),
        ("'a' in 'abc'", 8, "string cannot be on the right of 'in'"),
        ("ctx['a'] not in 'abc'", 17, "string cannot be on the right of 'not in'"),
        ("ctx['a'] in 5", 13, "must be a list"),
        ("5", 1, "5 is not a condition"),
        ("'yes'", 1, "is not a condition"),
        ("null", 1, "null is not a condition"),
        ("[1]", 1, "a list is not a condition"),
        ("ctx['a'] and 1", 14, "1 is not a condition"),
        ("not 'x'", 5, "is not a condition"),
        ("foo == 1", 1, "unknown name 'foo'"),
        ("ctx['a'] == True", 13, "write 'true'"),
        ("ctx['a'] == None", 13, "write 'null'"),
        ("status == 'completed'", 1, "only inside branches"),
        ("branches.all(branches.any(true))", 14, "inside branches"),
        ("branches.some(true)", 10, "'all' or 'any'"),
        ("branches.all true", 14, "'('"),
        ("branches.all(status == 'x'", 27, "')'"),
        ("1 < ctx['x'] < 3", 14, "chained"),
        ("ctx['a'] == 1 ctx['b']", 15, "expected 'and', 'or'"),
        ("ctx['a'] == 1)", 14, "unexpected ')'"),
        ("(ctx['a'] == 1", 15, "')'"),
        ("ctx['a'] ==", 12, "expected a value"),
        ("ctx['a'] == and", 13, "expected a value, found 'and'"),
        ("ctx['a'] not 1", 10, "unexpected 'not'"),
        ("ctx['a'] == 'open", 13, "no closing '"),
        ("ctx['a'] == 'open\\", 13, "no closing '"),
        ("ctx['a'] == 'a\\qb'", 15, "unknown escape"),
        ("ctx['a'] == [1, ctx['b']]", 17, "a list holds only"),
        ("ctx['a'] == [1 2]", 16, "']'"),
        ("payload > 1", 9, "'.' after payload"),
        ("payload.1 > 1", 9, "field name"),
        ("count(failed) > 1", 7, "quoted event name"),
        ("count('failed' > 1", 16, "')'"),
        ("ctx['a'] && ctx['b']", 10, "write 'and'"),
        ("ctx['a'] || ctx['b']", 10, "write 'or'"),
        ("!ctx['a']", 1, "write 'not'"),
        ("ctx['a'] == #", 13, "unexpected character '#'"),
        ("ctx['a'] == - 1", 13, "unexpected character '-'"),
        ("(" * 400 + "true" + ")" * 400, 1, "nested too deeply"),
        ("ctx['a'] == " + "9" * 301, 13, "at most 300 characters"),
    ],
)
def test_a_syntax_error_points_at_the_offending_column(text: str, column: int, words: str):
    with pytest.raises(GuardSyntaxError) as caught:
        parse(text)
    assert caught.value.column == column, caught.value
    assert words in caught.value.message


# Evaluation


def test_a_missing_context_key_reads_as_null():
    assert holds("ctx['x'] == null", ctx={})
    assert holds("ctx['x'] == null", ctx=None)
    assert holds("ctx['a']['b'] == null", ctx={"a": 5})
    assert holds("ctx['a']['b'] == null", ctx={"a": {}})


def test_a_null_payload_makes_every_payload_field_null():
    assert holds("payload.x == null and payload.x.y == null", payload=None)
    assert holds("payload.x == null", payload="not an object")


def test_a_count_of_an_event_never_accepted_is_zero():
    assert holds("count('failed') == 0", counts={})
    assert holds("count('failed') == 2", counts={"failed": 2})


def test_nested_paths_read_nested_values():
    assert holds("ctx['a']['b'] == 3", ctx={"a": {"b": 3}})
    assert holds("payload.a.b == 'x'", payload={"a": {"b": "x"}})


@pytest.mark.parametrize("op", ["<", "<=", ">", ">="])
def test_a_null_compared_with_a_number_is_false(op: str):
    assert not holds(f"ctx['n'] {op} 5", ctx={"n": None})
    assert not holds(f"5 {op} ctx['n']", ctx={})


@pytest.mark.parametrize(
    ("left", "right"),
    [(True, 1), (1, "1"), ("a", ["a"]), (None, 0), (False, 0), ([1], 1), ({}, 0)],
)
def test_ordering_values_of_different_kinds_is_false(left: Any, right: Any):
    for op in ("<", "<=", ">", ">="):
        assert not holds(f"ctx['l'] {op} ctx['r']", ctx={"l": left, "r": right})


def test_ordering_booleans_or_lists_is_false_even_between_equal_kinds():
    assert not holds("ctx['a'] >= ctx['b']", ctx={"a": True, "b": False})
    assert not holds("ctx['a'] <= ctx['b']", ctx={"a": [1], "b": [1]})


def test_numbers_order_as_numbers_and_strings_as_strings():
    assert holds("ctx['a'] < 2.5", ctx={"a": 2})
    assert holds("ctx['a'] >= 2", ctx={"a": 2.0})
    assert holds("ctx['a'] < 'b'", ctx={"a": "abc"})
    assert holds("ctx['a'] > 'B'", ctx={"a": "a"})


@pytest.mark.parametrize(
    ("left", "right", "equal"),
    [
        (True, 1, False),
        (False, 0, False),
        (1, 1.0, True),
        (True, True, True),
        ("1", 1, False),
        (None, None, True),
        (None, False, False),
        ([1, [2, "x"]], [1.0, [2, "x"]], True),
        ([1, 2], [2, 1], False),
        ([True], [1], False),
        ({"a": 1, "b": [1]}, {"b": [1.0], "a": 1}, True),
        ({"a": 1}, {"a": 1, "b": None}, False),
        ({"a": True}, {"a": 1}, False),
        ([], {}, False),
    ],
)
def test_equality_is_json_equality(left: Any, right: Any, equal: bool):
    ctx = {"l": left, "r": right}
    assert holds("ctx['l'] == ctx['r']", ctx=ctx) is equal
    assert holds("ctx['l'] != ctx['r']", ctx=ctx) is not equal


def test_a_literal_true_is_not_equal_to_one():
    assert not holds("ctx['x'] == true", ctx={"x": 1})
    assert holds("ctx['x'] == 1", ctx={"x": 1.0})


def test_in_checks_membership_with_json_equality():
    assert holds("ctx['x'] in [1, 'a']", ctx={"x": 1.0})
    assert not holds("ctx['x'] in [1, 'a']", ctx={"x": True})
    assert holds("ctx['x'] in [[1, 2], null]", ctx={"x": [1, 2]})
    assert holds("ctx['x'] in [[1, 2], null]", ctx={})
    assert holds("'b' in ctx['tags']", ctx={"tags": ["a", "b"]})
    assert holds("'c' not in ctx['tags']", ctx={"tags": ["a", "b"]})


@pytest.mark.parametrize("right", [None, "abc", 5, {"a": 1}, True])
def test_in_and_not_in_are_both_false_when_the_right_is_not_a_list(right: Any):
    ctx = {"x": "a", "r": right}
    assert not holds("ctx['x'] in ctx['r']", ctx=ctx)
    assert not holds("ctx['x'] not in ctx['r']", ctx=ctx)
    assert holds("not (ctx['x'] in ctx['r'])", ctx=ctx)


def test_a_bare_reference_holds_only_for_exactly_true():
    assert holds("payload.ok", payload={"ok": True})
    for value in (1, "true", [True], None, {"a": True}, 1.0):
        assert not holds("payload.ok", payload={"ok": value})
        assert holds("not payload.ok", payload={"ok": value})


def test_and_or_not_combine_conditions():
    ctx = {"a": 1, "b": 2}
    assert holds("ctx['a'] == 1 and ctx['b'] == 2", ctx=ctx)
    assert not holds("ctx['a'] == 1 and ctx['b'] == 3", ctx=ctx)
    assert holds("ctx['a'] == 5 or ctx['b'] == 2", ctx=ctx)
    assert holds("not (ctx['a'] == 5 or ctx['b'] == 5)", ctx=ctx)


def test_a_comparison_of_conditions_compares_their_truth():
    assert holds("(ctx['a'] > 1) == true", ctx={"a": 2})
    assert holds("(ctx['a'] > 1) == false", ctx={})


BRANCHES = [
    {"workflow": "sec", "token": "T.1", "status": "completed", "final": "ok", "payload": {"n": 1}},
    {"workflow": "des", "token": "T.2", "status": "failed", "final": "bad", "payload": None},
]


def test_branches_all_holds_when_every_branch_matches():
    assert holds("branches.all(token != null)", branches=BRANCHES)
    assert not holds("branches.all(status == 'completed')", branches=BRANCHES)
    assert holds("branches.all(status == 'completed')", branches=BRANCHES[:1])


def test_branches_any_holds_when_one_branch_matches():
    assert holds("branches.any(payload.n == 1 and final == 'ok')", branches=BRANCHES)
    assert not holds("branches.any(payload.n == 2)", branches=BRANCHES)
    assert holds("branches.any(workflow == 'des' and payload.n == null)", branches=BRANCHES)


def test_branches_over_no_entries_follow_python_all_and_any():
    for branches in (None, [], "junk", {"a": 1}):
        assert holds("branches.all(status == 'x')", branches=branches)
        assert not holds("branches.any(status != 'x')", branches=branches)


def test_a_branch_body_can_read_the_context_and_counts():
    assert holds(
        "branches.any(status == 'failed' and count('e') < ctx['max'])",
        ctx={"max": 3},
        counts={"e": 2},
        branches=BRANCHES,
    )


@pytest.mark.parametrize(
    "data",
    [
        {"ctx": "string", "payload": 7, "counts": None, "branches": [1, None, "x"]},
        {"ctx": {"a": object()}, "payload": [1], "counts": "abc", "branches": 5},
        {"ctx": {"a": math.nan, "t": {1, 2}}, "payload": {"b": b"x"}, "counts": {"e": "x"}},
        {"ctx": {"a": [None], "t": ("a",)}, "payload": {"b": {"c": {}}}, "counts": {}},
    ],
)
def test_evaluate_never_raises_on_odd_data(data: dict[str, Any]):
    texts = [
        "ctx['a'] < 1 or ctx['a'] == ctx['t'] or ctx['a'] >= 'x'",
        "'a' in ctx['t'] or ctx['a'] not in ctx['t'] or payload.b.c",
        "count('e') > 1 or count('e') == payload.b or not ctx['a']['z']",
        "branches.any(payload.n > 1 or status) or branches.all(final in [1, null])",
    ]
    for text in texts:
        assert evaluate(parse(text), **data) in (True, False)


def test_a_nan_is_neither_equal_nor_ordered():
    ctx = {"a": math.nan}
    assert not holds("ctx['a'] == ctx['a'] or ctx['a'] < 1 or ctx['a'] >= 1", ctx=ctx)
