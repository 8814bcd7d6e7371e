"""The workflow model that `flow.py` is written in.

`Workflow(name, context=Model)` collects states, events and transitions. Misuse
that can be seen on the spot (a bad name, a duplicate, an unknown keyword, a bad
duration) raises `DefinitionError` at once; rules that need the whole graph
(reachability, guards, overlaps) are the compiler's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from stateous.model.backoff import backoff_problem
from stateous.model.budgets import BUDGET_WARN, amounts_problem, reserve_problem, warn_problem
from stateous.model.durations import parse_duration
from stateous.model.errors import DefinitionError
from stateous.model.guards import GuardSyntaxError
from stateous.model.keys import key_path
from stateous.model.labels import labels_problem
from stateous.model.models import is_model
from stateous.model.names import BUILTIN_EVENTS, END_NAME, START_NAME, name_problem
from stateous.model.repeats import repeat_problem
from stateous.model.resources import resource_problems
from stateous.model.schedule import problems

_T = TypeVar("_T")

JOINS = ("all", "any")
#: The keywords of `Workflow.state`, in the order an error lists them.
STATE_KEYWORDS = (
    "timeout",
    "retries",
    "retry_delay",
    "retry_delay_max",
    "stop_on_repeat",
    "parallel",
    "join",
    "inputs",
    "uses",
    "needs",
    "prefers",
    "prefer_for",
    "reserve",
)


@dataclass(frozen=True, slots=True)
class Terminal:
    """START or END: the two states of Stateous itself, shared by every workflow."""

    name: str
    label: str

    def __repr__(self) -> str:
        return self.label


START = Terminal(START_NAME, "START")
END = Terminal(END_NAME, "END")


@dataclass(frozen=True, slots=True, eq=False)
class State:
    """A place where a token can be; a parallel state runs child workflows instead of a task."""

    workflow: Workflow = field(repr=False)
    name: str
    timeout: str | None = None
    retries: int = 0
    retry_delay: str | None = None
    retry_delay_max: str | None = None
    #: Retries end early once the same failure comes this many times in a row on the same
    #: context (`stateous.model.repeats`).
    stop_on_repeat: int | None = None
    parallel: tuple[Workflow, ...] = ()
    join: str = "all"
    inputs: tuple[str, ...] = ()
    #: The resources its task holds while queued or claimed: a key expression or a count each.
    uses: dict[str, str | int] = field(default_factory=dict)
    #: The labels a supervisor must have to claim the state's work (`stateous.model.labels`).
    needs: dict[str, str] = field(default_factory=dict)
    #: The one label whose value, read from the context by a key expression, a supervisor
    #: should have to be offered the state's work first, and for how long (a duration).
    prefers: dict[str, str] = field(default_factory=dict)
    prefer_for: str | None = None
    #: What its task reserves of its tree's budget before it runs, by unit.
    reserve: dict[str, float] = field(default_factory=dict)

    @property
    def is_parallel(self) -> bool:
        return bool(self.parallel)


@dataclass(frozen=True, slots=True, eq=False)
class Event:
    """An outcome of a state; `payload` is the model of its data, if it has any."""

    workflow: Workflow = field(repr=False)
    name: str
    payload: type | None = None


@dataclass(frozen=True, slots=True)
class Resource:
    """A limit that tasks share, counted per key (`stateous.model.resources`)."""

    name: str
    slots: int
    rate: str | None
    breaker: int | None = None


@dataclass(frozen=True, slots=True)
class Schedule:
    """When tokens of the workflow start by themselves (`stateous.model.schedule`)."""

    name: str
    cron: str
    context: dict[str, Any]
    overlap: str
    catch_up: str
    tz: str


Source = State | Terminal | str
Target = State | Terminal | str


@dataclass(frozen=True, slots=True)
class Transition:
    """Where an event takes a token: `source` on `on` to `target`, maybe guarded by `when`."""

    source: Source
    target: Target
    on: Event | str | None = None
    when: str | None = None
    otherwise: bool = False

    @property
    def source_name(self) -> str:
        return self.source if isinstance(self.source, str) else self.source.name

    @property
    def target_name(self) -> str:
        return self.target if isinstance(self.target, str) else self.target.name

    @property
    def event_name(self) -> str | None:
        return self.on if self.on is None or isinstance(self.on, str) else self.on.name


def _unknown_keywords(what: str, given: dict[str, Any], known: Sequence[str]) -> None:
    if given:
        names = ", ".join(repr(key) for key in given)
        raise DefinitionError(
            f"{what}: unknown keyword {names}; the keywords are {', '.join(known)}"
        )


def _check_name(what: str, name: object) -> str:
    problem = name_problem(name)
    if problem is not None:
        raise DefinitionError(f"{what}: {problem}")
    return name  # type: ignore[return-value]


def _checked(problem: str | None, value: _T) -> _T:
    """`value`, unless `problem` says why it cannot be."""
    if problem is not None:
        raise DefinitionError(problem)
    return value


def _check_key(what: str, text: object) -> str | None:
    if text is None:
        return None
    if not isinstance(text, str):
        raise DefinitionError(f"{what}: a key expression is a string, not {text!r}")
    try:
        key_path(text)
    except GuardSyntaxError as ex:
        raise DefinitionError(f"{what}: {text!r} is no key expression: {ex}") from None
    return text


def _check_prefers(what: str, prefers: object, prefer_for: object) -> None:
    """`prefers` names one label and the key expression of its value; `prefer_for` is a
    duration, and goes with `prefers`."""
    if prefers is None:
        if prefer_for is not None:
            raise DefinitionError(f"{what}: prefer_for= goes with prefers=")
        return
    if not isinstance(prefers, dict) or len(prefers) != 1:
        raise DefinitionError(f"{what}: prefers= names one label: {{'box': \"ctx['box']\"}}")
    [(name, text)] = prefers.items()
    if labels_problem({name: "x"}) is not None:
        raise DefinitionError(f"{what}: prefers: {labels_problem({name: 'x'})}")
    _check_key(f"{what}: prefers: {name!r}", text)
    if prefer_for is not None:
        try:
            parse_duration(str(prefer_for))
        except ValueError as ex:
            raise DefinitionError(f"{what}: prefer_for: {ex}") from None


def _check_model(what: str, model: object) -> type | None:
    if model is None or is_model(model):
        return model  # type: ignore[return-value]
    raise DefinitionError(
        f"{what}: {model!r} is not a model; give a msgspec.Struct class (or a pydantic model)"
    )


class Workflow:
    """A graph of states, events and transitions, with an optional context model."""

    def __init__(
        self,
        name: str,
        context: type | None = None,
        *,
        fairness: str | None = None,
        budget: dict[str, float] | None = None,
        budget_warn: float = BUDGET_WARN,
        **unknown: Any,
    ) -> None:
        _unknown_keywords(
            f"workflow {name!r}", unknown, ("context", "fairness", "budget", "budget_warn")
        )
        self.name = _check_name("workflow", name)
        self.context = _check_model(f"workflow {name!r}: context", context)
        #: The key expression that names each task's fairness key (`stateous.model.keys`).
        self.fairness = _check_key(f"workflow {name!r}: fairness", fairness)
        #: What a token of it and all its children may spend, by unit, unless its start says.
        self.budget = _checked(
            amounts_problem(f"workflow {name!r}: budget", budget, positive=True)
            if budget is not None
            else None,
            dict(budget or {}),
        )
        self.budget_warn = _checked(
            warn_problem(f"workflow {name!r}: budget_warn", budget_warn), budget_warn
        )
        self.states: dict[str, State] = {}
        self.events: dict[str, Event] = {}
        self.transitions: list[Transition] = []
        self.schedules: dict[str, Schedule] = {}
        self.resources: dict[str, Resource] = {}

    def __repr__(self) -> str:
        return f"Workflow({self.name!r})"

    def state(
        self,
        name: str,
        *,
        timeout: str | None = None,
        retries: int = 0,
        retry_delay: str | None = None,
        retry_delay_max: str | None = None,
        stop_on_repeat: int | None = None,
        parallel: Sequence[Workflow] | None = None,
        join: str = "all",
        inputs: Sequence[str] | None = None,
        uses: dict[str, str | int] | None = None,
        needs: dict[str, str] | None = None,
        prefers: dict[str, str] | None = None,
        prefer_for: str | None = None,
        reserve: dict[str, float] | None = None,
        **unknown: Any,
    ) -> State:
        """Declare a state; with `parallel=`, a state whose work is child workflows."""
        what = f"state {name!r}"
        _unknown_keywords(what, unknown, STATE_KEYWORDS)
        _check_name("state", name)
        if name in self.states:
            raise DefinitionError(f"{what} is declared twice in workflow {self.name!r}")
        if timeout is not None:
            try:
                parse_duration(timeout)
            except ValueError as ex:
                raise DefinitionError(f"{what}: {ex}") from None
        if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
            raise DefinitionError(f"{what}: retries={retries!r} must be a whole number, 0 or more")
        children = self._children(what, parallel, join, inputs, retries)
        if needs is not None and (problem := labels_problem(needs)) is not None:
            raise DefinitionError(f"{what}: needs: {problem}; no supervisor could send it")
        if (needs or prefers) and children:
            raise DefinitionError(f"{what}: needs= goes with a task state, not parallel=")
        _check_prefers(what, prefers, prefer_for)
        problem = backoff_problem(retries, retry_delay, retry_delay_max) or repeat_problem(
            retries, stop_on_repeat
        )
        if problem is not None:
            raise DefinitionError(f"{what}: {problem}")
        self._check_uses(what, uses, children)
        self._check_reserve(what, reserve, children)
        state = State(
            self,
            name,
            timeout=timeout,
            retries=retries,
            retry_delay=retry_delay,
            retry_delay_max=retry_delay_max,
            stop_on_repeat=stop_on_repeat,
            parallel=children,
            join=join,
            inputs=tuple(inputs or ()),
            uses=dict(uses or {}),
            needs=dict(needs or {}),
            prefers=dict(prefers or {}),
            prefer_for=prefer_for,
            reserve=dict(reserve or {}),
        )
        self.states[name] = state
        return state

    @staticmethod
    def _check_uses(what: str, uses: object, children: tuple[Workflow, ...]) -> None:
        """The shape of `uses=`: whether each resource is declared is the compiler's rule."""
        if uses is None:
            return
        if not isinstance(uses, dict):
            raise DefinitionError(f"{what}: uses= takes a dict of resource names")
        if children:
            raise DefinitionError(f"{what}: a parallel state has no task, so it cannot have uses=")
        for resource, use in uses.items():
            if isinstance(use, bool) or not isinstance(use, (int, str)):
                raise DefinitionError(
                    f"{what}: uses {resource!r}: {use!r} is neither a key expression nor a count"
                )
            if isinstance(use, str):
                try:
                    key_path(use)
                except GuardSyntaxError as ex:
                    raise DefinitionError(
                        f"{what}: uses {resource!r}: {use!r} is no key expression: {ex}"
                    ) from None

    def _check_reserve(self, what: str, reserve: object, children: tuple[Workflow, ...]) -> None:
        """The shape of `reserve=`, and that it fits the workflow's own budget, if any."""
        if reserve is None:
            return
        problem = amounts_problem(f"{what}: reserve", reserve)
        if problem is None and children:
            problem = f"{what}: a parallel state has no task, so it cannot have reserve="
        if problem is None and self.budget and isinstance(reserve, dict):
            problem = reserve_problem(f"{what}: reserve", reserve, self.budget)
        if problem is not None:
            raise DefinitionError(problem)

    def resource(
        self,
        name: str,
        *,
        slots: int = 1,
        rate: str | None = None,
        breaker: int | None = None,
        **unknown: Any,
    ) -> Resource:
        """Declare a resource that states `uses`: `slots` per key, and maybe a `rate` and a
        `breaker` (so many failed attempts in a row on a key, alike, close it)."""
        what = f"resource {name!r}"
        _unknown_keywords(what, unknown, ("slots", "rate", "breaker"))
        found = resource_problems(name, slots, rate, breaker)
        if name in self.resources:
            found.append(f"it is declared twice in workflow {self.name!r}")
        if found:
            raise DefinitionError(f"{what}: {'; '.join(found)}")
        resource = Resource(name, slots, rate, breaker)
        self.resources[name] = resource
        return resource

    def _children(
        self,
        what: str,
        parallel: Sequence[Workflow] | None,
        join: str,
        inputs: Sequence[str] | None,
        retries: int,
    ) -> tuple[Workflow, ...]:
        if parallel is None:
            if join != "all" or inputs is not None:
                raise DefinitionError(f"{what}: join= and inputs= go with parallel=[...]")
            return ()
        if isinstance(parallel, (str, Workflow)) or not parallel:
            raise DefinitionError(f"{what}: parallel= takes a non-empty list of workflows")
        for child in parallel:
            if not isinstance(child, Workflow):
                raise DefinitionError(f"{what}: {child!r} in parallel= is not a Workflow")
            if child is self:
                raise DefinitionError(f"{what}: a workflow cannot run itself in parallel=")
        names = [child.name for child in parallel]
        if len(set(names)) != len(names):
            raise DefinitionError(f"{what}: parallel= names one workflow twice")
        if join not in JOINS:
            raise DefinitionError(f"{what}: join={join!r} must be 'all' or 'any'")
        if isinstance(inputs, str) or not all(isinstance(key, str) for key in inputs or ()):
            raise DefinitionError(f"{what}: inputs= takes a list of context keys")
        if retries:
            raise DefinitionError(
                f"{what}: a parallel state has no task, so it cannot have retries="
            )
        return tuple(parallel)

    def event(self, name: str, *, payload: type | None = None, **unknown: Any) -> Event:
        """Declare an event, with the model of its payload if it carries data."""
        what = f"event {name!r}"
        _unknown_keywords(what, unknown, ("payload",))
        _check_name("event", name)
        if name in BUILTIN_EVENTS:
            raise DefinitionError(
                f"{what} is an event of Stateous itself; use it by name, as on={name!r}"
            )
        if name in self.events:
            raise DefinitionError(f"{what} is declared twice in workflow {self.name!r}")
        event = Event(self, name, _check_model(f"{what}: payload", payload))
        self.events[name] = event
        return event

    def transition(
        self,
        source: Source,
        target: Target,
        *,
        on: Event | str | None = None,
        when: str | None = None,
        otherwise: bool = False,
        **unknown: Any,
    ) -> Transition:
        """Declare where the event `on` takes a token from `source`."""
        what = f"transition {self._label(source)} -> {self._label(target)}"
        _unknown_keywords(what, unknown, ("on", "when", "otherwise"))
        self._check_end(what, source, "source")
        self._check_end(what, target, "target")
        if source is END:
            raise DefinitionError(f"{what}: nothing leaves END")
        if target is START:
            raise DefinitionError(f"{what}: nothing goes into START")
        if source is START and on is not None:
            raise DefinitionError(f"{what}: a transition from START has no on=")
        if source is not START and on is None:
            raise DefinitionError(f"{what}: say which event takes it, with on=")
        if isinstance(on, Event) and on.workflow is not self:
            raise DefinitionError(
                f"{what}: event {on.name!r} belongs to workflow {on.workflow.name!r}"
            )
        if on is not None and not isinstance(on, (Event, str)):
            raise DefinitionError(f"{what}: on={on!r} is not an event")
        if when is not None and not isinstance(when, str):
            raise DefinitionError(f"{what}: when= takes a guard as a string")
        if not isinstance(otherwise, bool):
            raise DefinitionError(f"{what}: otherwise= is True or False")
        if when is not None and otherwise:
            raise DefinitionError(
                f"{what}: a transition has a guard (when=) or is the fallback (otherwise=True),"
                " not both"
            )
        transition = Transition(source, target, on=on, when=when, otherwise=otherwise)
        self.transitions.append(transition)
        return transition

    def schedule(
        self,
        name: str,
        *,
        cron: str,
        context: dict[str, Any] | None = None,
        overlap: str = "skip",
        catch_up: str = "latest",
        tz: str = "UTC",
        **unknown: Any,
    ) -> Schedule:
        """Start a token of this workflow at each occurrence of `cron` in the zone `tz`."""
        what = f"schedule {name!r}"
        _unknown_keywords(what, unknown, ("cron", "context", "overlap", "catch_up", "tz"))
        found = problems(name, cron, tz, overlap, catch_up)
        if name in self.schedules:
            found.append(f"it is declared twice in workflow {self.name!r}")
        if context is not None and not isinstance(context, dict):
            found.append(f"context: {context!r} is not a dict")
        if found:
            raise DefinitionError(f"{what}: {'; '.join(found)}")
        schedule = Schedule(name, cron, dict(context or {}), overlap, catch_up, tz)
        self.schedules[name] = schedule
        return schedule

    def _check_end(self, what: str, end: object, role: str) -> None:
        if isinstance(end, State) and end.workflow is not self:
            raise DefinitionError(
                f"{what}: state {end.name!r} belongs to workflow {end.workflow.name!r}"
            )
        if not isinstance(end, (State, Terminal, str)):
            raise DefinitionError(f"{what}: the {role} {end!r} is not a state")

    @staticmethod
    def _label(end: object) -> str:
        if isinstance(end, Terminal):
            return end.label
        if isinstance(end, State):
            return repr(end.name)
        return repr(end)
