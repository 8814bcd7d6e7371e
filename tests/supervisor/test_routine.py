"""The routine API without a network: `Context`, its memory and notes, timers, events, states.

A `Recorder` stands in for the supervisor's outbox: it keeps every note and memory write
that a context hands it, in order, so a test sees what would be sent and when.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec
import pytest

from stateous import Context, Occurrence, OutcomeError, StateRef, TaskGone, on_state
from stateous.control.validation import Invalid, compile_schema
from stateous.supervisor.routine import EnteredBy, routine_state


class Verdict(msgspec.Struct):
    approved: bool
    note: str = ""


class events:  # noqa: N801 - named as contract.py names it
    class submitted(Occurrence[None]):  # noqa: N801
        name = "submitted"

    class reviewed(Occurrence[Verdict]):  # noqa: N801
        name = "reviewed"

    class poke(Occurrence[None]):  # noqa: N801
        name = "poke"

    class timeout(Occurrence[None]):  # noqa: N801
        name = "timeout"


class states:  # noqa: N801 - named as contract.py names it
    draft = StateRef("draft", emits=(events.submitted,))
    review = StateRef("review", emits=(events.reviewed, events.poke))


class Recorder:
    """A sink that records what a context sends at once: ("note", text), ("memory", k, v)
    or ("spend", amounts)."""

    def __init__(self) -> None:
        self.sent: list[tuple[Any, ...]] = []
        self.gone: str | None = None

    def note(self, text: str) -> None:
        self.sent.append(("note", text))

    def spend(self, amounts: dict[str, float]) -> None:
        self.sent.append(("spend", amounts))

    def memory(self, key: str, value: Any) -> None:
        self.sent.append(("memory", key, value))


def make_context(
    context: dict[str, Any] | None = None, memory: dict[str, Any] | None = None
) -> tuple[Context[Any], Recorder]:
    sink = Recorder()
    ctx: Context[Any] = Context(
        token="ORDER-1",
        task=3,
        state="review",
        visit=2,
        attempt=1,
        context={"title": "an order", "items": [1, 2]} if context is None else context,
        memory={} if memory is None else memory,
        entered_by=EnteredBy("submitted"),
        sink=sink,
    )
    return ctx, sink


# the context


def test_a_context_gives_the_ids_of_its_token_task_visit_attempt_and_entering_event() -> None:
    ctx, _ = make_context()

    assert (ctx.token, ctx.task, ctx.state, ctx.visit, ctx.attempt) == (
        "ORDER-1",
        3,
        "review",
        2,
        1,
    )
    assert (ctx.entered_by.name, ctx.entered_by.payload) == ("submitted", None)


def test_a_context_says_its_task_is_gone_only_once_its_sink_says_why() -> None:
    ctx, sink = make_context()

    ctx.check()
    assert ctx.cancelled is False
    sink.gone = "the control plane took it back"

    assert ctx.cancelled is True
    with pytest.raises(
        TaskGone, match=r"^task 3 of ORDER-1 is gone: the control plane took it back$"
    ):
        ctx.check()


def test_task_gone_is_no_exception_so_a_routine_s_except_exception_lets_it_through() -> None:
    assert not issubclass(TaskGone, Exception)


def test_a_value_read_from_the_context_is_a_copy_that_changes_nothing() -> None:
    ctx, sink = make_context()

    ctx["items"].append(3)
    ctx.get("items").append(4)

    assert ctx["items"] == [1, 2]
    assert ctx.changes == {}
    assert sink.sent == []


def test_a_missing_context_key_raises_key_error_and_get_gives_the_default() -> None:
    ctx, _ = make_context()

    with pytest.raises(KeyError):
        ctx["missing"]
    assert ctx.get("missing") is None
    assert ctx.get("missing", 7) == 7
    assert "title" in ctx and "missing" not in ctx


def test_a_write_to_the_context_is_recorded_as_a_change_and_read_back_but_not_sent() -> None:
    ctx, sink = make_context()

    ctx["items"] = [*ctx["items"], 3]
    ctx["pair"] = (1, "two")

    assert ctx["items"] == [1, 2, 3]
    assert ctx.changes == {"items": [1, 2, 3], "pair": [1, "two"]}
    assert sink.sent == []


def test_a_context_value_that_json_cannot_hold_raises_type_error_and_changes_nothing() -> None:
    ctx, _ = make_context()

    with pytest.raises(TypeError, match="is not a JSON value"):
        ctx["when"] = object()
    assert ctx.changes == {}
    assert "when" not in ctx


def test_text_that_is_no_unicode_is_not_a_json_value_either() -> None:
    # A file name that is not UTF-8, as os.listdir gives it: its bytes as lone surrogates.
    ctx, _ = make_context()

    with pytest.raises(TypeError, match=r"is not a JSON value: .*surrogates not allowed"):
        ctx["files"] = ["build-\udcff.log"]
    assert ctx.changes == {}
    assert "files" not in ctx


# memory


def test_a_memory_write_goes_to_the_sink_at_once_and_is_read_back_as_a_copy() -> None:
    ctx, sink = make_context(memory={"dev": "old"})

    ctx.memory["session"] = {"id": "abc", "turns": [1]}
    assert sink.sent == [("memory", "session", {"id": "abc", "turns": [1]})]

    ctx.memory["session"]["turns"].append(2)
    assert ctx.memory["session"] == {"id": "abc", "turns": [1]}
    assert dict(ctx.memory) == {"dev": "old", "session": {"id": "abc", "turns": [1]}}
    assert len(ctx.memory) == 2
    assert ctx.changes == {}


def test_memory_from_an_earlier_attempt_is_there_at_the_start() -> None:
    ctx, sink = make_context(memory={"session": "abc"})

    assert ctx.memory["session"] == "abc"
    assert ctx.memory.get("other") is None
    assert sink.sent == []


@pytest.mark.parametrize("length", [1, 128])
def test_a_memory_key_of_1_to_128_characters_is_accepted(length: int) -> None:
    ctx, sink = make_context()

    ctx.memory["k" * length] = 1

    assert sink.sent == [("memory", "k" * length, 1)]


@pytest.mark.parametrize(
    "key",
    ["", "k" * 129, 7, "k\x00", "line\nbreak"],
    ids=["empty", "129-characters", "not-a-str", "nul", "line-break"],
)
def test_a_memory_key_that_is_empty_too_long_not_a_string_or_not_plain_raises_value_error(
    key: Any,
) -> None:
    ctx, sink = make_context()

    with pytest.raises(ValueError, match="a memory key has 1 to 128 characters"):
        ctx.memory[key] = 1

    assert sink.sent == []
    assert len(ctx.memory) == 0


def test_a_memory_value_of_none_raises_value_error_and_sends_nothing() -> None:
    ctx, sink = make_context(memory={"session": "abc"})

    with pytest.raises(ValueError, match="del"):
        ctx.memory["session"] = None

    assert sink.sent == []
    assert ctx.memory["session"] == "abc"


def test_a_memory_value_that_json_cannot_hold_raises_type_error_and_sends_nothing() -> None:
    ctx, sink = make_context()

    with pytest.raises(TypeError):
        ctx.memory["session"] = object()

    assert sink.sent == []


def test_del_deletes_a_memory_key_and_sends_the_deletion_at_once() -> None:
    ctx, sink = make_context(memory={"session": "abc"})

    del ctx.memory["session"]

    assert sink.sent == [("memory", "session", None)]
    assert "session" not in ctx.memory


def test_del_of_a_memory_key_that_is_not_set_raises_key_error_and_sends_nothing() -> None:
    ctx, sink = make_context()

    with pytest.raises(KeyError):
        del ctx.memory["session"]

    assert sink.sent == []


# notes


def test_a_note_goes_to_the_sink_at_once_in_order() -> None:
    ctx, sink = make_context()

    ctx.note("step 1")
    ctx.memory["session"] = "abc"
    ctx.note("step 2")

    assert sink.sent == [("note", "step 1"), ("memory", "session", "abc"), ("note", "step 2")]


def test_a_spend_goes_to_the_sink_at_once_in_any_units() -> None:
    ctx, sink = make_context()

    ctx.spend(usd=0.12, tokens=3400)
    ctx.note("step 1")

    assert sink.sent == [("spend", {"usd": 0.12, "tokens": 3400.0}), ("note", "step 1")]


@pytest.mark.parametrize(
    ("amounts", "words"),
    [
        ({"usd": -1}, "ctx.spend: usd is -1; it must be a number 0 or more"),
        ({"usd": "1"}, "ctx.spend: usd is '1', not a number"),
        ({"USD": 1}, "ctx.spend: 'USD' is not a unit name"),
    ],
    ids=["negative", "text", "unit"],
)
def test_a_bad_spend_raises_value_error_and_sends_nothing(
    amounts: dict[str, Any], words: str
) -> None:
    ctx, sink = make_context()

    with pytest.raises(ValueError, match=re.escape(words)):
        ctx.spend(**amounts)

    assert sink.sent == []


def test_a_note_of_500_characters_is_sent_whole() -> None:
    ctx, sink = make_context()

    ctx.note("n" * 500)

    assert sink.sent == [("note", "n" * 500)]


def test_a_note_longer_than_500_characters_raises_value_error_and_sends_nothing() -> None:
    ctx, sink = make_context()

    with pytest.raises(ValueError, match="a note has at most 500 characters, not 501"):
        ctx.note("n" * 501)

    assert sink.sent == []


@pytest.mark.parametrize("text", ["", "   ", "\n"], ids=["empty", "spaces", "newline"])
def test_an_empty_note_does_nothing(text: str) -> None:
    ctx, sink = make_context()

    ctx.note(text)

    assert sink.sent == []


# timers


def test_schedule_takes_an_event_class_or_an_event_with_its_payload() -> None:
    ctx, sink = make_context()

    ctx.schedule(events.poke, after="10m")
    ctx.schedule(events.reviewed(Verdict(approved=False, note="late")), after="2h")

    assert ctx.schedules == [
        {"event": "poke", "after": "10m", "payload": None},
        {"event": "reviewed", "after": "2h", "payload": {"approved": False, "note": "late"}},
    ]
    assert sink.sent == []


@pytest.mark.parametrize("after", ["soon", "0s", "10", "9999d"])
def test_schedule_with_a_bad_duration_raises_value_error(after: str) -> None:
    ctx, _ = make_context()

    with pytest.raises(ValueError, match=r"duration|too long"):
        ctx.schedule(events.poke, after=after)

    assert ctx.schedules == []


def test_schedule_refuses_an_event_of_stateous_itself() -> None:
    ctx, _ = make_context()

    with pytest.raises(ValueError, match="a timer cannot fire 'timeout'"):
        ctx.schedule(events.timeout, after="1m")

    assert ctx.schedules == []


def test_schedule_refuses_something_that_is_not_an_event() -> None:
    ctx, _ = make_context()

    with pytest.raises(TypeError, match=r"schedule takes an event of contract\.py"):
        ctx.schedule("poke", after="1m")  # type: ignore[arg-type]


# events


def test_an_event_carries_its_payload_and_gives_it_as_json() -> None:
    verdict = events.reviewed(Verdict(approved=True, note="fine"))

    assert verdict.name == "reviewed"
    assert verdict.payload == Verdict(approved=True, note="fine")
    assert verdict.payload_json() == {"approved": True, "note": "fine"}
    assert events.submitted().payload_json() is None
    assert events.reviewed.payload_type is Verdict
    assert events.submitted.payload_type is None


def test_events_are_equal_when_their_kind_and_payload_are() -> None:
    assert events.submitted() == events.submitted()
    assert events.reviewed(Verdict(True)) == events.reviewed(Verdict(True))
    assert events.reviewed(Verdict(True)) != events.reviewed(Verdict(False))
    assert events.submitted() != events.poke()


def test_an_event_without_a_payload_refuses_one() -> None:
    with pytest.raises(TypeError, match="the event 'submitted' has no payload"):
        events.submitted(Verdict(True))  # type: ignore[arg-type]


def test_an_event_with_a_payload_model_needs_one() -> None:
    with pytest.raises(TypeError, match="the event 'reviewed' needs a payload of type Verdict"):
        events.reviewed()


def test_a_payload_that_is_not_an_object_cannot_be_sent() -> None:
    class counted(Occurrence[int]):  # noqa: N801 - named as contract.py names events
        name = "counted"

    with pytest.raises(TypeError, match="is not an object"):
        counted(3).payload_json()


# states and their outcomes


def test_a_state_finds_the_events_it_emits_by_name() -> None:
    assert states.review.event("reviewed") is events.reviewed
    assert states.review.event("submitted") is None
    assert states.draft.emits == (events.submitted,)


def test_on_state_marks_a_routine_with_its_state() -> None:
    @on_state(states.draft)
    def draft(ctx: Context[Any]) -> events.submitted:
        return events.submitted()

    assert routine_state(draft) is states.draft
    assert routine_state(lambda ctx: None) is None


def test_on_state_refuses_something_that_is_not_a_state_of_the_contract() -> None:
    with pytest.raises(TypeError, match=r"on_state takes a state of contract\.py"):
        on_state("draft")  # type: ignore[arg-type]


def test_the_outcome_schema_of_a_state_has_one_choice_per_event_with_its_payload() -> None:
    schema = states.review.outcome_schema()

    assert schema["title"] == "the outcome of 'review'"
    choices = {choice["properties"]["event"]["const"]: choice for choice in schema["anyOf"]}
    assert set(choices) == {"reviewed", "poke"}
    assert choices["poke"]["properties"]["payload"] == {
        "anyOf": [{"type": "null"}, {"type": "object", "maxProperties": 0}]
    }
    assert (choices["poke"]["required"], choices["reviewed"]["required"]) == (
        ["event"],
        ["event", "payload"],
    )
    assert choices["reviewed"]["properties"]["payload"] == {"$ref": "#/$defs/Verdict"}
    assert schema["$defs"]["Verdict"]["required"] == ["approved"]
    assert all(choice["additionalProperties"] is False for choice in schema["anyOf"])


def test_the_outcome_schema_accepts_exactly_what_outcome_turns_into_an_event() -> None:
    check = compile_schema(states.review.outcome_schema())
    good = [
        {"event": "reviewed", "payload": {"approved": True}},
        {"event": "poke", "payload": None},
        {"event": "poke", "payload": {}},
        {"event": "poke"},
    ]
    bad = [
        {"event": "submitted", "payload": None},
        {"event": "reviewed", "payload": {"approved": "yes"}},
        {"event": "reviewed"},
        {"event": "reviewed", "payload": {"approved": True}, "why": "it is fine"},
        {"event": "poke", "payload": {"x": 1}},
    ]

    for data in good:
        check(data, "outcome")
        states.review.outcome(data)
    for data in bad:
        with pytest.raises(Invalid):
            check(data, "outcome")
        with pytest.raises(OutcomeError):
            states.review.outcome(data)


def test_a_state_without_payloads_has_an_outcome_schema_without_defs() -> None:
    schema = states.draft.outcome_schema()

    assert "$defs" not in schema
    assert [choice["properties"]["event"] for choice in schema["anyOf"]] == [{"const": "submitted"}]


def test_outcome_makes_the_event_with_its_payload_checked() -> None:
    assert states.review.outcome(
        {"event": "reviewed", "payload": {"approved": False, "note": "no"}}
    ) == events.reviewed(Verdict(approved=False, note="no"))
    assert states.review.outcome({"event": "poke"}) == events.poke()
    assert states.review.outcome({"event": "poke", "payload": {}}) == events.poke()


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ("reviewed", "an outcome of 'review' is an object with an 'event' name"),
        ({"payload": {}}, "an outcome of 'review' is an object with an 'event' name"),
        ({"event": "submitted"}, "'review' cannot emit 'submitted'; it emits 'reviewed', 'poke'"),
        ({"event": "poke", "payload": {"x": 1}}, "the event 'poke' has no payload"),
        (
            {"event": "reviewed", "payload": {"approved": "maybe"}},
            "the payload of 'reviewed' does not fit: ",
        ),
        ({"event": "reviewed", "payload": None}, "the payload of 'reviewed' does not fit: "),
    ],
    ids=[
        "not-an-object",
        "no-event",
        "not-emitted",
        "payload-for-none",
        "bad-payload",
        "missing-payload",
    ],
)
def test_outcome_raises_outcome_error_for_data_that_does_not_fit(data: Any, says: str) -> None:
    with pytest.raises(OutcomeError) as raised:
        states.review.outcome(data)

    assert says in str(raised.value)
    assert isinstance(raised.value, ValueError)


# pydantic models, as the other implementation's contract.py declares them


@pytest.fixture
def pydantic_contract() -> dict[str, Any]:
    """A contract's models and a state written with pydantic: `Look` nests `Reason`,
    whose field has an alias."""
    pydantic = pytest.importorskip("pydantic")

    class Reason(pydantic.BaseModel):
        text: str = pydantic.Field(alias="reasonText")

    class Look(pydantic.BaseModel):
        approved: bool
        reasons: list[Reason] = pydantic.Field(default_factory=list)

    class looked(Occurrence[Look]):  # noqa: N801 - named as contract.py names events
        name = "looked"

    state = StateRef("look", emits=(looked, events.poke))
    return {"Reason": Reason, "Look": Look, "looked": looked, "state": state}


def test_a_pydantic_payload_context_value_memory_value_and_timer_payload_are_sent_as_json(
    pydantic_contract: dict[str, Any],
) -> None:
    look = pydantic_contract["Look"](approved=True, reasons=[{"reasonText": "tidy"}])
    as_json = {"approved": True, "reasons": [{"reasonText": "tidy"}]}
    ctx, sink = make_context()

    ctx["look"] = look
    ctx["looks"] = [look, {"nested": look}]
    ctx.memory["look"] = look
    ctx.schedule(pydantic_contract["looked"](look), after="1m")

    assert pydantic_contract["looked"](look).payload_json() == as_json
    assert ctx.changes == {"look": as_json, "looks": [as_json, {"nested": as_json}]}
    assert ctx["look"] == as_json
    assert sink.sent == [("memory", "look", as_json)]
    assert ctx.memory["look"] == as_json
    assert ctx.schedules == [{"event": "looked", "after": "1m", "payload": as_json}]


def test_a_pydantic_model_class_is_not_a_json_value() -> None:
    pydantic = pytest.importorskip("pydantic")
    ctx, _ = make_context()

    with pytest.raises(TypeError, match="is not a JSON value"):
        ctx["model"] = pydantic.BaseModel

    assert ctx.changes == {}


def test_outcome_makes_a_pydantic_payload_and_refuses_one_that_does_not_fit(
    pydantic_contract: dict[str, Any],
) -> None:
    state, looked, look = (pydantic_contract[name] for name in ("state", "looked", "Look"))

    made = state.outcome({"event": "looked", "payload": {"approved": False}})

    assert made == looked(look(approved=False))
    for payload in ({"approved": "maybe"}, None):
        with pytest.raises(OutcomeError, match="the payload of 'looked' does not fit: "):
            state.outcome({"event": "looked", "payload": payload})


def test_the_outcome_schema_of_pydantic_payloads_accepts_what_outcome_accepts(
    pydantic_contract: dict[str, Any],
) -> None:
    schema = pydantic_contract["state"].outcome_schema()
    check = compile_schema(schema)

    choices = {choice["properties"]["event"]["const"]: choice for choice in schema["anyOf"]}
    assert choices["looked"]["properties"]["payload"] == {"$ref": "#/$defs/Look"}
    assert set(schema["$defs"]) == {"Look", "Reason"}
    check(
        {"event": "looked", "payload": {"approved": True, "reasons": [{"reasonText": "a"}]}},
        "outcome",
    )
    for bad in ({"approved": True, "reasons": [{"text": "a"}]}, {"reasons": []}):
        with pytest.raises(Invalid):
            check({"event": "looked", "payload": bad}, "outcome")


def test_quota_exhausted_reports_its_reset_in_utc_and_refuses_what_cannot_be() -> None:
    from datetime import datetime, timedelta, timezone

    from stateous import QuotaExhausted
    from stateous.supervisor.attempt import failed_report

    paris = timezone(timedelta(hours=1))
    raised = QuotaExhausted("llm", resets_at=datetime(2026, 1, 5, 15, 5, 10, tzinfo=paris))
    assert failed_report("ignored", raised) == {
        "kind": "quota",
        "resource": "llm",
        "resets_at": "2026-01-05T14:05:10Z",
        "reason": "the quota of llm is used up",
    }
    assert QuotaExhausted(retry_after=2, reason="429").report() == {
        "kind": "quota",
        "retry_after": 2.0,
        "reason": "429",
    }
    with pytest.raises(ValueError, match="not both"):
        QuotaExhausted("llm", resets_at=datetime.now(paris), retry_after=1)
    with pytest.raises(ValueError, match="time zone"):
        QuotaExhausted("llm", resets_at=datetime(2026, 1, 5))
    with pytest.raises(ValueError, match="0 or more"):
        QuotaExhausted("llm", retry_after=-1)
