"""`stateous compile` and `stateous init workflow`, run as real processes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_stateous

EXAMPLE = ROOT / "examples" / "sdlc"


def assert_one_error_line(result: subprocess.CompletedProcess[str], text: str) -> None:
    assert result.returncode == 1
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    assert result.stderr == f"error: {text}\n"


def write_flow(folder: Path, flow: str, schemas: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "flow.py").write_text(flow)
    if schemas is not None:
        (folder / "schemas.py").write_text(schemas)
    return folder / "flow.py"


def test_init_workflow_writes_a_starter_that_compiles(stateous, tmp_path: Path) -> None:
    result = stateous("init", "workflow", "orders")
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        "wrote    orders/flow.py\n"
        "wrote    orders/schemas.py\n"
        "wrote    orders/pyproject.toml\n"
        "wrote    orders/build/orders.json\n"
        "\n"
        "Next steps:\n"
        "  python -m stateous serve orders/build/orders.json\n"
        "  python -m stateous init supervisor orders/flow.py orders-supervisor\n"
    )
    graph = json.loads((tmp_path / "orders" / "build" / "orders.json").read_text())
    assert graph["workflow"] == "orders"
    assert list(graph["states"]) == ["draft", "review"]
    assert graph["transitions"][2] == {
        "from": "review",
        "to": "__end__",
        "on": "reviewed",
        "when": "payload.approved == true",
    }
    assert "msgspec" in (tmp_path / "orders" / "schemas.py").read_text()


#: What pip writes as the `stateous` command of an installed package.
ENTRY_POINT = """#!{python}
import re
import sys
from stateous.cli.main import main
if __name__ == "__main__":
    sys.argv[0] = re.sub(r"(-script\\.pyw|\\.exe)?$", "", sys.argv[0])
    sys.exit(main())
"""


def installed(folder: Path) -> list[str]:
    """Write an entry point as pip does into folder/bin; return the command that runs it."""
    command = folder / "bin" / "stateous"
    command.parent.mkdir()
    command.write_text(ENTRY_POINT.format(python=sys.executable))
    command.chmod(0o755)
    return [str(command)]


@pytest.mark.parametrize(
    ("start", "words"),
    [
        (lambda tmp_path: [sys.executable, "-m", "stateous"], "python -m stateous"),
        (
            lambda tmp_path: [sys.executable, str(ROOT / "stateous.py")],
            f"python3 {ROOT}/stateous.py",
        ),
        (installed, "stateous"),
    ],
    ids=["python -m stateous", "stateous.py in a checkout", "the installed command"],
)
def test_the_next_steps_name_the_command_as_it_was_started(
    tmp_path: Path, start, words: str
) -> None:
    done = subprocess.run(
        [*start(tmp_path), "init", "workflow", "orders"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-2:] == [
        f"  {words} serve orders/build/orders.json",
        f"  {words} init supervisor orders/flow.py orders-supervisor",
    ]


def test_the_starter_passes_ruff(stateous, tmp_path: Path) -> None:
    assert stateous("init", "workflow", "orders").returncode == 0
    ruff = shutil.which("ruff") or str(Path(__import__("sys").executable).parent / "ruff")
    lint = subprocess.run(
        [ruff, "check", "--select", "E,F,I,B,UP", "."],
        cwd=tmp_path / "orders",
        capture_output=True,
        text=True,
    )
    assert lint.returncode == 0, lint.stdout


def test_init_workflow_refuses_a_folder_with_a_flow(stateous, tmp_path: Path) -> None:
    (tmp_path / "orders").mkdir()
    (tmp_path / "orders" / "flow.py").write_text("# mine\n")
    result = stateous("init", "workflow", "orders")
    assert_one_error_line(result, "orders/flow.py exists; init does not write over a workflow")
    assert (tmp_path / "orders" / "flow.py").read_text() == "# mine\n"


def test_init_workflow_keeps_an_existing_pyproject(stateous, tmp_path: Path) -> None:
    (tmp_path / "orders").mkdir()
    (tmp_path / "orders" / "pyproject.toml").write_text("[project]\nname = 'mine'\n")
    result = stateous("init", "workflow", "orders")
    assert result.returncode == 0, result.stderr
    assert "kept     orders/pyproject.toml\n" in result.stdout
    assert (tmp_path / "orders" / "pyproject.toml").read_text() == "[project]\nname = 'mine'\n"


def test_init_workflow_with_a_local_checkout(stateous, tmp_path: Path) -> None:
    result = stateous("init", "workflow", "orders", "--stateous-path", str(ROOT))
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "orders" / "pyproject.toml").read_text()
    assert "[tool.uv.sources]" in text
    assert f'stateous = {{ path = "{ROOT.as_posix()}", editable = true }}' in text


def test_init_workflow_refuses_a_bad_name(stateous) -> None:
    result = stateous("init", "workflow", "My Orders")
    assert result.returncode == 1
    assert result.stderr.startswith("error: the workflow's name: 'My Orders' is not a valid name")


def test_compile_writes_the_graph_file_beside_the_flow(stateous, tmp_path: Path) -> None:
    shutil.copytree(EXAMPLE, tmp_path / "sdlc", ignore=shutil.ignore_patterns("build"))
    result = stateous("compile", "sdlc/flow.py")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "wrote sdlc/build/sdlc.json\n"
    written = (tmp_path / "sdlc" / "build" / "sdlc.json").read_bytes()
    assert written == (EXAMPLE / "build" / "sdlc.json").read_bytes()


def test_compile_with_out(stateous, tmp_path: Path) -> None:
    shutil.copytree(EXAMPLE, tmp_path / "sdlc", ignore=shutil.ignore_patterns("build"))
    result = stateous("compile", "sdlc/flow.py", "--out", "graphs/sdlc.json")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "wrote graphs/sdlc.json\n"
    assert (tmp_path / "graphs" / "sdlc.json").is_file()
    assert not (tmp_path / "sdlc" / "build").exists()


def test_compile_is_byte_for_byte_deterministic(stateous, tmp_path: Path) -> None:
    shutil.copytree(EXAMPLE, tmp_path / "sdlc", ignore=shutil.ignore_patterns("build"))
    outputs = []
    for seed in ("1", "2"):
        result = stateous("compile", "sdlc/flow.py", env={"PYTHONHASHSEED": seed})
        assert result.returncode == 0, result.stderr
        outputs.append((tmp_path / "sdlc" / "build" / "sdlc.json").read_bytes())
    assert outputs[0] == outputs[1]


def test_a_workflow_with_problems_lists_them_and_writes_nothing(stateous, tmp_path: Path) -> None:
    flow = write_flow(
        tmp_path / "orders",
        """
from stateous import END, START, Workflow
from schemas import Item, Verdict

flow = Workflow("orders", context=Item)
draft = flow.state("draft")
review = flow.state("review")
shipping = flow.state("shipping")
submitted = flow.event("submitted")
reviewed = flow.event("reviewed", payload=Verdict)
flow.transition(START, draft)
flow.transition(draft, review, on=submitted)
flow.transition(shipping, END, on=submitted)
flow.transition(review, END, on=reviewed, when="ctx['amount'] > 100")
flow.transition(review, draft, on=reviewed, when="ctx['amount'] > 50")
""",
        """
import msgspec

class Item(msgspec.Struct):
    title: str
    amount: int = 0

class Verdict(msgspec.Struct):
    approved: bool
""",
    )
    result = stateous("compile", str(flow))
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == (
        "error: workflow 'orders' is not valid:\n"
        "  - state 'shipping' cannot be reached from START; add a transition into it\n"
        "  - 'reviewed' from 'review': the guards \"ctx['amount'] > 100\" and "
        "\"ctx['amount'] > 50\" can both be true, e.g. when ctx['amount'] = 101; make them "
        "exclusive, or make one the fallback (otherwise=True)\n"
    )
    assert not (tmp_path / "orders" / "build").exists()


def test_a_flow_that_does_not_import(stateous, tmp_path: Path) -> None:
    write_flow(tmp_path / "orders", "from schemaz import Item\n")
    result = stateous("compile", "orders/flow.py")
    assert result.returncode == 1
    assert result.stderr.startswith("error: orders/flow.py does not import: ModuleNotFoundError: ")
    assert "(flow.py, line 1)" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_flow_with_a_syntax_error(stateous, tmp_path: Path) -> None:
    write_flow(tmp_path / "orders", "x = (\n")
    result = stateous("compile", "orders/flow.py")
    assert result.returncode == 1
    assert result.stderr.startswith("error: orders/flow.py does not import: ")
    assert result.stderr.count("\n") == 1


def test_a_mistake_at_definition_names_it(stateous, tmp_path: Path) -> None:
    write_flow(
        tmp_path / "orders",
        "from stateous import Workflow\nflow = Workflow('orders')\n"
        "flow.state('review', timeout='2 hours')\n",
    )
    result = stateous("compile", "orders/flow.py")
    assert_one_error_line(
        result, "state 'review': '2 hours' is not a duration; write e.g. '30s', '10m', '2h', '1d'"
    )


def test_a_flow_without_a_workflow(stateous, tmp_path: Path) -> None:
    write_flow(tmp_path / "orders", "x = 1\n")
    assert_one_error_line(
        stateous("compile", "orders/flow.py"), "orders/flow.py defines no Workflow at module level"
    )


def test_a_flow_with_two_top_workflows(stateous, tmp_path: Path) -> None:
    body = """
from stateous import END, START, Workflow
a = Workflow("a")
b = Workflow("b")
"""
    write_flow(tmp_path / "two", body)
    assert_one_error_line(
        stateous("compile", "two/flow.py"),
        "two/flow.py defines 2 workflows that no parallel state runs ('a', 'b'); "
        "keep one top workflow per file",
    )


def test_a_missing_flow(stateous, tmp_path: Path) -> None:
    assert_one_error_line(stateous("compile", "nowhere/flow.py"), "nowhere/flow.py does not exist")


def test_a_graph_file_that_cannot_be_written(stateous, tmp_path: Path) -> None:
    shutil.copytree(EXAMPLE, tmp_path / "sdlc", ignore=shutil.ignore_patterns("build"))
    (tmp_path / "blocker").write_text("a file, not a folder")
    result = stateous("compile", "sdlc/flow.py", "--out", "blocker/sdlc.json")
    assert result.returncode == 1
    assert result.stderr.startswith("error: cannot write blocker/sdlc.json: ")
    assert result.stderr.count("\n") == 1


def test_a_pydantic_flow_compiles(stateous, tmp_path: Path) -> None:
    write_flow(
        tmp_path / "sdlc",
        (EXAMPLE / "flow.py").read_text(),
        """
from pydantic import BaseModel

class Ticket(BaseModel):
    repo: str

class Tests(BaseModel):
    passed: int
    failed: int
""",
    )
    result = stateous("compile", "sdlc/flow.py")
    assert result.returncode == 0, result.stderr
    graph = json.loads((tmp_path / "sdlc" / "build" / "sdlc.json").read_text())
    assert graph["schemas"]["Ticket"]["properties"]["repo"]["type"] == "string"
    assert graph["schemas"]["Tests"]["required"] == ["passed", "failed"]


def test_every_command_has_help(stateous) -> None:
    for command in (
        ["--help"],
        ["compile", "--help"],
        ["init", "--help"],
        ["init", "workflow", "--help"],
    ):
        result = stateous(*command)
        assert result.returncode == 0
        assert result.stdout.startswith("usage: stateous")


def test_version(stateous) -> None:
    result = stateous("--version")
    assert result.returncode == 0
    assert result.stdout.startswith("stateous ")


def test_the_launcher_runs_from_a_checkout(tmp_path: Path) -> None:
    import sys

    result = subprocess.run(
        [sys.executable, str(ROOT / "stateous.py"), "--version"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0
    assert result.stdout.startswith("stateous ")


def test_the_command_runs_as_a_module_from_anywhere(tmp_path: Path) -> None:
    assert run_stateous("--version", cwd=tmp_path).returncode == 0
