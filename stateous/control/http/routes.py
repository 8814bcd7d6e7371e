"""The route table of the HTTP API: each route declared once.

A route is a method and a path template; the resource and responder that serve it
(`resources.py`: `on_<method>` with the route's suffix); who may call it (its `Rule`:
the roles, and what a webhook may do there; None: every caller); and its `Operation`
(`operations.py`): what it is for, the shape of its body, its answers by status and the
codes of its refusals (their statuses are the codes', `codes.STATUS`), besides those that
any request may get (`ALWAYS`). The app routes each path to its resource from this table
(`app.create_app`), the guard looks up each request's rule in it (`routing.rule_of`), and
`/openapi.json` describes each operation from it (`openapi.document`). A new route is one
entry here and its responder. `HEAD` follows `GET`.
"""

from __future__ import annotations

from typing import Any

from stateous.control.http import resources
from stateous.control.http.access import OPERATOR, WORK, Rule
from stateous.control.http.graph_layout import Layout
from stateous.control.http.operations import PROMETHEUS, Operation, Route
from stateous.model import wire
from stateous.model.codes import RefusalCode
from stateous.model.resources import KeyBody, ResourceView, SlotsBody
from stateous.model.schedule import ScheduleBody, ScheduleView
from stateous.model.vocabulary import Role

U = RefusalCode.UNAUTHORIZED
#: The refusals of a request with a body, and of one that names a token.
BODY = (U, RefusalCode.INVALID_BODY)
TOKEN = (*BODY, RefusalCode.TOKEN_NOT_FOUND)
SCHEDULE = Operation(
    "pause or resume a schedule",
    answers=((200, ScheduleView),),
    refusals=(*BODY, RefusalCode.SCHEDULE_NOT_FOUND),
)
STEER = Operation(
    "steer the token",
    refusals=(*TOKEN, RefusalCode.TOKEN_NOT_ACTIVE, RefusalCode.CHILD_TOKEN),
)
RESOURCE = Operation(
    "pause or resume a resource",
    answers=((200, ResourceView),),
    refusals=(U, RefusalCode.RESOURCE_NOT_FOUND),
)
#: The token as an answer shows it: whole, or without its context to a webhook.
STARTED = (wire.TokenView, wire.TokenBrief)
#: The refusals of a request about a task held by a supervisor.
HELD = (
    *BODY,
    RefusalCode.INVALID_ARGUMENT,
    RefusalCode.TASK_NOT_FOUND,
    RefusalCode.TASK_NOT_HELD,
    RefusalCode.ATTEMPT_OVER,
)
#: Every route of the API, in the order `/openapi.json` lists them. `GET /health` is open to
#: all, so that load balancers can ask it, and so are the dashboard's files, which hold no
#: data.
ROUTES: tuple[Route, ...] = (
    Route(
        "GET",
        "/health",
        resources.Health,
        None,
        None,
        Operation(
            "the served workflow and its checksum, and whether requests need a credential",
            answers=((200, wire.Health),),
        ),
    ),
    Route(
        "GET",
        "/workflow",
        resources.WorkflowFile,
        None,
        WORK,
        Operation(
            "the graph file served, or an older one kept (by `checksum`)",
            answers=((200, dict[str, Any]),),
            refusals=(U, RefusalCode.GRAPH_NOT_FOUND),
        ),
    ),
    Route(
        "GET",
        "/workflows",
        resources.WorkflowFile,
        "versions",
        WORK,
        Operation(
            "every graph file kept, with its live tokens",
            answers=((200, list[wire.VersionView]),),
            refusals=(U,),
        ),
    ),
    Route(
        "GET",
        "/workflow/layout",
        resources.WorkflowFile,
        "layout",
        WORK,
        Operation(
            "every workflow of the graph laid out for drawing",
            answers=((200, Layout),),
            refusals=(U,),
        ),
    ),
    Route(
        "GET",
        "/ui/",
        resources.Dashboard,
        None,
        None,
        Operation("the dashboard's page (HTML)", answers=((200, None),)),
    ),
    Route(
        "GET",
        "/ui/{file}",
        resources.Dashboard,
        "file",
        None,
        Operation(
            "a file of the dashboard (its style sheet, script, icon)",
            answers=((200, None),),
            refusals=(RefusalCode.NOT_FOUND,),
        ),
    ),
    Route(
        "GET",
        "/openapi.json",
        resources.OpenApi,
        None,
        WORK,
        Operation("this document", answers=((200, dict[str, Any]),), refusals=(U,)),
    ),
    Route(
        "GET",
        "/stats",
        resources.Figures,
        None,
        OPERATOR,
        Operation(
            "the live tokens and tasks by state, the oldest queued tasks, the last hour",
            answers=((200, wire.Stats),),
            refusals=(U,),
        ),
    ),
    Route(
        "GET",
        "/metrics",
        resources.Figures,
        "metrics",
        WORK,
        Operation(
            "the metrics in the Prometheus text format",
            answers=((200, str),),
            refusals=(U,),
            media=PROMETHEUS,
        ),
    ),
    Route(
        "GET",
        "/tokens",
        resources.Tokens,
        None,
        OPERATOR,
        Operation(
            "tokens, the most recently moved first",
            answers=((200, list[wire.TokenView]),),
            refusals=(U, RefusalCode.INVALID_ARGUMENT),
        ),
    ),
    Route(
        "POST",
        "/tokens",
        resources.Tokens,
        None,
        Rule(frozenset({Role.OPERATOR}), webhook="start"),
        Operation(
            "start a token (a webhook is answered the token without its context)",
            wire.StartBody,
            ((201, STARTED), (200, STARTED)),
            (
                *BODY,
                RefusalCode.INVALID_TOKEN_ID,
                RefusalCode.INVALID_CONTEXT,
                RefusalCode.INVALID_PRIORITY,
                RefusalCode.INVALID_BUDGET,
            ),
        ),
    ),
    Route(
        "GET",
        "/tokens/{token}",
        resources.Token,
        None,
        OPERATOR,
        Operation("one token", refusals=(U, RefusalCode.TOKEN_NOT_FOUND)),
    ),
    Route(
        "GET",
        "/tokens/{token}/history",
        resources.Token,
        "history",
        OPERATOR,
        Operation(
            "the token's ledger entries",
            answers=((200, list[wire.HistoryEntry]),),
            refusals=(U, RefusalCode.TOKEN_NOT_FOUND),
        ),
    ),
    Route(
        "GET",
        "/stream",
        resources.Stream,
        None,
        OPERATOR,
        Operation(
            "ledger entries as they commit, as server-sent events (text/event-stream)",
            answers=((200, None),),
            refusals=(
                U,
                RefusalCode.TOKEN_NOT_FOUND,
                RefusalCode.INVALID_ARGUMENT,
                RefusalCode.TOO_MANY_STREAMS,
            ),
        ),
    ),
    Route(
        "POST",
        "/tokens/{token}/events/{event}",
        resources.Token,
        "event",
        Rule(frozenset({Role.OPERATOR}), webhook="event"),
        Operation(
            "fire an event (a webhook is answered the token without its context)",
            wire.FireBody,
            ((200, (*STARTED, wire.Duplicate, wire.DuplicateBrief)),),
            (
                *TOKEN,
                RefusalCode.INVALID_PAYLOAD,
                RefusalCode.EVENT_NOT_ALLOWED,
                RefusalCode.TOKEN_NOT_ACTIVE,
            ),
        ),
    ),
    Route("POST", "/tokens/{token}/pause", resources.Token, "pause", OPERATOR, STEER),
    Route("POST", "/tokens/{token}/resume", resources.Token, "resume", OPERATOR, STEER),
    Route("POST", "/tokens/{token}/cancel", resources.Token, "cancel", OPERATOR, STEER),
    Route(
        "POST",
        "/tokens/{token}/budget",
        resources.Token,
        "budget",
        OPERATOR,
        Operation(
            "raise the budget of the token's tree: its tasks are granted again",
            wire.BudgetBody,
            ((200, wire.BudgetView),),
            (*TOKEN, RefusalCode.INVALID_BUDGET, RefusalCode.NO_BUDGET),
        ),
    ),
    Route(
        "POST",
        "/tokens/{token}/retry",
        resources.Token,
        "retry",
        OPERATOR,
        Operation(
            "bring a failed or cancelled token back to a state it visited",
            wire.RetryBody,
            refusals=(
                *TOKEN,
                RefusalCode.INVALID_CONTEXT,
                RefusalCode.TOKEN_NOT_ACTIVE,
                RefusalCode.TOKEN_LIVE,
                RefusalCode.TOKEN_COMPLETED,
                RefusalCode.UNKNOWN_STATE,
                RefusalCode.STATE_NOT_VISITED,
                RefusalCode.PARENT_MOVED_ON,
            ),
        ),
    ),
    Route(
        "POST",
        "/tokens/{token}/migrate",
        resources.Token,
        "migrate",
        OPERATOR,
        Operation(
            "move a live top token, with its children, to another graph file the database keeps",
            wire.MigrateBody,
            ((200, wire.MigrationView),),
            (
                *TOKEN,
                RefusalCode.GRAPH_NOT_FOUND,
                RefusalCode.CHILD_TOKEN,
                RefusalCode.TOKEN_NOT_ACTIVE,
                RefusalCode.STATE_GONE,
                RefusalCode.CONTRACT_CHANGED,
            ),
        ),
    ),
    Route(
        "POST",
        "/plans",
        resources.Plans,
        None,
        OPERATOR,
        Operation(
            "plan a bulk pause, resume, cancel, retry or migrate: the exact tokens a filter "
            "selects now",
            wire.PlanBody,
            ((201, wire.PlanView),),
            (
                *BODY,
                RefusalCode.INVALID_ARGUMENT,
                RefusalCode.GRAPH_NOT_FOUND,
                RefusalCode.PLAN_TOO_LARGE,
            ),
        ),
    ),
    Route(
        "GET",
        "/plans/{plan}",
        resources.Plans,
        "plan",
        OPERATOR,
        Operation(
            "a plan: its action, filter and tokens, each with its outcome",
            answers=((200, wire.PlanView),),
            refusals=(U, RefusalCode.PLAN_NOT_FOUND),
        ),
    ),
    Route(
        "POST",
        "/plans/{plan}/apply",
        resources.Plans,
        "apply",
        OPERATOR,
        Operation(
            "act on each token of a plan not acted on yet, once",
            wire.ApplyBody,
            ((200, wire.PlanView),),
            (
                *BODY,
                RefusalCode.INVALID_ARGUMENT,
                RefusalCode.PLAN_NOT_FOUND,
                RefusalCode.PLAN_MISMATCH,
                RefusalCode.GRAPH_NOT_FOUND,
            ),
        ),
    ),
    Route(
        "GET",
        "/schedules",
        resources.Schedules,
        None,
        OPERATOR,
        Operation(
            "every schedule: its next and last occurrences, paused or not, its last skip",
            answers=((200, list[ScheduleView]),),
            refusals=(U,),
        ),
    ),
    Route(
        "POST",
        "/schedules",
        resources.Schedules,
        None,
        OPERATOR,
        Operation(
            "add a schedule at run time",
            ScheduleBody,
            ((201, ScheduleView),),
            (*BODY, RefusalCode.INVALID_SCHEDULE, RefusalCode.SCHEDULE_EXISTS),
        ),
    ),
    Route(
        "GET",
        "/resources",
        resources.Limits,
        None,
        OPERATOR,
        Operation(
            "every resource: its slots per key, its rate, paused or not, and each key's slots"
            " in use, the tasks that took them and how many wait",
            answers=((200, list[ResourceView]),),
            refusals=(U,),
        ),
    ),
    Route("POST", "/resources/{name}/pause", resources.Limits, "pause", OPERATOR, RESOURCE),
    Route("POST", "/resources/{name}/resume", resources.Limits, "resume", OPERATOR, RESOURCE),
    Route(
        "POST",
        "/resources/{name}/set",
        resources.Limits,
        "set",
        OPERATOR,
        Operation(
            "give a resource other slots per key (until a graph file declares other slots)",
            SlotsBody,
            ((200, ResourceView),),
            (*BODY, RefusalCode.RESOURCE_NOT_FOUND, RefusalCode.INVALID_SLOTS),
        ),
    ),
    Route(
        "POST",
        "/resources/{name}/open",
        resources.Limits,
        "open",
        OPERATOR,
        Operation(
            "reopen a parked key of a resource at once and whole",
            KeyBody,
            ((200, ResourceView),),
            (*BODY, RefusalCode.RESOURCE_NOT_FOUND, RefusalCode.KEY_NOT_PARKED),
        ),
    ),
    Route("POST", "/schedules/{name}/pause", resources.Schedules, "pause", OPERATOR, SCHEDULE),
    Route("POST", "/schedules/{name}/resume", resources.Schedules, "resume", OPERATOR, SCHEDULE),
    Route(
        "POST",
        "/schedules/{name}/remove",
        resources.Schedules,
        "remove",
        OPERATOR,
        Operation(
            "remove a schedule added at run time (one of the graph file is refused)",
            answers=((200, ScheduleView),),
            refusals=(*BODY, RefusalCode.SCHEDULE_NOT_FOUND, RefusalCode.SCHEDULE_IN_FLOW),
        ),
    ),
    Route(
        "GET",
        "/tasks",
        resources.Tasks,
        None,
        OPERATOR,
        Operation(
            "live tasks, the oldest queued first",
            answers=((200, list[wire.TaskView]),),
            refusals=(U, RefusalCode.INVALID_ARGUMENT),
        ),
    ),
    Route(
        "GET",
        "/supervisors",
        resources.Supervisors,
        None,
        OPERATOR,
        Operation(
            "the supervisors seen in the last day, by name",
            answers=((200, list[wire.SupervisorView]),),
            refusals=(U, RefusalCode.INVALID_ARGUMENT),
        ),
    ),
    Route(
        "POST",
        "/tasks/claim",
        resources.Tasks,
        "claim",
        WORK,
        Operation(
            "claim the oldest queued task",
            wire.ClaimBody,
            ((200, wire.Grant), (204, None)),
            (*BODY, RefusalCode.INVALID_ARGUMENT, RefusalCode.GRAPH_NOT_FOUND),
        ),
    ),
    Route(
        "POST",
        "/tasks/heartbeat",
        resources.Tasks,
        "heartbeat",
        WORK,
        Operation(
            "renew the leases",
            wire.HeartbeatBody,
            ((200, wire.Lost),),
            (*BODY, RefusalCode.INVALID_ARGUMENT),
        ),
    ),
    Route(
        "POST",
        "/tasks/{task}/report",
        resources.Tasks,
        "report",
        WORK,
        Operation(
            "the outcome of a task; with `next`, the grant of the supervisor's next task",
            wire.ReportBody,
            ((200, (wire.TokenView, wire.Reported)),),
            refusals=(
                *HELD,
                RefusalCode.INVALID_CONTEXT,
                RefusalCode.INVALID_PAYLOAD,
                RefusalCode.TOO_MANY_TIMERS,
                RefusalCode.EVENT_NOT_ALLOWED,
                RefusalCode.INVALID_QUOTA,
                RefusalCode.RESOURCE_NOT_USED,
                RefusalCode.INVALID_SPEND,
            ),
        ),
    ),
    Route(
        "POST",
        "/tasks/{task}/spend",
        resources.Tasks,
        "spend",
        WORK,
        Operation(
            "what the routine spent, by unit: a ledger row, and its tree's budget spent",
            wire.SpendBody,
            ((204, None), (200, wire.SpendDuplicate)),
            (*HELD, RefusalCode.INVALID_SPEND),
        ),
    ),
    Route(
        "POST",
        "/tasks/{task}/note",
        resources.Tasks,
        "note",
        WORK,
        Operation(
            "a line of progress",
            wire.NoteBody,
            ((204, None),),
            (*HELD, RefusalCode.INVALID_PAYLOAD),
        ),
    ),
    Route(
        "PUT",
        "/tasks/{task}/memory",
        resources.Tasks,
        "memory",
        WORK,
        Operation(
            "save one key of the memory",
            wire.MemoryBody,
            ((204, None),),
            (*HELD, RefusalCode.INVALID_PAYLOAD),
        ),
    ),
    Route(
        "POST",
        "/hooks/{name}",
        resources.GitHubDeliveries,
        None,
        Rule(frozenset(), webhook="hook"),
        Operation(
            "a GitHub delivery: start or move the token its webhook maps it to (201 started), "
            "pong to a ping, ignore a kind the webhook does not take (202)",
            dict[str, Any],
            ((200, (wire.Delivered, wire.Pong)), (201, wire.Delivered), (202, wire.Ignored)),
            (
                *TOKEN,
                RefusalCode.INVALID_DELIVERY,
                RefusalCode.INVALID_TOKEN_ID,
                RefusalCode.INVALID_CONTEXT,
                RefusalCode.INVALID_PAYLOAD,
                RefusalCode.EVENT_NOT_ALLOWED,
                RefusalCode.TOKEN_NOT_ACTIVE,
                RefusalCode.CHILD_TOKEN,
            ),
        ),
    ),
)
