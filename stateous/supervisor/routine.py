"""What a routine sees: `on_state`, `Context`, `Occurrence`, `StateRef`, `OutcomeError`, `TaskGone`.

A routine is a function marked with `@on_state(states.X)`. It gets a `Context`
(the token's context, its memory, notes and timers) and returns an `Occurrence`
(an event of its state, with its payload) or None. The generated `contract.py`
subclasses these types for one workflow. Nothing here talks to the network: a
context hands notes and memory writes to a sink that the supervisor gives it.

A contract's models are msgspec Structs, or pydantic models (as the other
implementation writes them). pydantic is never imported here: its models are
known by their methods, so a supervisor without pydantic runs as well.
"""

from __future__ import annotations

import copy
import inspect
import typing
from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import msgspec

from stateous.model.budgets import amounts_problem
from stateous.model.durations import parse_duration
from stateous.model.limits import MEMORY_KEY_LIMIT, NOTE_LIMIT
from stateous.model.names import BUILTIN_EVENTS, plain_text
from stateous.model.vocabulary import ReportKind

Payload = TypeVar("Payload")
Model = TypeVar("Model")
Routine = TypeVar("Routine", bound=Callable[..., Any])

#: Where a schema's references point, as msgspec and pydantic spell the model's name.
_REF = "#/$defs/{name}"
_PYDANTIC_REF = "#/$defs/{model}"
_MARK = "__stateous_state__"
_STUB = "__stateous_stub__"


class OutcomeError(ValueError):
    """Data that does not name an event of the state, or whose payload does not fit."""


class RetryLater(Exception):
    """Raised by a routine to fail this attempt and ask for its next one in `seconds` (a
    provider's `Retry-After`) instead of the state's `retry_delay`.

    The attempt counts as failed, with `reason` as its error: without retries left, the
    token gets `error` as after any other failed attempt.
    """

    def __init__(self, seconds: float, reason: str = "") -> None:
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds < 0:
            raise ValueError(f"RetryLater takes a number of seconds, 0 or more, not {seconds!r}")
        super().__init__(reason or f"retry in {seconds:g} seconds")
        self.seconds = float(seconds)
        self.reason = reason


class QuotaExhausted(Exception):
    """Raised by a routine when a provider's quota stops its work (a 429): the attempt is
    given back, not counted, and the key of `resource` that the task took closes until the
    quota resets, at `resets_at` (an aware datetime) or in `retry_after` seconds; without
    either, for a wait the control plane doubles. Without `resource`, only the task waits.
    """

    def __init__(
        self,
        resource: str | None = None,
        *,
        resets_at: datetime | None = None,
        retry_after: float | None = None,
        reason: str = "",
    ) -> None:
        if resets_at is not None and retry_after is not None:
            raise ValueError("QuotaExhausted takes resets_at= or retry_after=, not both")
        if resets_at is not None and (
            not isinstance(resets_at, datetime) or resets_at.utcoffset() is None
        ):
            raise ValueError(f"resets_at= is a datetime with its time zone, not {resets_at!r}")
        if retry_after is not None and (
            isinstance(retry_after, bool)
            or not isinstance(retry_after, (int, float))
            or retry_after < 0
        ):
            raise ValueError(f"retry_after= is a number of seconds, 0 or more: {retry_after!r}")
        super().__init__(reason or f"the quota of {resource or 'the provider'} is used up")
        self.resource = resource
        self.resets_at = resets_at
        self.retry_after = None if retry_after is None else float(retry_after)
        self.reason = reason or str(self)

    def report(self) -> dict[str, Any]:
        """The body of the quota report that says it."""
        body: dict[str, Any] = {"kind": ReportKind.QUOTA, "reason": self.reason}
        if self.resource is not None:
            body["resource"] = self.resource
        if self.retry_after is not None:
            body["retry_after"] = self.retry_after
        if self.resets_at is not None:
            moment = self.resets_at.astimezone(UTC)
            body["resets_at"] = moment.isoformat().replace("+00:00", "Z")
        return body


class TaskGone(BaseException):
    """Raised by `ctx.check()` once the routine's task is gone: cancelled, taken back by the
    control plane, or given back at a forced stop.

    Like `asyncio.CancelledError` it is not an `Exception`, so the `except Exception` of an
    agent's loop lets it through and the routine ends; what it returns then is ignored.
    """


def _model_values(value: Any) -> Any:
    """Give msgspec what it cannot encode itself: a pydantic model, as its JSON values.

    The names are the aliases, as in the model's JSON Schema, which the control
    plane checks.
    """
    dump = None if isinstance(value, type) else getattr(value, "model_dump", None)
    if dump is None:
        raise TypeError(f"Encoding objects of type {type(value).__name__} is unsupported")
    return dump(mode="json", by_alias=True)


_encode = msgspec.json.Encoder(enc_hook=_model_values).encode


def _json(value: Any) -> Any:
    """The value as JSON values; raise TypeError for anything JSON cannot hold, text that
    is no Unicode included (a name that is not UTF-8, as `os.listdir` gives it)."""
    try:
        return msgspec.json.decode(_encode(value))
    except (TypeError, UnicodeEncodeError, msgspec.EncodeError) as ex:
        raise TypeError(f"{value!r} is not a JSON value: {ex}") from None


def _convert(data: Any, model: Any) -> Any:
    """Read JSON values into a contract's model: a msgspec Struct or a pydantic model."""
    validate = getattr(model, "model_validate", None)
    return msgspec.convert(data, model) if validate is None else validate(data)


def _is_model(value: Any) -> bool:
    """Tell whether a type is a contract's model: a msgspec Struct or a pydantic model."""
    return isinstance(value, type) and (
        issubclass(value, msgspec.Struct) or hasattr(value, "model_validate")
    )


def _first_error(error: ValueError) -> str:
    """One line for a validation error: msgspec's own, or pydantic's first, with its place."""
    errors = getattr(error, "errors", None)
    if not callable(errors):
        return str(error)
    first = errors()[0]
    place = ".".join(str(part) for part in first.get("loc", ()))
    return f"{first['msg']} - at `$.{place}`" if place else str(first["msg"])


class Occurrence(Generic[Payload]):
    """An event of the workflow, with its payload: what a routine returns.

    The contract declares one subclass per event, e.g. `class done(Occurrence[None])`
    with `name = "done"`; `events.passed(result)` makes one with a payload.
    """

    name: ClassVar[str] = ""
    payload_type: ClassVar[Any] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for base in getattr(cls, "__orig_bases__", ()):
            if typing.get_origin(base) is Occurrence:
                (argument,) = typing.get_args(base)
                cls.payload_type = None if argument is type(None) else argument

    def __init__(self, payload: Payload | None = None) -> None:
        if self.payload_type is None and payload is not None:
            raise TypeError(f"the event {self.name!r} has no payload")
        if self.payload_type is not None and payload is None:
            raise TypeError(
                f"the event {self.name!r} needs a payload of type {self.payload_type.__name__}"
            )
        self.payload = payload

    def payload_json(self) -> dict[str, Any] | None:
        """The payload as JSON values, as the control plane reads it."""
        if self.payload is None:
            return None
        built = _json(self.payload)
        if not isinstance(built, dict):
            raise TypeError(f"the payload of {self.name!r} is not an object")
        return built

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.payload!r})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.payload == self.payload

    def __hash__(self) -> int:
        return hash(self.name)


class StateRef:
    """A state of the workflow, as the contract names it, with the events it may emit."""

    def __init__(self, name: str, emits: tuple[type[Occurrence[Any]], ...] = ()) -> None:
        self.name = name
        self.emits = emits

    def __repr__(self) -> str:
        return f"StateRef({self.name!r})"

    def event(self, name: str) -> type[Occurrence[Any]] | None:
        """The event class of this state with that name, if the state emits it."""
        return next((event for event in self.emits if event.name == name), None)

    def outcome_schema(self) -> dict[str, Any]:
        """One JSON Schema for every outcome of the state: `{"event": name, "payload": ...}`."""
        types = dict.fromkeys(event.payload_type for event in self.emits if event.payload_type)
        structs = [model for model in types if not hasattr(model, "model_json_schema")]
        schemas, components = msgspec.json.schema_components(structs, ref_template=_REF)
        by_type = dict(zip(structs, schemas, strict=True))
        for model in types:
            if model not in by_type:
                by_type[model] = _pydantic_schema(model, components)
        choices = [
            {
                "type": "object",
                "properties": {
                    "event": {"const": event.name},
                    "payload": by_type[event.payload_type] if event.payload_type else no_payload(),
                },
                "required": ["event", "payload"] if event.payload_type else ["event"],
                "additionalProperties": False,
            }
            for event in self.emits
        ]
        schema: dict[str, Any] = {"title": f"the outcome of {self.name!r}", "anyOf": choices}
        if components:
            schema["$defs"] = components
        return schema

    def outcome(self, data: Any) -> Occurrence[Any]:
        """Make the event that `data` names, checked; raise OutcomeError if it does not fit."""
        if not isinstance(data, dict) or not isinstance(data.get("event"), str):
            raise OutcomeError(f"an outcome of {self.name!r} is an object with an 'event' name")
        for key in data:
            if key not in ("event", "payload"):
                raise OutcomeError(f"an outcome has an 'event' and a 'payload', and no {key!r}")
        event = self.event(data["event"])
        if event is None:
            names = ", ".join(repr(item.name) for item in self.emits)
            raise OutcomeError(f"{self.name!r} cannot emit {data['event']!r}; it emits {names}")
        payload = data.get("payload")
        if event.payload_type is None:
            if payload not in (None, {}):
                raise OutcomeError(f"the event {event.name!r} has no payload")
            return event()
        try:
            return event(_convert(payload, event.payload_type))
        except ValueError as ex:  # msgspec's and pydantic's ValidationError are ValueErrors
            raise OutcomeError(f"the payload of {event.name!r} does not fit: {ex}") from None


def no_payload() -> dict[str, Any]:
    """The schema of what an event without a payload may carry as one: none, null, or `{}`."""
    return {"anyOf": [{"type": "null"}, {"type": "object", "maxProperties": 0}]}


def _pydantic_schema(model: Any, components: dict[str, Any]) -> dict[str, Any]:
    """A reference to a pydantic model's schema, put with the models it uses in `components`."""
    schema = dict(model.model_json_schema(ref_template=_PYDANTIC_REF))
    components.update(schema.pop("$defs", {}))
    if set(schema) == {"$ref"}:  # a model that refers to itself is already in its $defs
        return schema
    components[model.__name__] = schema
    return {"$ref": _REF.format(name=model.__name__)}


def on_state(state: StateRef, *, stub: bool = False) -> Callable[[Routine], Routine]:
    """Mark a function as the routine of `state`; `stub=True` marks the stub that `init
    supervisor` wrote, which no supervisor serves, so that it never fails a task."""
    if not isinstance(state, StateRef):
        raise TypeError(f"on_state takes a state of contract.py, e.g. states.coding, not {state!r}")

    def mark(routine: Routine) -> Routine:
        setattr(routine, _MARK, state)
        setattr(routine, _STUB, stub)
        return routine

    return mark


def routine_state(value: object) -> StateRef | None:
    """The state a function was marked for, or None."""
    state = getattr(value, _MARK, None)
    return state if isinstance(state, StateRef) else None


def is_stub(value: object) -> bool:
    """Whether a routine is still the stub that `init supervisor` wrote."""
    return getattr(value, _STUB, False) is True


class Sink(Protocol):
    """Where a context sends what is saved at once: notes and memory writes; `gone` says
    why the task is no longer held (None while it is)."""

    @property
    def gone(self) -> str | None: ...
    def note(self, text: str) -> None: ...
    def memory(self, key: str, value: Any) -> None: ...
    def spend(self, amounts: dict[str, float]) -> None: ...


@dataclass(frozen=True, slots=True)
class EnteredBy:
    """The event that brought the token into its state: `name`, and `payload` if any."""

    name: str
    payload: Any = None


class Memory(MutableMapping[str, Any]):
    """The routine's own store for one token and one state; every write is saved at once."""

    def __init__(self, values: dict[str, Any], sink: Sink) -> None:
        self._values = dict(values)
        self._sink = sink

    def __getitem__(self, key: str) -> Any:
        return copy.deepcopy(self._values[key])

    def __setitem__(self, key: str, value: Any) -> None:
        if not plain_text(key, MEMORY_KEY_LIMIT):
            raise ValueError(
                f"a memory key has 1 to {MEMORY_KEY_LIMIT} characters and no control characters"
            )
        if value is None:
            raise ValueError("a memory value cannot be None; delete the key with del instead")
        value = _json(value)
        self._sink.memory(key, value)
        self._values[key] = value

    def __delitem__(self, key: str) -> None:
        del self._values[key]
        self._sink.memory(key, None)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._values))

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Memory({self._values!r})"


class Context(Generic[Model]):
    """What a routine gets as `ctx`: the token's context and the tools of one attempt.

    `ctx["key"]` reads a copy, `ctx["key"] = value` is a change saved with the
    outcome; `ctx.memory` and `ctx.note()` are saved at once; `ctx.schedule()` sets
    a timer with the outcome; `ctx.cancelled` and `ctx.check()` tell a long routine
    that its task is gone.
    """

    def __init__(
        self,
        *,
        token: str,
        task: int,
        state: str,
        visit: int,
        attempt: int,
        context: dict[str, Any],
        memory: dict[str, Any],
        entered_by: EnteredBy,
        sink: Sink,
    ) -> None:
        self.token = token
        self.task = task
        self.state = state
        self.visit = visit
        self.attempt = attempt
        self.entered_by = entered_by
        self.memory = Memory(memory, sink)
        self._context = dict(context)
        self._sink = sink
        self.changes: dict[str, Any] = {}
        self.schedules: list[dict[str, Any]] = []

    def __getitem__(self, key: str) -> Any:
        return copy.deepcopy(self._context[key])

    def __setitem__(self, key: str, value: Any) -> None:
        value = _json(value)
        self._context[key] = value
        self.changes[key] = value

    def __contains__(self, key: object) -> bool:
        return key in self._context

    def get(self, key: str, default: Any = None) -> Any:
        """Read a copy of a context value, or `default` when it is not set."""
        return copy.deepcopy(self._context[key]) if key in self._context else default

    @property
    def cancelled(self) -> bool:
        """Whether the task is gone (cancelled, taken back, given back): time to stop."""
        return self._sink.gone is not None

    def check(self) -> None:
        """Raise `TaskGone` if the task is gone; a long loop calls it at each step."""
        gone = self._sink.gone
        if gone is not None:
            raise TaskGone(f"task {self.task} of {self.token} is gone: {gone}")

    def note(self, text: str) -> None:
        """Add one line of progress to the token's history, at once; empty text adds nothing."""
        text = str(text).strip()
        if not text:
            return
        if len(text) > NOTE_LIMIT:
            raise ValueError(f"a note has at most {NOTE_LIMIT} characters, not {len(text)}")
        self._sink.note(text)

    def spend(self, **amounts: float) -> None:
        """Record what this attempt spent, at once, by unit (`usd=0.12, tokens=3400`): a row
        of the ledger, counted against the budget of the token's tree."""
        problem = amounts_problem("ctx.spend", amounts)
        if problem is not None:
            raise ValueError(problem)
        if amounts:
            self._sink.spend({unit: float(amount) for unit, amount in amounts.items()})

    def schedule(self, event: Occurrence[Any] | type[Occurrence[Any]], *, after: str) -> None:
        """Fire `event` on the token after a duration such as '10m', if it is still here."""
        occurrence = event() if isinstance(event, type) else event
        if not isinstance(occurrence, Occurrence):
            raise TypeError(f"schedule takes an event of contract.py, not {event!r}")
        if occurrence.name in BUILTIN_EVENTS:
            raise ValueError(f"a timer cannot fire {occurrence.name!r}")
        parse_duration(after)
        self.schedules.append(
            {"event": occurrence.name, "after": after, "payload": occurrence.payload_json()}
        )

    def __repr__(self) -> str:
        return f"Context(token={self.token!r}, state={self.state!r}, task={self.task})"


def model_of(hint: Any) -> Any:
    """The model of a context type such as `Context[Item]`; None for a plain dict or no model."""
    if typing.get_origin(hint) is not Context:
        return None
    (model,) = typing.get_args(hint)
    return model if _is_model(model) else None


def context_model(routine: Callable[..., Any]) -> Any:
    """The context model that a routine declares with `ctx: ItemContext`, or None."""
    try:
        first = next(iter(inspect.signature(routine).parameters), None)
        hints = typing.get_type_hints(routine)
    except Exception:  # user code: a signature or an annotation that cannot be read says nothing
        return None
    return model_of(hints.get(first)) if first is not None else None


def context_misfit(context: dict[str, Any], model: Any) -> str | None:
    """Say why a token's context does not fit a context model; None when it fits."""
    if model is None:
        return None
    try:
        _convert(context, model)
    except ValueError as ex:  # msgspec's and pydantic's ValidationError are ValueErrors
        return f"the context does not fit the model {model.__name__}: {_first_error(ex)}"
    return None
