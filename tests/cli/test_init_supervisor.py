"""`stateous init supervisor`, run as a real process: from a flow.py, a graph file and a
running control plane; the files it writes, keeps and skips; and the sources it refuses."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stateous import END, START, Workflow
from stateous.compiler.compile import compile_workflow
from stateous.model.graph_file import dump
from tests.conftest import ROOT
from tests.control.serving import Launcher, orders, write_graph

SDLC = ROOT / "examples" / "sdlc"
NEXT = "Write the routines, then run: python -m stateous supervise sdlc-supervisor"


def lines(done: subprocess.CompletedProcess[str]) -> list[str]:
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def python_in(folder: Path, code: str) -> subprocess.CompletedProcess[str]:
    """Run Python code inside the folder, as the supervisor would import its files."""
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=folder,
        env={"PYTHONPATH": f"{folder}:{ROOT}"},
        capture_output=True,
        text=True,
        timeout=60,
    )


def assert_ruff_clean(folder: Path) -> None:
    """Run the venv's ruff on the folder, as its owner might."""
    ruff = Path(sys.executable).parent / "ruff"
    checked = subprocess.run(
        [str(ruff), "check", "--no-cache", "--select", "E,F,I,B,UP", "."],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def write_flow(tmp_path: Path, flow: Workflow, name: str = "graph.json") -> Path:
    path = tmp_path / name
    path.write_bytes(dump(compile_workflow(flow)))
    return path


def test_a_flow_py_gives_a_folder_that_passes_ruff_and_imports(stateous, tmp_path: Path) -> None:
    assert lines(stateous("init", "supervisor", str(SDLC / "flow.py"), "sdlc-supervisor")) == [
        "wrote    sdlc-supervisor/contract.py",
        "wrote    sdlc-supervisor/coding.py",
        "wrote    sdlc-supervisor/testing.py",
        "wrote    sdlc-supervisor/stateous.yaml",
        "wrote    sdlc-supervisor/pyproject.toml",
        "wrote    sdlc-supervisor/.gitignore",
        "",
        NEXT,
    ]
    folder = tmp_path / "sdlc-supervisor"
    assert_ruff_clean(folder)
    imported = python_in(folder, "import contract, coding, testing; print(coding.coding.__name__)")
    assert imported.returncode == 0, imported.stderr
    assert (folder / "coding.py").read_text().splitlines()[-3:] == [
        "@on_state(states.coding, stub=True)",
        "def coding(ctx: TicketContext) -> events.done | events.stuck:",
        "    raise NotImplementedError(\"do the work of 'coding' here\")",
    ]
    assert 'url: "http://127.0.0.1:8080"' in (folder / "stateous.yaml").read_text()
    assert "tasks: 4" in (folder / "stateous.yaml").read_text()
    project = (folder / "pyproject.toml").read_text()
    assert 'name = "sdlc-supervisor"' in project
    assert 'requires-python = ">=3.11"' in project
    assert "[tool.uv.sources]" not in project
    assert (folder / ".gitignore").read_text().splitlines()[-1] == ".stateous/"


def test_a_second_run_keeps_what_exists_and_writes_the_new_state(stateous, tmp_path: Path) -> None:
    first = write_flow(tmp_path, orders(), "first.json")
    second = write_flow(tmp_path, orders(extra_state=True), "second.json")
    lines(stateous("init", "supervisor", str(first), "shop"))
    (tmp_path / "shop" / "draft.py").write_text("# mine now\n")
    assert lines(stateous("init", "supervisor", str(second), "shop")) == [
        "wrote    shop/contract.py",
        "skipped  shop/draft.py (it exists, with no routine of 'draft')",
        "kept     the routine of 'review'",
        "wrote    shop/rework.py",
        "kept     shop/stateous.yaml",
        "kept     shop/pyproject.toml",
        "kept     shop/.gitignore",
        "",
        "Write the routines, then run: python -m stateous supervise shop",
    ]
    assert (tmp_path / "shop" / "draft.py").read_text() == "# mine now\n"
    assert "rework" in (tmp_path / "shop" / "contract.py").read_text()


def test_a_routine_in_any_file_counts_as_the_state_s(stateous, tmp_path: Path) -> None:
    folder = tmp_path / "sdlc-supervisor"
    folder.mkdir()
    (folder / "runner.py").write_text(
        "import stateous\nfrom contract import events, states\n\n\n"
        "@stateous.on_state(states.testing)\ndef run(ctx):\n    return events.passed\n"
    )
    assert lines(stateous("init", "supervisor", str(SDLC / "flow.py"), "sdlc-supervisor"))[:3] == [
        "wrote    sdlc-supervisor/contract.py",
        "wrote    sdlc-supervisor/coding.py",
        "kept     the routine of 'testing'",
    ]
    assert not (folder / "testing.py").exists()


def test_a_graph_file_and_a_stateous_path_give_the_uv_sources(stateous, tmp_path: Path) -> None:
    done = stateous(
        "init", "supervisor", str(SDLC / "build" / "sdlc.json"), "sv", "--stateous-path", str(ROOT)
    )
    assert lines(done)[:2] == ["wrote    sv/contract.py", "wrote    sv/coding.py"]
    project = (tmp_path / "sv" / "pyproject.toml").read_text()
    assert f'stateous = {{ path = "{ROOT.as_posix()}", editable = true }}' in project


def test_a_url_takes_the_graph_that_the_control_plane_serves(
    stateous, tmp_path: Path, launcher: Launcher
) -> None:
    graph = write_graph(tmp_path / "orders.json", orders())
    served = launcher.serve(tmp_path / "orders.json", tmp_path / "orders.db")
    assert lines(stateous("init", "supervisor", served.url + "/", "shop"))[:3] == [
        "wrote    shop/contract.py",
        "wrote    shop/draft.py",
        "wrote    shop/review.py",
    ]
    assert f'url: "{served.url}"' in (tmp_path / "shop" / "stateous.yaml").read_text()
    imported = python_in(tmp_path / "shop", "import contract; print(contract.__checksum__)")
    assert imported.returncode == 0, imported.stderr
    from stateous.model.graph_file import checksum

    assert imported.stdout.strip() == checksum(graph)


def test_child_workflows_shadowed_modules_and_twin_names_get_their_own_stubs(
    stateous, tmp_path: Path
) -> None:
    review = Workflow("design-review")
    triage = review.state("triage")
    review.transition(START, triage)
    review.transition(triage, END, on=review.event("approved"))
    flow = Workflow("sdlc")
    queue = flow.state("queue")
    dashed, plain = flow.state("a-b"), flow.state("a_b")
    reviews = flow.state("reviews", parallel=[review])
    flow.transition(START, queue)
    flow.transition(queue, dashed, on=flow.event("next"))
    flow.transition(dashed, plain, on="next")
    flow.transition(plain, reviews, on="next")
    flow.transition(reviews, END, on="joined")
    source = write_flow(tmp_path, flow)
    assert lines(stateous("init", "supervisor", str(source), "sv"))[1:5] == [
        "wrote    sv/queue_routine.py",
        "wrote    sv/a_b.py",
        "wrote    sv/a_b_2.py (a_b.py is the stub of 'a-b')",
        "wrote    sv/design_review_triage.py",
    ]
    assert not (tmp_path / "sv" / "reviews.py").exists()
    stub = (tmp_path / "sv" / "design_review_triage.py").read_text()
    assert "@on_state(states.design_review.triage, stub=True)" in stub
    assert "(ctx: DesignReviewContext) -> events.design_review.approved:" in stub
    imported = python_in(tmp_path / "sv", "import contract, queue_routine, a_b, a_b_2")
    assert imported.returncode == 0, imported.stderr
    assert_ruff_clean(tmp_path / "sv")


def compile_error_flow(folder: Path) -> Path:
    shutil.copytree(SDLC, folder, ignore=shutil.ignore_patterns("build", "__pycache__"))
    flow = folder / "flow.py"
    flow.write_text(flow.read_text().replace("when=\"count('failed') < 3\"", 'when="nonsense <"'))
    return flow


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("missing.json", "error: missing.json is not a file, nor an http:// or https:// URL"),
        ("notes.json", "error: notes.json is not a graph file: it is not a Stateous graph file"),
        ("http://127.0.0.1:9/", "error: cannot reach the control plane at http://127.0.0.1:9"),
        ("broken/flow.py", "error: "),
    ],
)
def test_a_bad_source_says_why_in_one_line_and_writes_nothing(
    stateous, tmp_path: Path, source: str, message: str
) -> None:
    (tmp_path / "notes.json").write_text('{"notes": []}')
    compile_error_flow(tmp_path / "broken")
    done = stateous("init", "supervisor", source, "sv")
    assert done.returncode == 1
    assert done.stderr.startswith(message), done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""
    assert not (tmp_path / "sv").exists()


def test_supervise_without_settings_names_the_init_command_as_it_was_started(
    stateous, tmp_path: Path
) -> None:
    (tmp_path / "box").mkdir()
    done = stateous("supervise", "box")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        "error: box/stateous.yaml does not exist; make the folder with: "
        "python -m stateous init supervisor SOURCE box\n"
    )


def test_supervise_without_a_contract_names_the_init_command_as_it_was_started(
    stateous, tmp_path: Path
) -> None:
    (tmp_path / "box").mkdir()
    (tmp_path / "box" / "stateous.yaml").write_text('url: "http://127.0.0.1:8080"\n')
    done = stateous("supervise", "box")
    assert (done.returncode, done.stdout) == (1, "")
    folder = tmp_path.resolve() / "box"
    assert done.stderr == (
        f"error: {folder / 'contract.py'} does not exist; write it with: "
        f"python -m stateous init supervisor SOURCE {folder}\n"
    )
