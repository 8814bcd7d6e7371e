"""`stateous demo` and the examples, run end to end as a user would."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
from importlib.resources import files
from pathlib import Path

from stateous.compiler.starter import render
from tests.conftest import ROOT, run_stateous

EXAMPLES = ROOT / "examples"


def free_address() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


def test_demo_runs_the_orders_to_the_end_and_shows_a_history(tmp_path: Path) -> None:
    result = run_stateous("demo", "--listen", free_address(), "--tokens", "10", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("demo: 10 orders in stateous-demo/, served on http://127.0.0.1:")
    assert "10/10 tokens ended" in lines
    assert "    10 completed in review" in lines
    assert "The history of ORDER-5 (the review sent it back once):" in lines
    assert "ORDER-5: review (visit 2), completed" in lines
    assert any(
        line.endswith('reviewed in review: {"approved": false, "note": "needs another pass"}')
        for line in lines
    )
    assert "Traceback" not in result.stderr
    assert result.stderr.rstrip().endswith("stopped")


def test_demo_runs_again_in_its_own_folder(tmp_path: Path) -> None:
    for _ in range(2):
        result = run_stateous("demo", "--listen", free_address(), "--tokens", "3", cwd=tmp_path)
        assert result.returncode == 0, result.stderr


def test_demo_refuses_a_folder_that_is_not_its_own(tmp_path: Path) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    result = run_stateous("demo", "mine", "--listen", free_address(), cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr == (
        "error: mine holds files that demo did not write; give demo a new or empty folder\n"
    )
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"


def test_demo_names_a_port_in_use_and_the_option_to_choose_another(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_stateous("demo", "--listen", f"127.0.0.1:{port}", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr == (
        f"error: cannot listen on 127.0.0.1:{port}: the port is in use; "
        "choose another address with --listen HOST:PORT\n"
    )


def test_demo_with_keep_serves_on_and_prints_what_to_try(tmp_path: Path) -> None:
    address = free_address()
    process = subprocess.Popen(
        [sys.executable, "-m", "stateous", "demo", "--keep", "--tokens", "2", "--listen", address],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        seen = []
        assert process.stdout is not None
        for line in process.stdout:
            seen.append(line.rstrip("\n"))
            if line.startswith("  stateous token show --graph"):
                break
        assert f"The control plane keeps serving on http://{address} (Ctrl-C stops). Try:" in seen
        shown = run_stateous("token", "show", "ORDER-1", "--url", f"http://{address}", cwd=tmp_path)
        assert shown.stdout.startswith("ORDER-1: review, completed\n")
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()


def test_the_orders_example_is_what_demo_writes() -> None:
    for name in ("flow.py", "schemas.py"):
        assert (EXAMPLES / "orders" / name).read_text() == render(name, "orders", "examples/orders")
    templates = files("stateous.compiler.templates")
    for state in ("draft", "review"):
        assert (EXAMPLES / "orders-supervisor" / f"{state}.py").read_text() == templates.joinpath(
            f"demo-{state}.py.tmpl"
        ).read_text()


def test_the_example_graph_files_are_up_to_date(tmp_path: Path) -> None:
    for name in ("orders", "sdlc"):
        shutil.copytree(EXAMPLES / name, tmp_path / name, ignore=shutil.ignore_patterns("build"))
        result = run_stateous("compile", f"{name}/flow.py", cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        written = (tmp_path / name / "build" / f"{name}.json").read_bytes()
        assert written == (EXAMPLES / name / "build" / f"{name}.json").read_bytes()


def test_the_orders_supervisor_contract_fits_the_graph() -> None:
    from stateous.compiler.contract import contract
    from stateous.model.graph_file import load

    graph = load((EXAMPLES / "orders" / "build" / "orders.json").read_bytes())
    assert (EXAMPLES / "orders-supervisor" / "contract.py").read_text() == contract(graph).text


def test_the_sdlc_example_runs_the_tests_of_a_checkout(tmp_path: Path) -> None:
    """`coding` is done by hand (its agent needs the phd extra); `testing` runs pytest."""
    shutil.copytree(EXAMPLES / "sdlc", tmp_path / "sdlc")
    shutil.copytree(
        EXAMPLES / "sdlc-supervisor",
        tmp_path / "sdlc-supervisor",
        ignore=shutil.ignore_patterns("coding.py", ".stateous"),
    )
    checkout = tmp_path / "repo"
    checkout.mkdir()
    (checkout / "test_ok.py").write_text("def test_ok() -> None:\n    assert True\n")
    address = free_address()
    serve = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "stateous",
            "serve",
            "sdlc/build/sdlc.json",
            "--listen",
            address,
            "--supervise",
            "sdlc-supervisor",
        ],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://{address}"
    try:
        assert serve.stderr is not None
        while "serves testing" not in serve.stderr.readline():
            assert serve.poll() is None
        started = run_stateous(
            "token", "start", "TICKET-1", f'{{"repo": "{checkout}"}}', "--url", url, cwd=tmp_path
        )
        assert started.stdout == "TICKET-1: coding, active\n"
        fired = run_stateous("token", "fire", "TICKET-1", "done", "--url", url, cwd=tmp_path)
        assert fired.stdout == "TICKET-1: testing, active\n"
        for _ in range(150):
            shown = run_stateous("token", "show", "TICKET-1", "--url", url, cwd=tmp_path)
            if shown.stdout.startswith("TICKET-1: testing, completed"):
                break
        assert shown.stdout.startswith("TICKET-1: testing, completed\n"), shown.stdout
        assert "1 passed, 0 failed" in shown.stdout
        assert 'passed in testing: {"passed": 1, "failed": 0}' in shown.stdout
    finally:
        serve.send_signal(signal.SIGINT)
        serve.wait(timeout=30)
