"""`flow.schedule` and the compiler: bad fields refused at once with the field named, a
context that breaks the model refused by `compile`, and the graph file's `schedules`: absent
without schedules, outside the structure, inside the checksum."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from stateous import END, START, Workflow
from stateous.compiler.compile import CompileError, compile_workflow
from stateous.model import graph_file
from stateous.model.errors import DefinitionError


class Report(msgspec.Struct):
    title: str
    pages: int = 1


def reports(**schedule: Any) -> Workflow:
    flow = Workflow("reports", context=Report)
    write = flow.state("write")
    flow.transition(START, write)
    flow.transition(write, END, on=flow.event("written"))
    if schedule:
        flow.schedule("nightly", **schedule)
    return flow


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"cron": "0 3 * *"}, "cron: '0 3 * *' has 4 field(s)"),
        ({"cron": "0 3 * * fr"}, "cron: the day of the week field: 'fr' is not"),
        ({"cron": "0 3 * * *", "tz": "Paris"}, "tz: 'Paris' is no time zone known here"),
        ({"cron": "0 3 * * *", "overlap": "queue"}, "overlap: 'queue' is not one of"),
        ({"cron": "0 3 * * *", "catch_up": "all"}, "catch_up: 'all' is not one of latest, none"),
        ({"cron": "0 3 * * *", "every": "day"}, "unknown keyword 'every'"),
    ],
)
def test_a_bad_schedule_is_refused_in_flow_py_naming_its_field(
    options: dict[str, Any], named: str
) -> None:
    with pytest.raises(DefinitionError) as refused:
        reports(**options)
    assert str(refused.value).startswith("schedule 'nightly': ")
    assert named in str(refused.value)


def test_a_context_that_breaks_the_model_is_refused_by_compile() -> None:
    with pytest.raises(CompileError) as refused:
        compile_workflow(reports(cron="0 3 * * *", context={"pages": 2}))
    assert refused.value.problems == [
        "schedule 'nightly': context: Object missing required field `title`"
    ]


def test_the_schedules_are_in_the_checksum_and_outside_the_structure() -> None:
    plain = compile_workflow(reports())
    assert b'"schedules"' not in graph_file.dump(plain)
    nightly = compile_workflow(reports(cron="0  3 * * *", context={"title": "t"}, tz="UTC"))
    assert msgspec.to_builtins(nightly)["schedules"] == {
        "nightly": {"cron": "0 3 * * *", "context": {"title": "t"}}
    }
    assert graph_file.checksum(nightly) != graph_file.checksum(plain)
    assert graph_file.structure(nightly) == graph_file.structure(plain)
    assert graph_file.load(graph_file.dump(nightly)) == nightly


def test_compile_prints_the_schedule_refusal(tmp_path: Path, stateous: Any) -> None:
    (tmp_path / "flow.py").write_text(
        "from stateous import END, START, Workflow\n"
        "flow = Workflow('jobs')\n"
        "work = flow.state('work')\n"
        "flow.transition(START, work)\n"
        "flow.transition(work, END, on=flow.event('done'))\n"
        "flow.schedule('nightly', cron='0 3 * * *', tz='Mars/Olympus')\n"
    )
    done = stateous("compile", "flow.py")
    assert done.returncode == 1
    assert "schedule 'nightly': tz: 'Mars/Olympus' is no time zone known here" in done.stderr
    assert not (tmp_path / "build").exists()
