"""The overlap proof: examples for guards that can both be true, silence for those that cannot."""

from __future__ import annotations

import functools
import itertools
import random
from typing import Any, Literal

import msgspec
import pytest

from stateous.compiler.fields import Domain, domain_of, field_schema
from stateous.compiler.overlap import MAX_TERMS, Overlap, Unprovable, check_pair
from stateous.model.guard_eval import evaluate
from stateous.model.guards import CountRef, CtxRef, PayloadRef, Ref, parse


class Address(msgspec.Struct):
    city: str


class Context(msgspec.Struct):
    amount: int = 0
    n: int | None = None
    m: int = 0
    name: str = ""
    note: str | None = None
    kind: Literal["a", "b"] = "a"
    level: Literal[1, 2] | None = None
    flag: bool = False
    rate: float = 0.0
    tags: list[str] = []
    address: Address | None = None


class Payload(msgspec.Struct):
    approved: bool = False
    note: str | None = None


def schema_of(model: type) -> dict[str, Any]:
    (_,), components = msgspec.json.schema_components([model], ref_template="#/$defs/{name}")
    name = model.__name__
    return {**components[name], "$defs": {k: v for k, v in components.items() if k != name}}


CONTEXT = schema_of(Context)
PAYLOAD = schema_of(Payload)


def domain(ref: Ref) -> Domain:
    """Domains as the compiler derives them, for an event named 'failed'."""
    if isinstance(ref, CountRef):
        return Domain.counter(1 if ref.event == "failed" else 0)
    schema = CONTEXT if isinstance(ref, CtxRef) else PAYLOAD
    field = field_schema(schema, ref.path)
    assert field is not None, ref
    return domain_of(field, schema)


parsed = functools.cache(parse)


def both_true(a: str, b: str, overlap: Overlap) -> bool:
    ctx, payload, counts = overlap.data()
    return all(evaluate(parsed(text), ctx=ctx, payload=payload, counts=counts) for text in (a, b))


def overlap_of(a: str, b: str) -> Overlap:
    """Check the pair, require an overlap, and require that its data makes both true."""
    verdict = check_pair(parse(a), parse(b), domain)
    assert isinstance(verdict, Overlap), verdict
    assert both_true(a, b, verdict), verdict
    return verdict


def exclusive(a: str, b: str) -> bool:
    return check_pair(parse(a), parse(b), domain) is None


def test_two_lower_bounds_overlap_at_the_first_integer_above_both():
    overlap = overlap_of("ctx['amount'] > 100", "ctx['amount'] > 50")
    assert overlap.describe() == "ctx['amount'] = 101"
    assert overlap.example == ((CtxRef(("amount",)), 101),)


def test_two_fields_give_one_value_each_in_order_of_appearance():
    overlap = overlap_of("payload.approved == true", "payload.note != ''")
    assert overlap.describe() == "payload.approved = True, payload.note = '\\x00'"


def test_an_upper_and_a_lower_bound_that_meet_are_exclusive():
    assert exclusive("ctx['amount'] > 100", "ctx['amount'] <= 100")
    assert exclusive("ctx['amount'] >= 3", "ctx['amount'] < 3")


def test_bounds_with_no_integer_between_are_exclusive_only_for_an_int_field():
    assert exclusive("ctx['amount'] > 1", "ctx['amount'] < 2")
    assert overlap_of("ctx['rate'] > 1", "ctx['rate'] < 2").describe() == "ctx['rate'] = 1.5"
    assert exclusive("ctx['amount'] > 1.5", "ctx['amount'] < 2")
    assert overlap_of("ctx['rate'] > 1.5", "ctx['rate'] < 2").describe() == "ctx['rate'] = 1.75"


def test_huge_and_close_constants_keep_their_gaps():
    big = 10**299
    assert overlap_of(f"ctx['rate'] > {big}", "true").describe() == f"ctx['rate'] = {big + 1}"
    assert exclusive(f"ctx['amount'] > {big}", f"ctx['amount'] < {big + 1}")
    (example,) = overlap_of("ctx['rate'] > 0.1", "ctx['rate'] < 0.2").example
    assert 0.1 < example[1] < 0.2


def test_a_fractional_bound_on_an_int_field_rounds_to_its_neighbours():
    assert overlap_of("ctx['amount'] > 2.5", "ctx['amount'] < 4").describe() == "ctx['amount'] = 3"


def test_different_string_constants_are_exclusive():
    assert exclusive("ctx['name'] == 'a'", "ctx['name'] == 'b'")
    assert exclusive("payload.note == 'a'", "payload.note == 'b'")


def test_in_a_list_and_not_in_it_are_exclusive():
    assert exclusive("ctx['name'] in ['a', 'b']", "ctx['name'] not in ['a', 'b']")
    assert exclusive("ctx['note'] in ['a', 'b']", "ctx['note'] not in ['a', 'b']")


def test_in_a_list_and_different_from_one_item_overlap():
    overlap = overlap_of("ctx['name'] in ['a', 'b']", "ctx['name'] != 'a'")
    assert overlap.describe() == "ctx['name'] = 'b'"


def test_a_count_below_and_at_a_limit_are_exclusive():
    assert exclusive("count('failed') < 3", "count('failed') >= 3")


def test_a_count_of_the_routed_event_is_at_least_one():
    assert exclusive("count('failed') == 0", "count('failed') < 5")
    assert overlap_of("count('failed') < 3", "count('failed') <= 1").describe() == (
        "count('failed') = 1"
    )
    overlap = overlap_of("count('other') == 0", "count('other') < 5")
    assert overlap.describe() == "count('other') = 0"


def test_a_count_below_a_negative_number_never_holds():
    assert exclusive("count('other') > -5", "count('other') < -1")
    assert overlap_of("count('other') > -5", "count('other') < 1").describe() == (
        "count('other') = 0"
    )


def test_a_negated_comparison_and_the_comparison_are_exclusive():
    assert exclusive("not (ctx['n'] < 5)", "ctx['n'] < 5")
    assert exclusive("not (ctx['m'] < 5)", "ctx['m'] < 5")


def test_two_negated_comparisons_overlap_on_null_only_for_a_nullable_field():
    overlap = overlap_of("not (ctx['n'] < 5)", "not (ctx['n'] >= 5)")
    assert overlap.describe() == "ctx['n'] = None"
    assert exclusive("not (ctx['m'] < 5)", "not (ctx['m'] >= 5)")
    overlap = overlap_of("not (ctx['n'] >= 5)", "not (ctx['n'] < 5)")
    assert overlap.describe() == "ctx['n'] = None"
    assert exclusive("not (ctx['m'] >= 5)", "not (ctx['m'] < 5)")


def test_a_negated_bound_and_the_opposite_bound_overlap_at_the_limit():
    assert overlap_of("not (ctx['n'] < 5)", "ctx['n'] >= 5").describe() == "ctx['n'] = 5"
    assert overlap_of("not (ctx['m'] < 5)", "ctx['m'] >= 5").describe() == "ctx['m'] = 5"


def test_an_enum_field_holds_only_its_choices():
    assert exclusive("ctx['kind'] != 'a'", "ctx['kind'] != 'b'")
    assert (
        overlap_of("ctx['name'] != 'a'", "ctx['name'] != 'b'").describe()
        == "ctx['name'] = 'a\\x00'"
    )
    assert overlap_of("ctx['kind'] == 'a'", "ctx['kind'] != 'b'").describe() == "ctx['kind'] = 'a'"
    assert exclusive("ctx['kind'] == 'a'", "ctx['kind'] == 'b'")
    assert exclusive("ctx['kind'] == 'c'", "true")


def test_a_nullable_enum_can_be_null():
    overlap = overlap_of("ctx['level'] != 1", "ctx['level'] != 2")
    assert overlap.describe() == "ctx['level'] = None"


def test_a_bool_field_is_true_or_false():
    assert exclusive("payload.approved", "not payload.approved")
    assert exclusive("payload.approved != true", "payload.approved != false")
    assert exclusive("payload.approved == true", "payload.approved == false")
    overlap = overlap_of("payload.approved == true", "payload.approved != false")
    assert overlap.describe() == "payload.approved = True"
    assert overlap_of("ctx['flag']", "ctx['flag'] == true").describe() == "ctx['flag'] = True"


def test_a_bare_reference_on_a_non_bool_field_is_never_true():
    assert exclusive("ctx['note']", "true")
    assert exclusive("ctx['amount']", "ctx['amount'] > 1")


def test_list_membership_needs_a_list_that_holds_the_values():
    overlap = overlap_of("'a' in ctx['tags']", "ctx['tags'] != ['a']")
    assert overlap.describe() == "ctx['tags'] = ['a', '\\x00']"
    assert overlap_of("'a' in ctx['tags']", "'b' in ctx['tags']").describe() == (
        "ctx['tags'] = ['a', 'b']"
    )
    assert exclusive("'a' in ctx['tags']", "'a' not in ctx['tags']")
    assert exclusive("ctx['tags'] == []", "'a' in ctx['tags']")


def test_an_example_leaves_out_fields_the_proof_did_not_need():
    overlap = overlap_of("ctx['amount'] > 1 or ctx['name'] == 'x'", "ctx['amount'] > 5")
    assert overlap.describe() == "ctx['amount'] = 6"


def test_an_example_can_mix_context_payload_and_counts():
    overlap = overlap_of(
        "ctx['address']['city'] == 'Oslo' and count('failed') > 2",
        "payload.note == null and ctx['amount'] < 0",
    )
    assert overlap.describe() == (
        "ctx['address']['city'] = 'Oslo', count('failed') = 3, "
        "payload.note = None, ctx['amount'] = -1"
    )
    assert overlap.data() == (
        {"address": {"city": "Oslo"}, "amount": -1},
        {"note": None},
        {"failed": 3},
    )


def test_a_field_inside_a_nullable_model_can_be_null():
    overlap = overlap_of("ctx['address']['city'] == null", "ctx['amount'] == 0")
    assert overlap.describe() == "ctx['address']['city'] = None, ctx['amount'] = 0"


def test_constant_guards_are_decided_by_their_value():
    assert exclusive("false", "ctx['amount'] > 1")
    assert exclusive("1 > 2", "ctx['amount'] > 1")
    assert overlap_of("true", "ctx['amount'] > 1").describe() == "ctx['amount'] = 2"
    assert overlap_of("1 == 1.0", "true").describe() == "any data"


@pytest.mark.parametrize(
    ("a", "b", "reason"),
    [
        ("ctx['amount'] > ctx['m']", "ctx['amount'] < 0", "compares two values with each other"),
        ("ctx['name'] in ctx['tags']", "true", "compares two values with each other"),
        ("ctx['tags'] < ['b']", "ctx['amount'] == 3", "orders a list"),
        ("ctx['amount'] == 3", "not (ctx['tags'] >= 1)", "orders a list"),
        ("ctx['amount'] > [1]", "ctx['amount'] < 0", "orders a list"),
        ("branches.all(status == 'completed')", "ctx['amount'] > 1", "uses branches"),
        ("ctx['amount'] > 1", "branches.any(final == 'x')", "uses branches"),
        ("(ctx['amount'] > 1) == true", "ctx['amount'] < 0", "compares the result of a condition"),
        (
            "ctx['address'] == null",
            "ctx['address']['city'] == 'x'",
            "reads both a field and a field inside it",
        ),
        (
            " or ".join(f"ctx['amount'] == {index}" for index in range(70)),
            " or ".join(f"ctx['m'] == {index}" for index in range(70)),
            "is too large to check",
        ),
    ],
)
def test_some_pairs_cannot_be_proven(a: str, b: str, reason: str):
    verdict = check_pair(parse(a), parse(b), domain)
    assert isinstance(verdict, Unprovable)
    assert verdict.reason.startswith(reason)


def test_the_limit_on_conjunctions_is_generous_for_real_guards():
    assert MAX_TERMS >= 1000
    a = " or ".join(f"ctx['amount'] == {index}" for index in range(30))
    b = " or ".join(f"ctx['m'] == {index}" for index in range(30))
    assert overlap_of(a, b).describe() == "ctx['amount'] = 0, ctx['m'] = 0"


# Randomized soundness, with a fixed seed so that a failure reproduces.

FIELDS: dict[str, tuple[Ref, list[Any]]] = {
    "int": (CtxRef(("amount",)), list(range(-3, 13))),
    "nullable int": (CtxRef(("n",)), [*range(-3, 13), None]),
    "str": (CtxRef(("name",)), ["", "a", "a\x00", "ab", "b", "c", "zz"]),
    "nullable str": (PayloadRef(("note",)), ["", "a", "a\x00", "ab", "b", "c", "zz", None]),
    "bool": (PayloadRef(("approved",)), [True, False]),
    "count": (CountRef("failed"), list(range(1, 13))),
    "enum": (CtxRef(("kind",)), ["a", "b"]),
    "list": (CtxRef(("tags",)), [[], ["a"], ["b"], ["a", "b"], ["b", "a"], ["a", "a"], ["c"]]),
}
NUMBERS = [-2, 0, 1, 2, 3, 5, 8, 2.5]
STRINGS = ["", "a", "ab", "b", "c"]


def random_atom(rng: random.Random, kind: str) -> str:
    ref, _ = FIELDS[kind]
    label = ref.label
    if kind == "list":
        text = rng.choice(STRINGS)
        return rng.choice(
            [
                f"{text!r} in {label}",
                f"{text!r} not in {label}",
                f"{label} == []",
                f"{label} == ['a']",
                f"{label} != ['a', 'b']",
            ]
        )
    if kind == "bool":
        return rng.choice([label, f"{label} == true", f"{label} != false", f"{label} == null"])
    pool = STRINGS if "str" in kind or kind == "enum" else NUMBERS
    odd = rng.choice(["null", "true", repr(rng.choice(NUMBERS + STRINGS))])
    constant = repr(rng.choice(pool)) if rng.random() < 0.85 else odd
    if rng.random() < 0.2:
        items = ", ".join(repr(item) for item in rng.sample(pool, 2))
        return f"{label} {rng.choice(['in', 'not in'])} [{items}]"
    return f"{label} {rng.choice(['<', '<=', '>', '>=', '==', '!='])} {constant}"


def random_guard(rng: random.Random, kinds: list[str], depth: int) -> str:
    roll = rng.random()
    if depth == 0 or roll < 0.35:
        return random_atom(rng, rng.choice(kinds))
    if roll < 0.5:
        return f"not ({random_guard(rng, kinds, depth - 1)})"
    joiner = rng.choice([" and ", " or "])
    parts = [random_guard(rng, kinds, depth - 1) for _ in range(rng.choice([2, 3]))]
    return joiner.join(f"({part})" for part in parts)


def admitted(value: Any, allowed: Domain) -> bool:
    if allowed.choices is not None:
        return any(value == choice and type(value) is type(choice) for choice in allowed.choices)
    kind = {type(None): "null", bool: "boolean", int: "integer", float: "number"}.get(
        type(value), {str: "string", list: "array", dict: "object"}.get(type(value))
    )
    if kind == "integer" and "number" in allowed.kinds:
        kind = "number"
    return kind in allowed.kinds and (allowed.minimum is None or value >= allowed.minimum)


def test_random_pairs_are_judged_soundly():
    rng = random.Random(20240611)
    verdicts = {"exclusive": 0, "overlap": 0}
    for _ in range(600):
        kinds = rng.sample(sorted(FIELDS), rng.choice([2, 3]))
        a, b = (random_guard(rng, kinds, 2) for _ in range(2))
        verdict = check_pair(parse(a), parse(b), domain)
        if isinstance(verdict, Overlap):
            verdicts["overlap"] += 1
            assert both_true(a, b, verdict), (a, b, verdict)
            assert all(admitted(value, domain(ref)) for ref, value in verdict.example)
            continue
        assert verdict is None, (a, b, verdict)
        verdicts["exclusive"] += 1
        refs = [FIELDS[kind][0] for kind in kinds]
        for values in itertools.product(*(FIELDS[kind][1] for kind in kinds)):
            witness = Overlap(tuple(zip(refs, values, strict=True)))
            assert not both_true(a, b, witness), (a, b, witness.describe())
    assert min(verdicts.values()) > 100, verdicts
