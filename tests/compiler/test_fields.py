"""Field lookup and value domains, on the schemas that msgspec and pydantic really emit."""

from __future__ import annotations

from typing import Any, Literal

import msgspec
import pydantic
import pytest

from stateous.compiler.fields import Domain, domain_of, field_schema


class Address(msgspec.Struct):
    city: str


class Order(msgspec.Struct):
    title: str
    amount: int = 0
    rate: float = 1.0
    note: str | None = None
    kind: Literal["a", "b"] = "a"
    tags: list[str] = []
    address: Address | None = None
    approved: bool = False
    extra: dict[str, Any] = {}
    labels: dict[str, str] = {}
    level: Literal[1, 2] | None = None
    home: Address = msgspec.field(default_factory=lambda: Address("x"))


class PydanticAddress(pydantic.BaseModel):
    city: str


class PydanticOrder(pydantic.BaseModel):
    title: str
    amount: int = 0
    rate: float = 1.0
    note: str | None = None
    kind: Literal["a", "b"] = "a"
    tags: list[str] = []
    address: PydanticAddress | None = None
    approved: bool = False
    extra: dict[str, Any] = {}
    labels: dict[str, str] = {}
    level: Literal[1, 2] | None = None
    home: PydanticAddress = PydanticAddress(city="x")
    fixed: Literal[7] = 7


def msgspec_schema(model: type) -> dict[str, Any]:
    (_,), components = msgspec.json.schema_components([model], ref_template="#/$defs/{name}")
    name = model.__name__
    return {**components[name], "$defs": {k: v for k, v in components.items() if k != name}}


SCHEMAS = {
    "msgspec": msgspec_schema(Order),
    "pydantic": PydanticOrder.model_json_schema(),
}


@pytest.fixture(params=sorted(SCHEMAS))
def schema(request: pytest.FixtureRequest) -> dict[str, Any]:
    return SCHEMAS[request.param]


def domain(schema: dict[str, Any], *path: str) -> Domain:
    field = field_schema(schema, path)
    assert field is not None, path
    return domain_of(field, schema)


def kinds(*names: str) -> frozenset[str]:
    return frozenset(names)


def test_a_top_level_field_is_found(schema: dict[str, Any]):
    assert field_schema(schema, ["amount"])["type"] == "integer"
    assert field_schema(schema, ["title"])["type"] == "string"


def test_a_missing_field_is_none(schema: dict[str, Any]):
    assert field_schema(schema, ["missing"]) is None
    assert field_schema(schema, ["amount", "deeper"]) is None
    assert field_schema(schema, ["tags", "0"]) is None
    assert field_schema(schema, ["address", "street"]) is None
    assert field_schema(schema, ["home", "street"]) is None


def test_an_empty_path_is_the_whole_schema(schema: dict[str, Any]):
    assert field_schema(schema, []) is schema


def test_a_field_of_a_referenced_model_is_found(schema: dict[str, Any]):
    assert field_schema(schema, ["home", "city"])["type"] == "string"
    assert domain(schema, "home", "city") == Domain(kinds("string"))


def test_a_field_through_a_nullable_model_may_be_null(schema: dict[str, Any]):
    assert domain(schema, "address", "city") == Domain(kinds("string", "null"))


def test_a_free_form_mapping_accepts_any_key_and_its_value_may_be_anything(
    schema: dict[str, Any],
):
    assert field_schema(schema, ["extra", "anything"]) == {}
    assert field_schema(schema, ["extra", "a", "b"]) == {}
    assert domain(schema, "extra", "anything") == Domain.anything()


def test_a_key_of_a_typed_mapping_may_be_absent_so_it_may_be_null(schema: dict[str, Any]):
    assert domain(schema, "labels", "any") == Domain(kinds("string", "null"))
    assert field_schema(schema, ["labels", "any", "deeper"]) is None


def test_an_empty_schema_accepts_any_key():
    assert field_schema({}, ["a", "b"]) == {}


def test_an_object_closed_by_additional_properties_false_has_only_its_properties():
    schema = {"type": "object", "additionalProperties": False}
    assert field_schema(schema, ["a"]) is None


def test_a_union_of_models_has_the_fields_of_either_and_null_where_one_lacks_it():
    schema = {
        "anyOf": [{"$ref": "#/$defs/A"}, {"$ref": "#/$defs/B"}],
        "$defs": {
            "A": {"type": "object", "properties": {"x": {"type": "integer"}}},
            "B": {
                "type": "object",
                "properties": {"x": {"type": "string"}, "y": {"type": "boolean"}},
            },
        },
    }
    assert domain(schema, "x") == Domain(kinds("integer", "string"))
    assert domain(schema, "y") == Domain(kinds("boolean", "null"))
    assert field_schema(schema, ["z"]) is None


def test_a_dangling_reference_finds_nothing():
    assert field_schema({"$ref": "#/$defs/Gone"}, ["a"]) is None
    assert field_schema({"$ref": "http://elsewhere"}, ["a"]) is None


def test_domains_follow_the_declared_types(schema: dict[str, Any]):
    assert domain(schema, "amount") == Domain(kinds("integer"))
    assert domain(schema, "rate") == Domain(kinds("number"))
    assert domain(schema, "title") == Domain(kinds("string"))
    assert domain(schema, "approved") == Domain(kinds("boolean"))
    assert domain(schema, "tags") == Domain(kinds("array"))
    assert domain(schema, "extra") == Domain(kinds("object"))
    assert domain(schema, "home") == Domain(kinds("object"))


def test_a_nullable_field_adds_null(schema: dict[str, Any]):
    assert domain(schema, "note") == Domain(kinds("string", "null"))
    assert domain(schema, "address") == Domain(kinds("object", "null"))


def test_an_enum_field_holds_exactly_its_choices(schema: dict[str, Any]):
    kind = domain(schema, "kind")
    assert kind.choices == ("a", "b")
    assert kind.kinds == kinds("string")


def test_a_nullable_enum_keeps_its_choices_and_adds_null(schema: dict[str, Any]):
    level = domain(schema, "level")
    assert level.choices == (1, 2, None)
    assert level.kinds == kinds("integer", "null")


def test_a_const_is_a_single_choice():
    schema = PydanticOrder.model_json_schema()
    assert domain(schema, "fixed").choices == (7,)


def test_a_schema_without_a_type_admits_anything():
    assert domain_of({}, {}) == Domain.anything()
    assert domain_of({"type": "mystery"}, {}) == Domain.anything()
    assert domain_of({"$ref": "#/$defs/Gone"}, {}) == Domain.anything()


def test_a_type_list_admits_each_listed_kind():
    assert domain_of({"type": ["integer", "null"]}, {}) == Domain(kinds("integer", "null"))


def test_an_enum_merges_with_booleans_as_choices():
    merged = domain_of({"anyOf": [{"enum": ["x"]}, {"type": "boolean"}]}, {})
    assert merged.choices == ("x", True, False)


def test_an_enum_merged_with_an_open_kind_loses_its_choices():
    merged = domain_of({"oneOf": [{"enum": ["x"]}, {"type": "integer"}]}, {})
    assert merged == Domain(kinds("string", "integer"))


def test_a_referenced_enum_component_keeps_its_choices():
    root = {"$defs": {"Color": {"enum": ["red", "blue"]}}}
    assert domain_of({"$ref": "#/$defs/Color"}, root).choices == ("red", "blue")


def test_anything_admits_every_kind():
    assert Domain.anything().kinds == kinds(
        "null", "boolean", "integer", "number", "string", "array", "object"
    )


def test_a_counter_is_the_integers_from_its_minimum():
    assert Domain.counter(1) == Domain(kinds("integer"), minimum=1)
    assert Domain.counter(0).union(Domain.counter(1)).minimum == 0
