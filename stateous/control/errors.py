"""The refusals of the control plane, each with its stable code and HTTP status.

Programs read the code, people read the sentence. The engine raises these; the
API turns each into `{"error", "code"}` with its status, through one table. The
codes are the model's (`stateous.model.codes`), which the supervisor and the client
read them by.
"""

from __future__ import annotations

from stateous.model.codes import RefusalCode


class EngineError(Exception):
    """A request that the control plane refuses; the message is one sentence."""

    code = RefusalCode.UNEXPECTED
    status = 500


class TokenNotFound(EngineError, LookupError):
    code, status = RefusalCode.TOKEN_NOT_FOUND, 404


class GraphNotFound(EngineError, LookupError):
    code, status = RefusalCode.GRAPH_NOT_FOUND, 404


class TaskNotFound(EngineError, LookupError):
    code, status = RefusalCode.TASK_NOT_FOUND, 404


class InvalidArgument(EngineError, ValueError):
    code, status = RefusalCode.INVALID_ARGUMENT, 422


class InvalidContext(EngineError, ValueError):
    code, status = RefusalCode.INVALID_CONTEXT, 422


class InvalidPayload(EngineError, ValueError):
    code, status = RefusalCode.INVALID_PAYLOAD, 422


class InvalidTokenId(EngineError, ValueError):
    code, status = RefusalCode.INVALID_TOKEN_ID, 422


class InvalidPriority(EngineError, ValueError):
    code, status = RefusalCode.INVALID_PRIORITY, 422


class InvalidBody(EngineError, ValueError):
    code, status = RefusalCode.INVALID_BODY, 422


class TooManyTimers(EngineError, ValueError):
    """A report sets more timers than one report may, or than its token may have pending."""

    code, status = RefusalCode.TOO_MANY_TIMERS, 422


class EventNotAllowed(EngineError):
    code, status = RefusalCode.EVENT_NOT_ALLOWED, 409


class TokenNotActive(EngineError):
    code, status = RefusalCode.TOKEN_NOT_ACTIVE, 409


class ChildToken(EngineError):
    code, status = RefusalCode.CHILD_TOKEN, 409


class TokenLive(EngineError):
    """A retry of a token that is active or paused: there is nothing to mend."""

    code, status = RefusalCode.TOKEN_LIVE, 409


class TokenCompleted(EngineError):
    """A retry of a token that completed: its work is done for good."""

    code, status = RefusalCode.TOKEN_COMPLETED, 409


class UnknownState(EngineError, ValueError):
    """A state that the token's workflow does not have."""

    code, status = RefusalCode.UNKNOWN_STATE, 422


class StateNotVisited(EngineError):
    """A retry from a state of the workflow that the token never entered."""

    code, status = RefusalCode.STATE_NOT_VISITED, 409


class ParentMovedOn(EngineError):
    """A retry of a child whose parent has left the visit that started it."""

    code, status = RefusalCode.PARENT_MOVED_ON, 409


class StateGone(EngineError):
    """A migration of a token whose state (or a child's) the target graph lacks."""

    code, status = RefusalCode.STATE_GONE, 409


class ContractChanged(EngineError):
    """A migration of a token whose state (or a child's) the target graph changed: another
    context model, events or payload models; for a parallel state, other child workflows,
    join or inputs."""

    code, status = RefusalCode.CONTRACT_CHANGED, 409


class PlanNotFound(EngineError, LookupError):
    code, status = RefusalCode.PLAN_NOT_FOUND, 404


class PlanMismatch(EngineError):
    """An apply whose action or options are not those the plan was made with."""

    code, status = RefusalCode.PLAN_MISMATCH, 409


class PlanTooLarge(EngineError, ValueError):
    """A filter that matches more tokens than one plan may hold."""

    code, status = RefusalCode.PLAN_TOO_LARGE, 422


class ScheduleNotFound(EngineError, LookupError):
    code, status = RefusalCode.SCHEDULE_NOT_FOUND, 404


class InvalidSchedule(EngineError, ValueError):
    """A schedule's cron line, time zone, overlap, catch-up or context cannot be used."""

    code, status = RefusalCode.INVALID_SCHEDULE, 422


class ScheduleExists(EngineError):
    """A schedule of this name exists already (from the graph file, or added)."""

    code, status = RefusalCode.SCHEDULE_EXISTS, 409


class ScheduleInFlow(EngineError):
    """The schedule comes from the graph file: only a new graph file removes it."""

    code, status = RefusalCode.SCHEDULE_IN_FLOW, 409


class TaskNotHeld(EngineError):
    code, status = RefusalCode.TASK_NOT_HELD, 409


class AttemptOver(EngineError):
    code, status = RefusalCode.ATTEMPT_OVER, 409


class DatabaseBusy(EngineError):
    code, status = RefusalCode.DATABASE_BUSY, 503


class NotServing(EngineError):
    code, status = RefusalCode.NOT_SERVING, 503


class TooManyStreams(EngineError):
    """The control plane holds its most live streams (`serve --streams`)."""

    code, status = RefusalCode.TOO_MANY_STREAMS, 503


class OutcomeUnknown(EngineError):
    """A change was sent to be committed and the database could not say whether it was.

    Unlike `database_busy`, which promises that nothing was written, this one
    asks the sender to look before sending the change again.
    """
