"""`stateous demo` and the examples, run end to end as a user would."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib.resources import files
from pathlib import Path
from queue import Empty, Queue

import pytest

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
    assert "10 of 10 orders ended" in lines
    assert any(re.fullmatch(r"10 of 10 orders completed in \d+\.\d s", line) for line in lines)
    assert "The history of ORDER-5 (the review sent it back once):" in lines
    assert "ORDER-5: review (visit 2), completed" in lines
    assert any(
        line.endswith('reviewed in review: {"approved": false, "note": "needs another pass"}')
        for line in lines
    )
    assert "Traceback" not in result.stderr


def test_demo_that_stops_by_itself_says_nothing_of_ctrl_c_and_names_its_url_once(
    tmp_path: Path,
) -> None:
    address = free_address()
    result = run_stateous("demo", "--listen", address, "--tokens", "3", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    printed = result.stdout + result.stderr
    assert "Ctrl-C" not in printed
    assert printed.count(f"http://{address}") == 1


def test_the_demo_history_hides_the_entries_that_only_the_engine_writes_at_start(
    tmp_path: Path,
) -> None:
    result = run_stateous("demo", "--listen", free_address(), "--tokens", "5", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    history = result.stdout.split("ORDER-5: review (visit 2), completed\n", 1)[1]
    day, *lines = history.split("\n\n", 1)[0].splitlines()
    assert re.fullmatch(r"-- \d{4}-\d\d-\d\d, times in UTC --", day), day
    shaped = [re.fullmatch(r"\d\d:\d\d:\d\d  #\d+  (.+)", line) for line in lines]
    assert all(shaped), lines
    sentences = [line[1] for line in shaped if line]
    assert sentences[:2] == ["started", "entered draft"]
    assert not any("__started__" in sentence for sentence in sentences)
    assert sentences[-1] == "completed"


def lines_until(
    process: subprocess.Popen[str], done: Callable[[list[str]], bool], timeout: float = 60
) -> list[str]:
    """Read the process's output lines until `done(lines)` holds; fail if it takes too long."""
    queue: Queue[str | None] = Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            queue.put(line.rstrip("\n"))
        queue.put(None)

    threading.Thread(target=read, daemon=True).start()
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while not done(seen):
        try:
            line = queue.get(timeout=max(0.0, deadline - time.monotonic()))
        except Empty:
            pytest.fail(f"the process printed nothing more within {timeout} s: {seen}")
        if line is None:
            pytest.fail(f"the process ended first: {seen}")
        seen.append(line)
    return seen


@contextmanager
def serving(args: list[str], cwd: Path, env: dict[str, str], ready: str) -> Iterator[None]:
    """Run `stateous serve ARGS` in `cwd` until the block ends (stopped by Ctrl-C, as a user
    stops it), once its stderr has a line with `ready`.

    Its stderr goes to a file, not a pipe: a pipe nobody reads fills and stalls it. If it
    ends, or prints no `ready` within 30 s, the test fails at once and shows its stderr.
    """
    log = cwd / "serve.stderr"
    with log.open("wb") as stderr:
        serve = subprocess.Popen(
            [sys.executable, "-m", "stateous", "serve", *args], cwd=cwd, env=env, stderr=stderr
        )
    deadline = time.monotonic() + 30
    while ready not in log.read_text(errors="replace"):
        code = serve.poll()
        if code is not None or time.monotonic() > deadline:
            serve.kill()
            serve.wait()
            why = f"it ended with {code}" if code is not None else "30 s went by"
            pytest.fail(f"serve printed no {ready!r}: {why}; its stderr:\n{log.read_text()}")
        time.sleep(0.1)
    try:
        yield
    finally:
        serve.send_signal(signal.SIGINT)
        serve.wait(timeout=30)


def suggested(output: str, heading: str) -> list[str]:
    """The commands printed after the heading, as the shell would read them."""
    return output.split(f"\n{heading}\n", 1)[1].splitlines()


def shell(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run one printed command line in bash, with the checkout's `python` and `stateous`."""
    return subprocess.run(
        ["bash", "-c", command],
        cwd=cwd,
        env=PRINTED_ENV,
        capture_output=True,
        text=True,
        timeout=60,
    )


#: Where a printed `python -m stateous` finds this checkout, as a user's `python` would.
PRINTED_ENV = {
    **os.environ,
    "PYTHONPATH": str(ROOT),
    "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
}


def test_demo_ends_with_three_commands_that_work_as_printed(tmp_path: Path) -> None:
    result = run_stateous("demo", "--listen", free_address(), "--tokens", "3", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "\nTry next:\n" in result.stdout
    tried = suggested(result.stdout, "Try next:")
    assert len(tried) == 3
    assert tried[0].startswith("  python -m stateous demo --keep --tokens 3 --listen ")
    keep = subprocess.Popen(
        ["bash", "-c", "exec " + tried[0]],
        cwd=tmp_path,
        env=PRINTED_ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines_until(
            keep, lambda seen: any(line.startswith("The control plane keeps") for line in seen)
        )
        keep.send_signal(signal.SIGINT)
        assert keep.wait(timeout=30) == 0
    finally:
        if keep.poll() is None:
            keep.kill()
    for command in tried[1:]:
        done = shell(command, tmp_path)
        assert done.returncode == 0, (command, done.stderr)


def test_demo_serves_on_a_free_port_when_8080_is_taken(tmp_path: Path) -> None:
    """Hold 127.0.0.1:8080 for the run; when another program listens there, it is taken anyway."""
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # past a TIME_WAIT
        try:
            taken.bind(("127.0.0.1", 8080))
            taken.listen()
        except OSError:
            pass
        result = run_stateous("demo", "--tokens", "3", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    first = result.stdout.splitlines()[0]
    served = re.fullmatch(
        r"demo: 3 orders in stateous-demo/, served on (http://127\.0\.0\.1:(\d+))", first
    )
    assert served is not None, first
    assert served[2] != "8080"
    assert (result.stdout + result.stderr).count(served[1]) == 1


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


def test_demo_with_keep_serves_on_and_its_three_commands_work_as_printed(tmp_path: Path) -> None:
    address = free_address()
    process = subprocess.Popen(
        [sys.executable, "-m", "stateous", "demo", "--keep", "--tokens", "2", "--listen", address],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    heading = (
        f"The control plane keeps serving on http://{address} (Ctrl-C stops). "
        "Try, in another terminal:"
    )
    try:
        seen = lines_until(process, lambda seen: len(seen) > 3 and seen[-4] == heading)
        tried = seen[-3:]
        assert [line.split("#")[0].strip() for line in tried] == [
            'python -m stateous token start ORDER-3 \'{"title": "order 3 (rework)"}\''
            f" --url http://{address}",
            f"python -m stateous token show ORDER-3 --url http://{address}",
            f"python -m stateous token show --graph --url http://{address}",
        ]
        for command in tried:
            done = shell(command, tmp_path)
            assert done.returncode == 0, (command, done.stderr)
        assert done.stdout.startswith("stateDiagram-v2")
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
    url = f"http://{address}"
    args = ["sdlc/build/sdlc.json", "--listen", address, "--supervise", "sdlc-supervisor"]
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    with serving(args, tmp_path, env, "serves testing"):
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
