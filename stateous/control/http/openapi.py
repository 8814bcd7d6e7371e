"""The OpenAPI document of the HTTP API, served at `GET /openapi.json`.

It is made from the same things the API is made of: the route table of
`access.RULES` (which `tests/control/test_openapi.py` holds equal to the app's
routes), the `wire` Structs of every body and answer (their JSON Schemas through
msgspec), and the documented refusal codes. So a tool can read the API, and a
fuzzer can be pointed at it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import msgspec

from stateous._version import __version__
from stateous.control.http.graph_layout import Layout
from stateous.model import wire
from stateous.model.schedule import ScheduleBody, ScheduleView
from stateous.model.vocabulary import LIVE_TASK, TokenStatus

REF = "#/components/schemas/{name}"
#: The media type of the Prometheus text format.
PROMETHEUS = "text/plain; version=0.0.4"


@dataclass(frozen=True, slots=True)
class Operation:
    """One route's method: what it is for, its body, its answers by status."""

    summary: str
    #: The body's shape: a `wire` Struct, `dict[str, Any]` for any object, None for none.
    body: Any = None
    #: The answers by status; a tuple of shapes is one of them (`anyOf`), None no body.
    answers: tuple[tuple[int, Any], ...] = ((200, wire.TokenView),)
    refusals: tuple[int, ...] = (401, 403, 404, 409, 422)
    #: The media type of the answers that have a body.
    media: str = "application/json"


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
SCHEDULE = Operation(
    "pause or resume a schedule", answers=((200, ScheduleView),), refusals=(401, 403, 404)
)
STEER = Operation("steer the token", refusals=(401, 403, 404, 409))
#: The token as an answer shows it: whole, or without its context to a webhook.
STARTED = (wire.TokenView, wire.TokenBrief)
WORK = (401, 403, 404, 409, 422)
#: Every route of the API, by method and path template, as `access.RULES` names them.
OPERATIONS: dict[tuple[str, str], Operation] = {
    ("GET", "/health"): Operation(
        "the served workflow and its checksum, and whether requests need a credential",
        answers=((200, wire.Health),),
        refusals=(),
    ),
    ("GET", "/workflow"): Operation(
        "the graph file served, or an older one kept (by `checksum`)",
        answers=((200, dict[str, Any]),),
        refusals=(401, 403, 404),
    ),
    ("GET", "/workflows"): Operation(
        "every graph file kept, with its live tokens",
        answers=((200, list[wire.VersionView]),),
        refusals=(401, 403),
    ),
    ("GET", "/workflow/layout"): Operation(
        "every workflow of the graph laid out for drawing",
        answers=((200, Layout),),
        refusals=(401, 403),
    ),
    ("GET", "/ui/"): Operation("the dashboard's page (HTML)", answers=((200, None),), refusals=()),
    ("GET", "/ui/{file}"): Operation(
        "a file of the dashboard (its style sheet, script, icon)",
        answers=((200, None),),
        refusals=(404,),
    ),
    ("GET", "/openapi.json"): Operation(
        "this document", answers=((200, dict[str, Any]),), refusals=(401, 403)
    ),
    ("GET", "/stats"): Operation(
        "the live tokens and tasks by state, the oldest queued tasks, the last hour",
        answers=((200, wire.Stats),),
        refusals=(401, 403),
    ),
    ("GET", "/metrics"): Operation(
        "the metrics in the Prometheus text format",
        answers=((200, str),),
        refusals=(401, 403),
        media=PROMETHEUS,
    ),
    ("GET", "/tokens"): Operation(
        "tokens, the most recently moved first",
        answers=((200, list[wire.TokenView]),),
        refusals=(401, 403, 422),
    ),
    ("POST", "/tokens"): Operation(
        "start a token (a webhook is answered the token without its context)",
        wire.StartBody,
        ((201, STARTED), (200, STARTED)),
    ),
    ("GET", "/tokens/{token}"): Operation("one token", refusals=(401, 403, 404)),
    ("GET", "/tokens/{token}/history"): Operation(
        "the token's ledger entries",
        answers=((200, list[wire.HistoryEntry]),),
        refusals=(401, 403, 404),
    ),
    ("GET", "/stream"): Operation(
        "ledger entries as they commit, as server-sent events (text/event-stream)",
        answers=((200, None),),
        refusals=(401, 403, 404, 422),
    ),
    ("POST", "/tokens/{token}/events/{event}"): Operation(
        "fire an event (a webhook is answered the token without its context)",
        wire.FireBody,
        ((200, (*STARTED, wire.Duplicate, wire.DuplicateBrief)),),
    ),
    ("POST", "/tokens/{token}/pause"): STEER,
    ("POST", "/tokens/{token}/resume"): STEER,
    ("POST", "/tokens/{token}/cancel"): STEER,
    ("POST", "/tokens/{token}/retry"): Operation(
        "bring a failed or cancelled token back to a state it visited", wire.RetryBody
    ),
    ("POST", "/tokens/{token}/migrate"): Operation(
        "move a live top token, with its children, to another graph file the database keeps",
        wire.MigrateBody,
        ((200, wire.MigrationView),),
    ),
    ("POST", "/plans"): Operation(
        "plan a bulk pause, resume, cancel, retry or migrate: the exact tokens a filter "
        "selects now",
        wire.PlanBody,
        ((201, wire.PlanView),),
        (401, 403, 422),
    ),
    ("GET", "/plans/{plan}"): Operation(
        "a plan: its action, filter and tokens, each with its outcome",
        answers=((200, wire.PlanView),),
        refusals=(401, 403, 404),
    ),
    ("POST", "/plans/{plan}/apply"): Operation(
        "act on each token of a plan not acted on yet, once",
        wire.ApplyBody,
        ((200, wire.PlanView),),
        (401, 403, 404, 409, 422),
    ),
    ("GET", "/schedules"): Operation(
        "every schedule: its next and last occurrences, paused or not, its last skip",
        answers=((200, list[ScheduleView]),),
        refusals=(401, 403),
    ),
    ("POST", "/schedules"): Operation(
        "add a schedule at run time", ScheduleBody, ((201, ScheduleView),), (401, 403, 409, 422)
    ),
    ("POST", "/schedules/{name}/pause"): SCHEDULE,
    ("POST", "/schedules/{name}/resume"): SCHEDULE,
    ("POST", "/schedules/{name}/remove"): Operation(
        "remove a schedule added at run time (one of the graph file is refused)",
        answers=((200, ScheduleView),),
        refusals=(401, 403, 404, 409),
    ),
    ("GET", "/tasks"): Operation(
        "live tasks, the oldest queued first",
        answers=((200, list[wire.TaskView]),),
        refusals=(401, 403, 422),
    ),
    ("GET", "/supervisors"): Operation(
        "the supervisors seen in the last day, by name",
        answers=((200, list[wire.SupervisorView]),),
        refusals=(401, 403, 422),
    ),
    ("POST", "/tasks/claim"): Operation(
        "claim the oldest queued task", wire.ClaimBody, ((200, wire.Grant), (204, None)), WORK
    ),
    ("POST", "/tasks/heartbeat"): Operation(
        "renew the leases", wire.HeartbeatBody, ((200, wire.Lost),), (401, 403, 422)
    ),
    ("POST", "/tasks/{task}/report"): Operation(
        "the outcome of a task", wire.ReportBody, refusals=WORK
    ),
    ("POST", "/tasks/{task}/note"): Operation(
        "a line of progress", wire.NoteBody, ((204, None),), WORK
    ),
    ("PUT", "/tasks/{task}/memory"): Operation(
        "save one key of the memory", wire.MemoryBody, ((204, None),), WORK
    ),
    ("POST", "/hooks/{name}"): Operation(
        "a GitHub delivery: start or move the token its webhook maps it to (201 started), "
        "pong to a ping, ignore a kind the webhook does not take (202)",
        dict[str, Any],
        ((200, (wire.Delivered, wire.Pong)), (201, wire.Delivered), (202, wire.Ignored)),
    ),
}
#: Every answer may also be one of these: an unreadable request, a body too large or not
#: JSON, a database that cannot take the request now, a control plane that lost it.
ALWAYS = (400, 413, 415, 503)
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


@cache
def document() -> dict[str, Any]:
    """The whole document, made once."""
    types: list[Any] = [wire.ErrorBody]
    for operation in OPERATIONS.values():
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
    for (method, template), operation in OPERATIONS.items():
        responses: dict[str, Any] = {}
        for status, shape in operation.answers:
            answer: dict[str, Any] = {"description": operation.summary}
            if shape is not None:
                answer["content"] = {operation.media: {"schema": schema_of(shape)}}
            responses[str(status)] = answer
        refusal = {"application/json": {"schema": schema_of(wire.ErrorBody)}}
        for status in (*operation.refusals, *ALWAYS):
            meaning = MEANINGS.get(status, "a refusal")
            responses.setdefault(str(status), {"description": meaning, "content": refusal})
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
