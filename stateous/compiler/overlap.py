"""The overlap proof: can two guards on one state and one event both be true?

Both guards are joined and put in disjunctive normal form, with `not` kept on
the atoms (null makes `not (x < 5)` differ from `x >= 5`). In one conjunction,
the atoms on different fields are independent, so each field is solved alone,
over a finite set of values that meets every region the guards' constants cut
out of its domain; each atom is tested with the real evaluator. The proof must
be sound: it never says "exclusive" while some data makes both guards true.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from stateous.compiler.fields import Domain
from stateous.model.guard_eval import evaluate
from stateous.model.guards import (
    And,
    Compare,
    CountRef,
    CtxRef,
    Guard,
    Literal,
    Node,
    Not,
    Or,
    PayloadRef,
    Ref,
    Truth,
)

#: More conjunctions than this and the proof gives up.
MAX_TERMS = 4096

_REFS = (CtxRef, PayloadRef, CountRef)
_ORDERING = frozenset(("<", "<=", ">", ">="))
_NOTHING = object()


@dataclass(frozen=True, slots=True)
class Overlap:
    """Values that make both guards true; fields the proof did not need are left out."""

    example: tuple[tuple[Ref, Any], ...]

    def describe(self) -> str:
        """Spell the example for an error message."""
        if not self.example:
            return "any data"
        return ", ".join(f"{ref.label} = {value!r}" for ref, value in self.example)

    def data(self) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        """Build (ctx, payload, counts) from the example, to evaluate the guards on."""
        return _data(self.example)


@dataclass(frozen=True, slots=True)
class Unprovable:
    """The proof cannot decide; `reason` completes "the guards ...", e.g. "uses branches"."""

    reason: str


@dataclass(frozen=True, slots=True)
class _Atom:
    """A comparison or bare reference on one field, with its sign after pushing `not` in."""

    node: Node
    ref: Ref
    positive: bool


class _GiveUp(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def check_pair(a: Guard, b: Guard, domain: Callable[[Ref], Domain]) -> Overlap | Unprovable | None:
    """Prove that two guards are never both true (None), or give data for which they are."""
    if a.uses_branches or b.uses_branches:
        return Unprovable("uses branches")
    refs = list(dict.fromkeys((*a.refs, *b.refs)))
    if _nested(refs):
        return Unprovable("reads both a field and a field inside it")
    domains = {ref: domain(ref) for ref in refs}
    if _orders_a_list(a.root, domains) or _orders_a_list(b.root, domains):
        return Unprovable("orders a list")
    try:
        terms = _dnf(And((a.root, b.root)), positive=True)
    except _GiveUp as ex:
        return Unprovable(ex.reason)
    for term in terms:
        example = _solve(term, refs, domains)
        if example is not None:
            return Overlap(example)
    return None


def _orders_a_list(node: Node, domains: dict[Ref, Domain]) -> bool:
    """Tell whether a condition orders (`<`, `<=`, `>`, `>=`) a list, written or a field's:
    always false when it runs, which the guard's author cannot have meant."""
    match node:
        case Compare(op=op, left=left, right=right) if op in _ORDERING:
            return any(_a_list(side, domains) for side in (left, right))
        case Compare(left=left, right=right):
            return _orders_a_list(left, domains) or _orders_a_list(right, domains)
        case Not(operand=operand) | Truth(operand=operand):
            return _orders_a_list(operand, domains)
        case And(items=items) | Or(items=items):
            return any(_orders_a_list(item, domains) for item in items)
    return False


def _a_list(side: Node, domains: dict[Ref, Domain]) -> bool:
    if isinstance(side, Literal):
        return isinstance(side.value, list)
    found = domains.get(side) if isinstance(side, _REFS) else None
    return found is not None and "array" in found.kinds and found.kinds <= {"array", "null"}


def _nested(refs: list[Ref]) -> bool:
    paths = [(type(ref), ref.path) for ref in refs if isinstance(ref, CtxRef | PayloadRef)]
    return any(
        kind == other_kind and path != other and other[: len(path)] == path
        for kind, path in paths
        for other_kind, other in paths
    )


def _dnf(node: Node, *, positive: bool) -> list[tuple[_Atom, ...]]:
    """Turn a condition into a list of conjunctions of signed atoms; [] is false."""
    match node:
        case Not(operand=operand):
            return _dnf(operand, positive=not positive)
        case And(items=items) | Or(items=items):
            parts = [_dnf(item, positive=positive) for item in items]
            # An And, or a negated Or, needs every part; the others need any one.
            if isinstance(node, And) == positive:
                return _product(parts)
            return _limit([term for part in parts for term in part])
        case Literal(value=value):
            return [()] if (value is True) == positive else []
        case _:
            ref = _atom_ref(node)
            if ref is None:
                return [()] if _true_for(node, {}) == positive else []
            return [(_Atom(node, ref, positive),)]


def _product(parts: list[list[tuple[_Atom, ...]]]) -> list[tuple[_Atom, ...]]:
    terms: list[tuple[_Atom, ...]] = [()]
    for part in parts:
        terms = _limit(left + right for left in terms for right in part)
    return terms


def _limit(terms: Iterable[tuple[_Atom, ...]]) -> list[tuple[_Atom, ...]]:
    """Collect conjunctions, giving up as soon as there are too many."""
    result: list[tuple[_Atom, ...]] = []
    for term in terms:
        result.append(term)
        if len(result) > MAX_TERMS:
            raise _GiveUp("is too large to check")
    return result


def _atom_ref(node: Node) -> Ref | None:
    """Name the one field an atom reads, or None for a constant atom."""
    if isinstance(node, Truth):
        return node.operand
    assert isinstance(node, Compare)
    sides = (node.left, node.right)
    refs = [side for side in sides if isinstance(side, _REFS)]
    if len(refs) == 2:
        raise _GiveUp("compares two values with each other")
    if refs and all(isinstance(side, (*_REFS, Literal)) for side in sides):
        return refs[0]
    if _reads_a_field(node):
        raise _GiveUp("compares the result of a condition with a value")
    return None


def _reads_a_field(node: Node) -> bool:
    match node:
        case CtxRef() | PayloadRef() | CountRef():
            return True
        case Compare(left=left, right=right):
            return _reads_a_field(left) or _reads_a_field(right)
        case Not(operand=operand) | Truth(operand=operand):
            return _reads_a_field(operand)
        case And(items=items) | Or(items=items):
            return any(map(_reads_a_field, items))
    return False


def _true_for(node: Node, example: dict[Ref, Any]) -> bool:
    ctx, payload, counts = _data(tuple(example.items()))
    guard = Guard(text="", root=node, refs=(), uses_branches=False, counted=())
    return evaluate(guard, ctx=ctx, payload=payload, counts=counts)


def _data(
    example: tuple[tuple[Ref, Any], ...],
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    ctx: dict[str, Any] = {}
    payload: dict[str, Any] = {}
    counts: dict[str, Any] = {}
    for ref, value in example:
        if isinstance(ref, CountRef):
            counts[ref.event] = value
            continue
        target = ctx if isinstance(ref, CtxRef) else payload
        for key in ref.path[:-1]:
            target = target.setdefault(key, {})
        target[ref.path[-1]] = value
    return ctx, payload, counts


def _solve(
    term: tuple[_Atom, ...], refs: list[Ref], domains: dict[Ref, Domain]
) -> tuple[tuple[Ref, Any], ...] | None:
    """Find a value for each field of the conjunction, or None if one has none."""
    example: list[tuple[Ref, Any]] = []
    for ref in refs:
        atoms = [atom for atom in term if atom.ref == ref]
        if not atoms:
            continue
        fits = (
            value
            for value in _candidates(domains[ref], atoms)
            if all(_true_for(atom.node, {ref: value}) == atom.positive for atom in atoms)
        )
        found = next(fits, _NOTHING)
        if found is _NOTHING:
            return None
        example.append((ref, found))
    return tuple(example)


def _candidates(domain: Domain, atoms: list[_Atom]) -> list[Any]:
    """List values of the domain that meet every region the atoms' constants cut out."""
    if domain.choices is not None:
        return list(domain.choices)
    constants = [value for atom in atoms for value in _constants(atom.node)]
    kinds = domain.kinds
    values: list[Any] = []
    if "boolean" in kinds:
        values += [True, False]
    if kinds & {"integer", "number"}:
        numbers = sorted({value for value in constants if _is_number(value)})
        values += _numbers(numbers, floats="number" in kinds, minimum=domain.minimum)
    strings = sorted({value for value in constants if isinstance(value, str)})
    if "string" in kinds:
        values += [*strings, *(text + "\x00" for text in strings), ""]
    if "array" in kinds:
        members = [value for atom in atoms if (value := _member(atom)) is not _NOTHING]
        values += [[], *(value for value in constants if isinstance(value, list))]
        values += [members, [*members, _fresh(strings)]]
    if "object" in kinds:
        values.append({})
    if "null" in kinds:
        values.append(None)
    return values


def _constants(node: Node) -> Iterator[Any]:
    """Yield every constant of an atom, and every item of its lists, at any depth."""
    if isinstance(node, Compare):
        for side in (node.left, node.right):
            if isinstance(side, Literal):
                yield from _flatten(side.value)


def _flatten(value: Any) -> Iterator[Any]:
    yield value
    if isinstance(value, list):
        for item in value:
            yield from _flatten(item)


def _member(atom: _Atom) -> Any:
    """Return the constant an atom requires inside a list field, or _NOTHING."""
    node = atom.node
    if (
        isinstance(node, Compare)
        and node.op in ("in", "not in")
        and isinstance(node.left, Literal)
        and (node.op == "in") == atom.positive
    ):
        return node.left.value
    return _NOTHING


def _fresh(strings: list[str]) -> str:
    """Return a string equal to no constant, to pad a list past every list constant."""
    fresh = "\x00"
    while fresh in strings:
        fresh += "\x00"
    return fresh


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _numbers(constants: list[Any], *, floats: bool, minimum: int | None) -> list[Any]:
    """Each constant, the integers next to it, and a float in each gap free of integers."""
    values: list[Any] = []
    for constant in constants:
        if constant == math.floor(constant):
            values.append(math.floor(constant))
        elif floats:
            values.append(constant)
        values += [math.floor(constant) + 1, math.ceil(constant) - 1]
    if not constants:
        values.append(0)
    if floats:
        for low, high in pairwise(constants):
            middle = (low + high) / 2
            if math.floor(low) + 1 >= high and low < middle < high:
                values.append(middle)
    if minimum is None:
        return values
    return [value for value in values if value >= minimum] + [minimum]
