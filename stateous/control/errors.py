"""The refusals of the control plane, each with its stable code and HTTP status.

Programs read the code, people read the sentence. The engine raises these; the
API turns each into `{"error", "code"}` with its status, through one table.
"""

from __future__ import annotations


class EngineError(Exception):
    """A request that the control plane refuses; the message is one sentence."""

    code = "unexpected"
    status = 500


class TokenNotFound(EngineError, LookupError):
    code, status = "token_not_found", 404


class GraphNotFound(EngineError, LookupError):
    code, status = "graph_not_found", 404


class TaskNotFound(EngineError, LookupError):
    code, status = "task_not_found", 404


class InvalidArgument(EngineError, ValueError):
    code, status = "invalid_argument", 422


class InvalidContext(EngineError, ValueError):
    code, status = "invalid_context", 422


class InvalidPayload(EngineError, ValueError):
    code, status = "invalid_payload", 422


class InvalidTokenId(EngineError, ValueError):
    code, status = "invalid_token_id", 422


class InvalidBody(EngineError, ValueError):
    code, status = "invalid_body", 422


class TooManyTimers(EngineError, ValueError):
    """A report sets more timers than one report may, or than its token may have pending."""

    code, status = "too_many_timers", 422


class EventNotAllowed(EngineError):
    code, status = "event_not_allowed", 409


class TokenNotActive(EngineError):
    code, status = "token_not_active", 409


class ChildToken(EngineError):
    code, status = "child_token", 409


class TokenLive(EngineError):
    """A retry of a token that is active or paused: there is nothing to mend."""

    code, status = "token_live", 409


class TokenCompleted(EngineError):
    """A retry of a token that completed: its work is done for good."""

    code, status = "token_completed", 409


class UnknownState(EngineError, ValueError):
    """A state that the token's workflow does not have."""

    code, status = "unknown_state", 422


class StateNotVisited(EngineError):
    """A retry from a state of the workflow that the token never entered."""

    code, status = "state_not_visited", 409


class ParentMovedOn(EngineError):
    """A retry of a child whose parent has left the visit that started it."""

    code, status = "parent_moved_on", 409


class StateGone(EngineError):
    """A migration of a token whose state (or a child's) the target graph lacks."""

    code, status = "state_gone", 409


class ContractChanged(EngineError):
    """A migration of a token whose state (or a child's) the target graph changed: another
    context model, events or payload models; for a parallel state, other child workflows,
    join or inputs."""

    code, status = "contract_changed", 409


class PlanNotFound(EngineError, LookupError):
    code, status = "plan_not_found", 404


class PlanMismatch(EngineError):
    """An apply whose action or options are not those the plan was made with."""

    code, status = "plan_mismatch", 409


class PlanTooLarge(EngineError, ValueError):
    """A filter that matches more tokens than one plan may hold."""

    code, status = "plan_too_large", 422


class ScheduleNotFound(EngineError, LookupError):
    code, status = "schedule_not_found", 404


class InvalidSchedule(EngineError, ValueError):
    """A schedule's cron line, time zone, overlap, catch-up or context cannot be used."""

    code, status = "invalid_schedule", 422


class ScheduleExists(EngineError):
    """A schedule of this name exists already (from the graph file, or added)."""

    code, status = "schedule_exists", 409


class ScheduleInFlow(EngineError):
    """The schedule comes from the graph file: only a new graph file removes it."""

    code, status = "schedule_in_flow", 409


class TaskNotHeld(EngineError):
    code, status = "task_not_held", 409


class AttemptOver(EngineError):
    code, status = "attempt_over", 409


class DatabaseBusy(EngineError):
    code, status = "database_busy", 503


class NotServing(EngineError):
    code, status = "not_serving", 503


class TooManyStreams(EngineError):
    """The control plane holds its most live streams (`serve --streams`)."""

    code, status = "too_many_streams", 503


class OutcomeUnknown(EngineError):
    """A change was sent to be committed and the database could not say whether it was.

    Unlike `database_busy`, which promises that nothing was written, this one
    asks the sender to look before sending the change again.
    """
