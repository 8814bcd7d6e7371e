"""Context and payload models: msgspec Structs, or pydantic models when pydantic is there.

The rest of Stateous only sees a model's name and its JSON Schema, so this is the
one place that knows the two kinds apart. pydantic is never imported here: a
pydantic model can only exist if its author already imported it.
"""

import sys
from typing import Any

import msgspec

_REF = "#/$defs/{name}"


def _pydantic_base() -> type | None:
    pydantic = sys.modules.get("pydantic")
    return getattr(pydantic, "BaseModel", None)


def is_model(value: object) -> bool:
    """Tell whether a value is a model class that Stateous can describe as JSON Schema."""
    if not isinstance(value, type):
        return False
    if issubclass(value, msgspec.Struct):
        return True
    base = _pydantic_base()
    return base is not None and issubclass(value, base) and value is not base


def model_name(model: type) -> str:
    """Return the name under which a model appears in the graph file and the contract."""
    return model.__name__


def json_schema(model: type) -> dict[str, Any]:
    """Return the model's JSON Schema, self-contained: refs point into its own `$defs`."""
    if issubclass(model, msgspec.Struct):
        (root,), components = msgspec.json.schema_components([model], ref_template=_REF)
        name = root["$ref"].rsplit("/", 1)[1]
        schema = dict(components[name])
        if root["$ref"].encode() not in msgspec.json.encode(components):
            del components[name]  # the root needs a place in $defs only if it refers to itself
        if components:
            schema["$defs"] = dict(sorted(components.items()))
        return schema
    # A pydantic model: pydantic is never imported here, so its class is typed as a type.
    described: dict[str, Any] = model.model_json_schema()  # type: ignore[attr-defined]
    return described
