"""The refusals of the control plane, each with its stable code and HTTP status.

Programs read the code, people read the sentence. The engine raises these; the
API turns each into `{"error", "code"}` with its code's status (`codes.STATUS`). The
codes are the model's (`stateous.model.codes`), which the supervisor and the client
read them by.
"""

from __future__ import annotations

from stateous.model.codes import STATUS, RefusalCode


class EngineError(Exception):
    """A request that the control plane refuses; the message is one sentence. Its status is
    its code's, from the one table of statuses (`codes.STATUS`)."""

    code = RefusalCode.UNEXPECTED
    status = STATUS[code]

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        cls.status = STATUS[cls.code]


class TokenNotFound(EngineError, LookupError):
    code = RefusalCode.TOKEN_NOT_FOUND


class GraphNotFound(EngineError, LookupError):
    code = RefusalCode.GRAPH_NOT_FOUND


class TaskNotFound(EngineError, LookupError):
    code = RefusalCode.TASK_NOT_FOUND


class InvalidArgument(EngineError, ValueError):
    code = RefusalCode.INVALID_ARGUMENT


class InvalidContext(EngineError, ValueError):
    code = RefusalCode.INVALID_CONTEXT


class InvalidPayload(EngineError, ValueError):
    code = RefusalCode.INVALID_PAYLOAD


class InvalidTokenId(EngineError, ValueError):
    code = RefusalCode.INVALID_TOKEN_ID


class InvalidPriority(EngineError, ValueError):
    code = RefusalCode.INVALID_PRIORITY


class InvalidBody(EngineError, ValueError):
    code = RefusalCode.INVALID_BODY


class TooManyTimers(EngineError, ValueError):
    """A report sets more timers than one report may, or than its token may have pending."""

    code = RefusalCode.TOO_MANY_TIMERS


class EventNotAllowed(EngineError):
    code = RefusalCode.EVENT_NOT_ALLOWED


class TokenNotActive(EngineError):
    code = RefusalCode.TOKEN_NOT_ACTIVE


class ChildToken(EngineError):
    code = RefusalCode.CHILD_TOKEN


class TokenLive(EngineError):
    """A retry of a token that is active or paused: there is nothing to mend."""

    code = RefusalCode.TOKEN_LIVE


class TokenCompleted(EngineError):
    """A retry of a token that completed: its work is done for good."""

    code = RefusalCode.TOKEN_COMPLETED


class UnknownState(EngineError, ValueError):
    """A state that the token's workflow does not have."""

    code = RefusalCode.UNKNOWN_STATE


class StateNotVisited(EngineError):
    """A retry from a state of the workflow that the token never entered."""

    code = RefusalCode.STATE_NOT_VISITED


class ParentMovedOn(EngineError):
    """A retry of a child whose parent has left the visit that started it."""

    code = RefusalCode.PARENT_MOVED_ON


class StateGone(EngineError):
    """A migration of a token whose state (or a child's) the target graph lacks."""

    code = RefusalCode.STATE_GONE


class ContractChanged(EngineError):
    """A migration of a token whose state (or a child's) the target graph changed: another
    context model, events or payload models; for a parallel state, other child workflows,
    join or inputs."""

    code = RefusalCode.CONTRACT_CHANGED


class PlanNotFound(EngineError, LookupError):
    code = RefusalCode.PLAN_NOT_FOUND


class PlanMismatch(EngineError):
    """An apply whose action or options are not those the plan was made with."""

    code = RefusalCode.PLAN_MISMATCH


class PlanTooLarge(EngineError, ValueError):
    """A filter that matches more tokens than one plan may hold."""

    code = RefusalCode.PLAN_TOO_LARGE


class ScheduleNotFound(EngineError, LookupError):
    code = RefusalCode.SCHEDULE_NOT_FOUND


class ResourceNotFound(EngineError, LookupError):
    code = RefusalCode.RESOURCE_NOT_FOUND


class InvalidSlots(EngineError, ValueError):
    """A resource's slots must be a whole number, 1 or more."""

    code = RefusalCode.INVALID_SLOTS


class InvalidQuota(EngineError, ValueError):
    """A quota report whose reset cannot be: in the past, given twice, or not a time."""

    code = RefusalCode.INVALID_QUOTA


class ResourceNotUsed(EngineError, LookupError):
    """A quota report names a resource that the task does not use."""

    code = RefusalCode.RESOURCE_NOT_USED


class KeyNotParked(EngineError, ValueError):
    """`open` names a key that is not parked."""

    code = RefusalCode.KEY_NOT_PARKED


class InvalidSpend(EngineError, ValueError):
    """What a routine spent is units and numbers, each 0 or more."""

    code = RefusalCode.INVALID_SPEND


class InvalidBudget(EngineError, ValueError):
    """A budget is units and numbers above 0, which each reservation of the workflow fits."""

    code = RefusalCode.INVALID_BUDGET


class NoBudget(EngineError):
    """The token's tree has no budget to raise."""

    code = RefusalCode.NO_BUDGET


class InvalidSchedule(EngineError, ValueError):
    """A schedule's cron line, time zone, overlap, catch-up or context cannot be used."""

    code = RefusalCode.INVALID_SCHEDULE


class ScheduleExists(EngineError):
    """A schedule of this name exists already (from the graph file, or added)."""

    code = RefusalCode.SCHEDULE_EXISTS


class ScheduleInFlow(EngineError):
    """The schedule comes from the graph file: only a new graph file removes it."""

    code = RefusalCode.SCHEDULE_IN_FLOW


class TaskNotHeld(EngineError):
    code = RefusalCode.TASK_NOT_HELD


class AttemptOver(EngineError):
    code = RefusalCode.ATTEMPT_OVER


class DatabaseBusy(EngineError):
    code = RefusalCode.DATABASE_BUSY


class NotServing(EngineError):
    code = RefusalCode.NOT_SERVING


class TooManyStreams(EngineError):
    """The control plane holds its most live streams (`serve --streams`)."""

    code = RefusalCode.TOO_MANY_STREAMS


class OutcomeUnknown(EngineError):
    """A change was sent to be committed and the database could not say whether it was.

    Unlike `database_busy`, which promises that nothing was written, this one
    asks the sender to look before sending the change again.
    """
