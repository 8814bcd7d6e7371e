"""The generated contract.py: it imports, names every state and event, and its models
accept exactly the data that the workflow's own models accept."""

from __future__ import annotations

import datetime
import enum
import importlib.util
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any, Literal

import msgspec
import pytest

from stateous import END, START, Workflow
from stateous.compiler.compile import compile_flow, compile_workflow
from stateous.compiler.contract import contract
from stateous.compiler.python_source import identifier
from stateous.model.graph_file import GraphFile, checksum
from tests.conftest import ROOT


class Colour(enum.Enum):
    RED = "red"
    GREEN = "green"


class Leaf(msgspec.Struct):
    value: int


class Tree(msgspec.Struct):
    name: str
    children: list[Tree] = []
    leaf: Leaf | None = None


class Cat(msgspec.Struct, tag_field="kind", tag="cat"):
    lives: int = 9


class Dog(msgspec.Struct, tag_field="kind", tag="dog"):
    good: bool = True


class Order(msgspec.Struct, forbid_unknown_fields=True):
    id: str
    count: Annotated[int, msgspec.Meta(ge=1)] = 1
    tags: list[str] = []
    prices: dict[str, float] = {}
    colour: Colour = Colour.RED
    size: Literal["s", "m", "l"] | None = None
    tree: Tree | None = None
    pet: Cat | Dog | None = None
    when: Annotated[datetime.datetime, msgspec.Meta(tz=True)] | None = None
    ref: uuid.UUID | None = None
    point: tuple[int, int] = (0, 0)
    class_: int = msgspec.field(default=0, name="class")
    dashed: str = msgspec.field(default="x", name="my-field")
    note: str | msgspec.UnsetType = msgspec.UNSET


class Note(msgspec.Struct):
    text: str = ""


class Later(msgspec.Struct, kw_only=True):
    first: int = 0
    second: str


def rich_flow() -> Workflow:
    flow = Workflow("shop-front", context=Order)
    pack = flow.state("pack")
    keyword_state = flow.state("class")
    flow.transition(START, pack)
    flow.transition(pack, keyword_state, on=flow.event("ship-it", payload=Tree))
    flow.transition(keyword_state, END, on=flow.event("import", payload=Later))
    return flow


@pytest.fixture
def load_contract(tmp_path: Path) -> Iterator[Any]:
    """Import contract text as a module of its own; forget it after the test."""
    names: list[str] = []

    def load(text: str) -> ModuleType:
        name = f"contract_{len(names)}_{id(tmp_path)}"
        path = tmp_path / f"{name}.py"
        path.write_text(text)
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        names.append(name)
        spec.loader.exec_module(module)
        return module

    yield load
    for name in names:
        sys.modules.pop(name, None)


def accepts(model: Any, data: Any) -> Any:
    """What the model makes of the data, as JSON values, or 'refused'."""
    try:
        return msgspec.to_builtins(msgspec.convert(data, model))
    except msgspec.ValidationError:
        return "refused"


def sdlc_graph() -> GraphFile:
    return compile_flow(ROOT / "examples" / "sdlc" / "flow.py")


def test_the_sdlc_contract_imports_from_its_folder(tmp_path: Path) -> None:
    (tmp_path / "contract.py").write_text(contract(sdlc_graph()).text)
    check = """
import msgspec
from contract import Tests, TicketContext, __checksum__, __workflow__, events, states
assert states.testing.emits == (events.passed, events.failed)
assert states.coding.emits == (events.done, events.stuck)
assert issubclass(events.passed.payload_type, msgspec.Struct)
tests = msgspec.convert({"passed": 1, "failed": 0}, events.passed.payload_type)
assert (tests.passed, tests.failed) == (1, 0)
assert events.done.payload_type is None
print(__workflow__, __checksum__, states.testing.name)
"""
    done = subprocess.run(
        [sys.executable, "-c", check],
        cwd=tmp_path,
        env={"PYTHONPATH": f"{tmp_path}:{ROOT}"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["sdlc", checksum(sdlc_graph()), "testing"]


def test_the_contract_starts_with_its_header_and_is_the_same_each_time() -> None:
    text = contract(sdlc_graph()).text
    assert text.startswith("# GENERATED from the `sdlc` workflow — do not edit.\n")
    assert "TicketContext = Context[Ticket]\n" in text
    assert text == contract(sdlc_graph()).text


@pytest.mark.parametrize(
    "data",
    [
        {"id": "a"},
        {"id": "a", "count": 0},
        {"id": "a", "count": 3, "tags": ["x", "y"], "prices": {"pen": 1.5, "ink": 2}},
        {"id": "a", "tags": [1]},
        {"id": "a", "colour": "green"},
        {"id": "a", "colour": "blue"},
        {"id": "a", "size": "m"},
        {"id": "a", "size": "xl"},
        {"id": "a", "size": None},
        {"id": "a", "tree": {"name": "t", "children": [{"name": "u", "leaf": {"value": 2}}]}},
        {"id": "a", "tree": {"name": "t", "children": [{"leaf": {"value": 2}}]}},
        {"id": "a", "pet": {"kind": "cat", "lives": 3}},
        {"id": "a", "pet": {"kind": "dog"}},
        {"id": "a", "pet": {"kind": "cow"}},
        {"id": "a", "when": "2025-02-03T04:05:06Z"},
        {"id": "a", "when": "yesterday"},
        {"id": "a", "ref": "12345678-1234-5678-1234-567812345678"},
        {"id": "a", "ref": "not-a-uuid"},
        {"id": "a", "point": [1, 2]},
        {"id": "a", "point": [1, 2, 3]},
        {"id": "a", "class": 4, "my-field": "y", "note": "n"},
        {"id": "a", "class_": 4},
        {"id": "a", "unknown": 1},
        {"count": 2},
        {"id": 5},
    ],
)
def test_a_generated_model_accepts_exactly_what_the_original_accepts(
    load_contract: Any, data: dict[str, Any]
) -> None:
    module = load_contract(contract(compile_workflow(rich_flow())).text)
    assert accepts(module.Order, data) == accepts(Order, data)


def test_keyword_only_models_recursive_models_and_payloads_keep_their_shape(
    load_contract: Any,
) -> None:
    module = load_contract(contract(compile_workflow(rich_flow())).text)
    assert accepts(module.Later, {"second": "s"}) == {"first": 0, "second": "s"}
    assert accepts(module.Later, {"first": 1}) == "refused"
    assert module.events.ship_it.name == "ship-it"
    assert module.events.ship_it.payload_type is module.Tree
    assert module.events.import_.payload_type is module.Later
    assert module.states.class_.name == "class"
    assert module.states.class_.emits == (module.events.import_,)
    assert module.states.pack.outcome({"event": "ship-it", "payload": {"name": "t"}}) == (
        module.events.ship_it(module.Tree(name="t"))
    )
    assert module.OrderContext.__origin__ is not None


def reviews_flow() -> Workflow:
    review = Workflow("design-review", context=Note)
    triage = review.state("triage")
    approved = review.event("approved")
    review.transition(START, triage)
    review.transition(triage, END, on=approved)
    plain = Workflow("lint")
    check = plain.state("check")
    plain.transition(START, check)
    plain.transition(check, END, on=plain.event("clean"))
    flow = Workflow("sdlc", context=Tree)
    coding = flow.state("coding")
    reviews = flow.state("reviews", parallel=[review, plain], inputs=[])
    flow.transition(START, coding)
    flow.transition(coding, reviews, on=flow.event("done"))
    flow.transition(reviews, END, on="joined")
    return flow


def test_child_workflows_get_classes_of_their_own(load_contract: Any) -> None:
    made = contract(compile_workflow(reviews_flow()))
    module = load_contract(made.text)
    triage = module.states.design_review.triage
    assert triage.name == "design-review/triage"
    assert triage.emits == (module.events.design_review.approved,)
    assert module.events.design_review.approved.name == "approved"
    assert module.states.lint.check.emits == (module.events.lint.clean,)
    assert not hasattr(module.states, "reviews")
    assert module.NoteContext.__args__ == (module.Note,)
    assert module.LintContext.__args__ == (dict[str, Any],)
    assert [(scope.workflow, state) for scope, state in made.task_states()] == [
        ("sdlc", "coding"),
        ("design-review", "triage"),
        ("lint", "check"),
    ]


@pytest.mark.parametrize(
    ("name", "expected"),
    [("coding", "coding"), ("design-review", "design_review"), ("class", "class_")],
)
def test_names_become_python_identifiers(name: str, expected: str) -> None:
    assert identifier(name) == expected


def test_pydantic_models_with_recursion_and_a_discriminator_round_trip(
    load_contract: Any,
) -> None:
    pydantic = pytest.importorskip("pydantic")
    namespace: dict[str, Any] = {}
    exec(compile(PYDANTIC_MODELS, "pydantic_models", "exec", dont_inherit=True), namespace)
    node, pet = namespace["Node"], namespace["Pet"]
    flow = Workflow("pets", context=node)
    feed = flow.state("feed")
    flow.transition(START, feed)
    flow.transition(feed, END, on=flow.event("fed", payload=pet))
    module = load_contract(contract(compile_workflow(flow)).text)
    samples = [
        (node, module.Node, {"name": "a", "kids": [{"name": "b", "mode": "b"}]}),
        (node, module.Node, {"name": "a", "mode": "c"}),
        (pet, module.Pet, {"pet": {"kind": "cat", "lives": 2}, "ratio": 1}),
        (pet, module.Pet, {"pet": {"kind": "dog"}, "n": None}),
        (pet, module.Pet, {"pet": {"kind": "cow"}}),
        (pet, module.Pet, {"pet": {"kind": "dog"}, "ratio": 2}),
        (pet, module.Pet, {"pet": {"kind": "dog"}, "extra": 1}),
    ]
    for original, generated, data in samples:
        try:
            expected: Any = original.model_validate(data).model_dump()
        except pydantic.ValidationError:
            expected = "refused"
        assert accepts(generated, data) == expected, data


PYDANTIC_MODELS = """
from typing import Literal

import pydantic


class Node(pydantic.BaseModel):
    name: str
    kids: list["Node"] = []
    mode: Literal["a", "b"] = "a"


class Cat(pydantic.BaseModel):
    kind: Literal["cat"] = "cat"
    lives: int = 9


class Dog(pydantic.BaseModel):
    kind: Literal["dog"] = "dog"


class Pet(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    pet: Cat | Dog = pydantic.Field(discriminator="kind")
    n: int | None = None
    ratio: float = pydantic.Field(default=0.5, ge=0, le=1)


Node.model_rebuild(_types_namespace=globals())
"""
