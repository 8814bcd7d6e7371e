"""The refusal codes of the API: the stable word that every `{"error", "code"}` carries.

Programs read the code, people read the sentence. The control plane answers with
these, the supervisor and the client decide what to do by them, so each is spelled
here once and every side names it as `RefusalCode.X` (a test finds any spelled
elsewhere). docs/reference/http.md's table lists exactly these, with their statuses.
"""

from __future__ import annotations

from enum import StrEnum


class RefusalCode(StrEnum):
    """Why the control plane refused a request; each is a `str` of its plain value."""

    TOKEN_NOT_FOUND = "token_not_found"
    TASK_NOT_FOUND = "task_not_found"
    PLAN_NOT_FOUND = "plan_not_found"
    SCHEDULE_NOT_FOUND = "schedule_not_found"
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
    INVALID_BODY = "invalid_body"
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
