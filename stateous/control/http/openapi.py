"""The OpenAPI document of the HTTP API, served at `GET /openapi.json`.

It is made from the same things the API is made of: the route table (`routes.ROUTES`),
whose operations name the `wire` Structs of every body and answer (their JSON Schemas
through msgspec) and the codes of their refusals: each refusal status lists its codes in
`x-codes`. So a tool can read the API, and a fuzzer can be pointed at it.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import msgspec

from stateous._version import __version__
from stateous.control.http.routes import ROUTES
from stateous.model import wire
from stateous.model.codes import BAD_REQUEST_STATUSES, RefusalCode
from stateous.model.vocabulary import LIVE_TASK, TokenStatus

REF = "#/components/schemas/{name}"


TOKEN_PARAM = {"name": "token", "in": "path", "required": True, "schema": {"type": "string"}}
TASK_PARAM = {"name": "task", "in": "path", "required": True, "schema": {"type": "string"}}
FILE_PARAM = {"name": "file", "in": "path", "required": True, "schema": {"type": "string"}}
PLAN_PARAM = {"name": "plan", "in": "path", "required": True, "schema": {"type": "string"}}
EVENT_PARAM = {"name": "event", "in": "path", "required": True, "schema": {"type": "string"}}
TIME = {"type": "string", "format": "date-time"}
PAGING = [
    {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 1000}},
    {"name": "after", "in": "query", "schema": {"type": "string"}},
]
TOKEN_LISTING = [
    {"name": "status", "in": "query", "schema": {"enum": [str(status) for status in TokenStatus]}},
    {"name": "state", "in": "query", "schema": {"type": "string"}},
    {"name": "parent", "in": "query", "schema": {"type": "string"}},
    {"name": "checksum", "in": "query", "schema": {"type": "string"}},
    {"name": "since", "in": "query", "schema": TIME},
    {"name": "until", "in": "query", "schema": TIME},
    *PAGING,
]
TASK_LISTING = [
    {"name": "status", "in": "query", "schema": {"enum": [str(status) for status in LIVE_TASK]}},
    {"name": "state", "in": "query", "schema": {"type": "string"}},
    {"name": "supervisor", "in": "query", "schema": {"type": "string"}},
    {
        "name": "older_than",
        "in": "query",
        "schema": {"type": "string", "pattern": "^[0-9]+[smhd]$"},
    },
    *PAGING,
]
#: The query parameters of each listing (and of `GET /workflow`), by method and path template.
LISTINGS = {
    ("GET", "/workflow"): [{"name": "checksum", "in": "query", "schema": {"type": "string"}}],
    ("GET", "/tokens"): TOKEN_LISTING,
    ("GET", "/tasks"): TASK_LISTING,
    ("GET", "/supervisors"): PAGING,
}
STREAM = [
    {"name": "token", "in": "query", "schema": {"type": "string"}},
    {"name": "Last-Event-ID", "in": "header", "schema": {"type": "string", "pattern": "^[0-9]+$"}},
]
KEY = {
    "name": "Idempotency-Key",
    "in": "header",
    "schema": {"type": "string", "minLength": 1, "maxLength": 256},
}
#: A signed delivery: the body's HMAC-SHA256 under the webhook's key, in GitHub's header or
#: ours, sent instead of `Authorization`; and GitHub's name of the delivery, its key.
SIGNATURE = {"type": "string", "pattern": "^sha256=[0-9a-f]{64}$"}
DELIVERY = [
    {"name": "X-Hub-Signature-256", "in": "header", "schema": SIGNATURE},
    {"name": "X-Stateous-Signature", "in": "header", "schema": SIGNATURE},
    {"name": "X-GitHub-Delivery", "in": "header", "schema": {"type": "string", "minLength": 1}},
]
#: A GitHub delivery to `POST /hooks/{name}`: signed by that webhook's key, of a kind.
HOOK: list[dict[str, Any]] = [
    {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}},
    {"name": "X-Hub-Signature-256", "in": "header", "required": True, "schema": SIGNATURE},
    {"name": "X-GitHub-Event", "in": "header", "schema": {"type": "string"}},
    DELIVERY[2],
]
#: What a refusal's status means, where "a refusal" says too little.
MEANINGS = {
    403: "a credential that may not call this, a foreign Host or Origin, a change that "
    "another site sent (Sec-Fetch-Site: cross-site)",
    415: "a POST or PUT without Content-Type: application/json, also one without a body",
}


def parameters(method: str, template: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if "{token}" in template:
        found.append(TOKEN_PARAM)
    if "{task}" in template:
        found.append(TASK_PARAM)
    if "{file}" in template:
        found.append(FILE_PARAM)
    if "{plan}" in template:
        found.append(PLAN_PARAM)
    if "{event}" in template:
        found.extend([EVENT_PARAM, KEY, *DELIVERY])
    found.extend(LISTINGS.get((method, template), []))
    if (method, template) == ("GET", "/stream"):
        found.extend(STREAM)
    if (method, template) == ("POST", "/hooks/{name}"):
        found.extend(HOOK)
    elif "{name}" in template:
        found.append({**PLAN_PARAM, "name": "name"})
    return found


def refusals(statuses: dict[int, list[RefusalCode]]) -> dict[int, list[str]]:
    """The codes of a route's refusals by status, `bad_request` under each of its statuses
    (an unreadable request, a body too large, not JSON, a head too large)."""
    found = {status: [str(code) for code in codes] for status, codes in statuses.items()}
    for status in BAD_REQUEST_STATUSES[1:]:
        found.setdefault(status, []).append(str(RefusalCode.BAD_REQUEST))
    return dict(sorted(found.items()))


@cache
def document() -> dict[str, Any]:
    """The whole document, made once."""
    types: list[Any] = [wire.ErrorBody]
    for operation in (route.operation for route in ROUTES):
        if operation.body is not None:
            types.append(operation.body)
        for _, shape in operation.answers:
            types.extend(shape if isinstance(shape, tuple) else [] if shape is None else [shape])
    schemas, components = msgspec.json.schema_components(types, ref_template=REF)
    known = dict(zip(map(repr, types), schemas, strict=True))

    def schema_of(shape: Any) -> dict[str, Any]:
        if isinstance(shape, tuple):
            return {"anyOf": [known[repr(one)] for one in shape]}
        return known[repr(shape)]

    paths: dict[str, dict[str, Any]] = {}
    for route in ROUTES:
        method, template, operation = route.method, route.path, route.operation
        responses: dict[str, Any] = {}
        for status, shape in operation.answers:
            answer: dict[str, Any] = {"description": operation.summary}
            if shape is not None:
                answer["content"] = {operation.media: {"schema": schema_of(shape)}}
            responses[str(status)] = answer
        refusal = {"application/json": {"schema": schema_of(wire.ErrorBody)}}
        for status, codes in refusals(operation.statuses()).items():
            meaning = MEANINGS.get(status, "a refusal")
            described = {"description": meaning, "content": refusal, "x-codes": codes}
            responses.setdefault(str(status), described)
        entry: dict[str, Any] = {
            "summary": operation.summary,
            "parameters": parameters(method, template),
            "responses": responses,
        }
        if operation.body is not None:
            body_schema = schema_of(operation.body)
            entry["requestBody"] = {"content": {"application/json": {"schema": body_schema}}}
        paths.setdefault(template, {})[method.lower()] = entry
    return {
        "openapi": "3.1.0",
        "info": {"title": "Stateous control plane", "version": __version__},
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}, {}],
    }
