"""The refusal codes of the API: the stable word that every `{"error", "code"}` carries.

Programs read the code, people read the sentence. The control plane answers with
these, the supervisor and the client decide what to do by them, so each is spelled
here once and every side names it as `RefusalCode.X` (a test finds any spelled
elsewhere), with its HTTP status in `STATUS`, the one table of them: the control plane's
refusals take theirs from it, and so do the route table's and `/openapi.json`'s.
docs/reference/http.md's table lists exactly these, with their statuses.
"""

from __future__ import annotations

from enum import StrEnum


class RefusalCode(StrEnum):
    """Why the control plane refused a request; each is a `str` of its plain value."""

    TOKEN_NOT_FOUND = "token_not_found"
    TASK_NOT_FOUND = "task_not_found"
    PLAN_NOT_FOUND = "plan_not_found"
    SCHEDULE_NOT_FOUND = "schedule_not_found"
    RESOURCE_NOT_FOUND = "resource_not_found"
    GRAPH_NOT_FOUND = "graph_not_found"
    NOT_FOUND = "not_found"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    BAD_REQUEST = "bad_request"
    UNAUTHORIZED = "unauthorized"
    FORBIDDEN = "forbidden"
    INVALID_ARGUMENT = "invalid_argument"
    INVALID_CONTEXT = "invalid_context"
    INVALID_PAYLOAD = "invalid_payload"
    INVALID_TOKEN_ID = "invalid_token_id"
    INVALID_PRIORITY = "invalid_priority"
    TOO_MANY_TIMERS = "too_many_timers"
    INVALID_DELIVERY = "invalid_delivery"
    INVALID_SCHEDULE = "invalid_schedule"
    INVALID_SLOTS = "invalid_slots"
    INVALID_SPEND = "invalid_spend"
    INVALID_BUDGET = "invalid_budget"
    NO_BUDGET = "no_budget"
    INVALID_BODY = "invalid_body"
    INVALID_QUOTA = "invalid_quota"
    RESOURCE_NOT_USED = "resource_not_used"
    KEY_NOT_PARKED = "key_not_parked"
    EVENT_NOT_ALLOWED = "event_not_allowed"
    TOKEN_NOT_ACTIVE = "token_not_active"
    CHILD_TOKEN = "child_token"
    TOKEN_LIVE = "token_live"
    TOKEN_COMPLETED = "token_completed"
    UNKNOWN_STATE = "unknown_state"
    STATE_NOT_VISITED = "state_not_visited"
    PARENT_MOVED_ON = "parent_moved_on"
    STATE_GONE = "state_gone"
    CONTRACT_CHANGED = "contract_changed"
    PLAN_MISMATCH = "plan_mismatch"
    PLAN_TOO_LARGE = "plan_too_large"
    SCHEDULE_EXISTS = "schedule_exists"
    SCHEDULE_IN_FLOW = "schedule_in_flow"
    TASK_NOT_HELD = "task_not_held"
    ATTEMPT_OVER = "attempt_over"
    DATABASE_BUSY = "database_busy"
    TOO_MANY_STREAMS = "too_many_streams"
    NOT_SERVING = "not_serving"
    UNEXPECTED = "unexpected"


#: The HTTP status of each code. `bad_request` is 400, or 413 for a body too large, 415
#: without `Content-Type: application/json`, 431 for a head too large: `BAD_REQUEST_STATUSES`.
STATUS: dict[RefusalCode, int] = {
    RefusalCode.TOKEN_NOT_FOUND: 404,
    RefusalCode.TASK_NOT_FOUND: 404,
    RefusalCode.PLAN_NOT_FOUND: 404,
    RefusalCode.SCHEDULE_NOT_FOUND: 404,
    RefusalCode.RESOURCE_NOT_FOUND: 404,
    RefusalCode.GRAPH_NOT_FOUND: 404,
    RefusalCode.NOT_FOUND: 404,
    RefusalCode.METHOD_NOT_ALLOWED: 405,
    RefusalCode.BAD_REQUEST: 400,
    RefusalCode.UNAUTHORIZED: 401,
    RefusalCode.FORBIDDEN: 403,
    RefusalCode.INVALID_ARGUMENT: 422,
    RefusalCode.INVALID_CONTEXT: 422,
    RefusalCode.INVALID_PAYLOAD: 422,
    RefusalCode.INVALID_TOKEN_ID: 422,
    RefusalCode.INVALID_PRIORITY: 422,
    RefusalCode.TOO_MANY_TIMERS: 422,
    RefusalCode.INVALID_DELIVERY: 422,
    RefusalCode.INVALID_SCHEDULE: 422,
    RefusalCode.INVALID_SLOTS: 422,
    RefusalCode.INVALID_SPEND: 422,
    RefusalCode.INVALID_BUDGET: 422,
    RefusalCode.NO_BUDGET: 409,
    RefusalCode.INVALID_BODY: 422,
    RefusalCode.INVALID_QUOTA: 422,
    RefusalCode.RESOURCE_NOT_USED: 409,
    RefusalCode.KEY_NOT_PARKED: 409,
    RefusalCode.EVENT_NOT_ALLOWED: 409,
    RefusalCode.TOKEN_NOT_ACTIVE: 409,
    RefusalCode.CHILD_TOKEN: 409,
    RefusalCode.TOKEN_LIVE: 409,
    RefusalCode.TOKEN_COMPLETED: 409,
    RefusalCode.UNKNOWN_STATE: 422,
    RefusalCode.STATE_NOT_VISITED: 409,
    RefusalCode.PARENT_MOVED_ON: 409,
    RefusalCode.STATE_GONE: 409,
    RefusalCode.CONTRACT_CHANGED: 409,
    RefusalCode.PLAN_MISMATCH: 409,
    RefusalCode.PLAN_TOO_LARGE: 422,
    RefusalCode.SCHEDULE_EXISTS: 409,
    RefusalCode.SCHEDULE_IN_FLOW: 409,
    RefusalCode.TASK_NOT_HELD: 409,
    RefusalCode.ATTEMPT_OVER: 409,
    RefusalCode.DATABASE_BUSY: 503,
    RefusalCode.TOO_MANY_STREAMS: 503,
    RefusalCode.NOT_SERVING: 503,
    RefusalCode.UNEXPECTED: 500,
}
#: Every status that `bad_request` comes with.
BAD_REQUEST_STATUSES = (400, 413, 415, 431)
