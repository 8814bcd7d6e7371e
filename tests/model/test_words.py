"""The words both sides share are written once, in `stateous.model`: where a wire type or a
schema must spell them again (a `Literal` for the API's JSON Schema, a CHECK list of the
supervisor's outbox), it spells exactly the model's."""

from __future__ import annotations

import re
from typing import get_args, get_type_hints

from stateous.model.vocabulary import MessageKind, ReportKind
from stateous.model.wire import ReportBody
from stateous.supervisor.outbox import BODIES, SCHEMA


def test_a_report_body_takes_the_report_kinds_of_the_model() -> None:
    assert get_args(get_type_hints(ReportBody)["kind"]) == tuple(ReportKind)


def test_the_outbox_keeps_the_message_kinds_of_the_model() -> None:
    listed = re.search(r"CHECK \(kind IN \(([^)]*)\)\)", SCHEMA)
    assert listed is not None
    assert tuple(word.strip(" '") for word in listed[1].split(",")) == tuple(MessageKind)
    assert tuple(BODIES) == tuple(MessageKind)
