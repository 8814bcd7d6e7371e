"""stateous.pyz run as `python3.X -I stateous.pyz ...` by each installed target CPython.

The pyz is dist/stateous.pyz when it is newer than every file it is built from, and otherwise
a fresh build in a temporary folder. Every run has its own extension cache and an empty
working folder, so that no test leans on another's first run, on the user's cache, or on a
checkout. A target CPython that is not installed is skipped; none installed at all fails.
"""

from __future__ import annotations

import importlib.machinery
import json
import os
import re
import socket
import subprocess
import sys
import tarfile
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

import stateous
from stateous import _unpacking, _zipapp
from stateous.control.http import ui
from tests.conftest import ROOT
from tests.zipapp.support import (
    REPORT,
    TARGETS,
    assert_complete,
    build,
    cache_folders,
    environment,
    find_python,
    inner_members,
    inner_read,
    manifest_of,
    run,
    running_entry,
)

SERVING = re.compile(r"serving on (http://\S+) ")
DRAFT = '''"""Submit every draft at once."""

from stateous import on_state

from contract import ItemContext, events, states


@on_state(states.draft)
def draft(ctx: ItemContext) -> events.submitted:
    return events.submitted()
'''

REVIEW = '''"""Approve every review, after noting where the libraries were loaded from."""

import sys

import apsw
import msgspec
import yaml
from stateous import on_state

from contract import ItemContext, Verdict, events, states


@on_state(states.review)
def review(ctx: ItemContext) -> events.reviewed:
    with open("origins.txt", "w") as out:
        for module in (sys.modules["stateous"], msgspec, apsw, yaml):
            print(module.__name__, module.__file__, file=out)
    return events.reviewed(Verdict(approved=True))
'''


def start(
    python: str, pyz: Path, *args: str, cwd: Path, cache: Path, log: Path
) -> subprocess.Popen[str]:
    """Start `python -I pyz ARGS` in the background, its stderr and stdout going to log."""
    with log.open("w") as out:
        return subprocess.Popen(
            [python, "-I", str(pyz), *args],
            cwd=cwd,
            env=environment(cache),
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )


def wait_for_url(process: subprocess.Popen[str], log: Path, timeout: float = 30.0) -> str:
    """Return the URL of the `serving on` line that serve writes to log."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = SERVING.search(log.read_text())
        if found:
            return found[1]
        assert process.poll() is None, f"serve ended early: {log.read_text()}"
        time.sleep(0.05)
    raise AssertionError(f"serve printed no URL within {timeout} s: {log.read_text()}")


def free_address() -> str:
    """Return a loopback address whose port is free now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


def token_status(url: str, token: str) -> str:
    """Return a token's status, read over HTTP."""
    with urllib.request.urlopen(f"{url}/tokens/{token}", timeout=10) as answer:
        return json.load(answer)["status"]


def stop(process: subprocess.Popen[str]) -> int:
    """Stop a process with SIGTERM and return its exit code."""
    if process.poll() is None:
        process.terminate()
    return process.wait(timeout=30)


def cache_tag(tag: str) -> str:
    """The name that a wheel tag's CPython gives its bytecode: `cp312` is `cpython-312`."""
    return tag.replace("cp", "cpython-")


def test_at_least_one_target_python_is_installed() -> None:
    assert any(find_python(version) for version in TARGETS), f"none of {TARGETS} is installed"


def test_the_pyz_starts_with_a_python_line_and_carries_every_target(pyz: Path) -> None:
    assert pyz.read_bytes().startswith(b"#!/usr/bin/env python3\n")
    manifest = manifest_of(pyz)
    with zipfile.ZipFile(pyz) as archive:
        infos = {info.filename: info for info in archive.infolist()}
    assert sorted(manifest["targets"]) == ["cp311", "cp312", "cp313"]
    # A dozen members or so: the import system reads the index of each at every start.
    assert len(infos) < 30, sorted(infos)
    assert infos["__main__.py"].compress_type == zipfile.ZIP_STORED
    assert "_python/platformdirs/__init__.py" in infos
    source = inner_members(pyz, _unpacking.SOURCE)
    for module in ("stateous/__init__", "stateous/control/engine", "falcon/__init__"):
        assert f"{module}.py" in source
    assert "yaml/__init__.py" in source
    assert set(source) == set(manifest["source"])
    assert not any(name.endswith(".so") for name in source)
    for tag, target in manifest["targets"].items():
        files = inner_members(pyz, _unpacking.inner_archive(tag))
        assert set(files) == set(target["files"])
        cached = f"{cache_tag(tag)}.pyc"
        for package, module in (("stateous", "__init__"), ("stateous/control", "engine")):
            assert files[f"{package}/__pycache__/{module}.{cached}"].type == tarfile.REGTYPE
        # Of apsw, only the compiled module `apsw` itself: no tools, no stubs, no second
        # extension.
        assert [name for name in files if name.startswith("apsw/")] == [
            f"apsw/__init__.{cache_tag(tag)}-{platform_part()}.so"
        ]
    lines = [
        manifest["platform"],
        *(f"{tag} {target['hash']}" for tag, target in manifest["targets"].items()),
    ]
    with zipfile.ZipFile(pyz) as archive:
        assert archive.read(_zipapp.TARGETS).decode().splitlines() == lines


def platform_part() -> str:
    """The part of an extension's file name that names the machine, e.g. `x86_64-linux-gnu`."""
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    return suffix.split("-", 2)[2].removesuffix(".so")


def test_the_pyz_of_three_cpythons_keeps_within_8_mib(pyz: Path) -> None:
    assert pyz.stat().st_size <= 8 * 2**20


MAGIC = "import importlib.util; print(importlib.util.MAGIC_NUMBER.hex())"
SHOW_A_TRACEBACK = """
import sys, traceback
sys.path.insert(0, sys.argv[1])
from stateous.model.durations import parse_duration
try:
    parse_duration("soon")
except ValueError:
    traceback.print_exc()
"""


def test_each_cpython_runs_the_bytecode_it_compiled_and_tracebacks_show_the_source(
    python: str, pyz: Path, folders: tuple[Path, Path]
) -> None:
    version = subprocess.run([python, "-I", "-c", REPORT], capture_output=True, text=True)
    tag = "cp" + version.stdout.split()[0].replace(".", "")
    magic = subprocess.run([python, "-I", "-c", MAGIC], capture_output=True, text=True)
    cached = f"engine.{cache_tag(tag)}.pyc"
    compiled = inner_read(
        pyz, _unpacking.inner_archive(tag), f"stateous/control/__pycache__/{cached}"
    )
    assert compiled[:4].hex() == magic.stdout.strip()

    work, cache = folders
    assert run(python, pyz, "--version", cwd=work, cache=cache).returncode == 0
    (folder,) = cache_folders(cache)
    before = {path: path.stat().st_mtime_ns for path in folder.rglob("*")}
    done = subprocess.run(
        [python, "-I", "-c", SHOW_A_TRACEBACK, str(folder)], capture_output=True, text=True
    )
    lines = [line.strip() for line in done.stderr.splitlines()]
    source = folder / "stateous" / "model" / "durations.py"
    at = lines.index(f'File "{source}", line 22, in parse_duration')
    assert lines[at + 1].startswith("raise ValueError("), done.stderr
    # The bytecode shipped was taken as it is: nothing was compiled or written again.
    assert {path: path.stat().st_mtime_ns for path in folder.rglob("*")} == before


def test_version_runs_in_isolated_mode_from_an_empty_folder(
    python: str, pyz: Path, folders: tuple[Path, Path]
) -> None:
    work, cache = folders
    done = run(python, pyz, "--version", cwd=work, cache=cache)
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        f"stateous {stateous.__version__}\n",
        "",
    )
    assert os.listdir(work) == []


#: What a warm start of the pyz leaves out: the manifest's json (and re), sysconfig, zlib, the
#: unpacking and its modules, and for `--version` argparse and typing.
NOT_ON_A_WARM_START = (
    _zipapp.UNPACKING,
    "argparse",
    "hashlib",
    "json",
    "lzma",
    "re",
    "shutil",
    "sysconfig",
    "tarfile",
    "tempfile",
    "typing",
    "zipfile",
    "zlib",
)


def imported(stderr: str) -> set[str]:
    """Return the modules that `-X importtime` reported on stderr."""
    return {
        line.rsplit("|", 1)[1].strip()
        for line in stderr.splitlines()
        if line.startswith("import time:") and not line.endswith("imported package")
    }


def test_a_warm_start_of_version_imports_no_json_sysconfig_zlib_or_argparse(
    python: str, pyz: Path, folders: tuple[Path, Path]
) -> None:
    work, cache = folders
    assert run(python, pyz, "--version", cwd=work, cache=cache).returncode == 0
    done = subprocess.run(
        [python, "-I", "-X", "importtime", str(pyz), "--version"],
        cwd=work,
        env=environment(cache),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    loaded = imported(done.stderr)
    # importlib.import_module, which the bootstrap calls, reports nothing; what it imports does.
    assert "stateous._version" in loaded
    # What the interpreter's own start imports (its site-packages' .pth files) is not ours.
    bare = subprocess.run(
        [python, "-I", "-X", "importtime", "-c", "pass"], capture_output=True, text=True
    )
    assert sorted(loaded - imported(bare.stderr) & set(NOT_ON_A_WARM_START)) == []


def test_a_token_is_served_supervised_and_completed_from_the_pyz(
    python: str, pyz: Path, folders: tuple[Path, Path]
) -> None:
    work, cache = folders
    done = run(python, pyz, "init", "workflow", "orders", cwd=work, cache=cache)
    assert done.returncode == 0, done.stderr
    done = run(python, pyz, "compile", "orders/flow.py", cwd=work, cache=cache)
    assert done.returncode == 0, done.stderr
    graph = "orders/build/orders.json"
    serve_log, supervise_log = work / "serve.log", work / "supervise.log"
    serve = start(
        python, pyz, "serve", graph, "--listen", "127.0.0.1:0", cwd=work, cache=cache, log=serve_log
    )
    supervise = None
    try:
        url = wait_for_url(serve, serve_log)
        done = run(
            python, pyz, "init", "supervisor", url, "orders-supervisor", cwd=work, cache=cache
        )
        assert done.returncode == 0, done.stderr
        folder = work / "orders-supervisor"
        (folder / "draft.py").write_text(DRAFT)
        (folder / "review.py").write_text(REVIEW)
        settings = folder / "stateous.yaml"
        settings.write_text(re.sub(r"(?m)^url:.*$", f'url: "{url}"', settings.read_text()))
        supervise = start(
            python, pyz, "supervise", "orders-supervisor", cwd=work, cache=cache, log=supervise_log
        )
        done = run(
            python,
            pyz,
            "token",
            "start",
            "--url",
            url,
            "ORDER-1",
            '{"title": "x"}',
            cwd=work,
            cache=cache,
        )
        assert done.returncode == 0, done.stderr
        deadline = time.monotonic() + 60
        while token_status(url, "ORDER-1") != "completed":
            assert time.monotonic() < deadline, supervise_log.read_text()
            assert supervise.poll() is None, supervise_log.read_text()
            time.sleep(0.1)
        done = run(python, pyz, "token", "show", "--url", url, "ORDER-1", cwd=work, cache=cache)
        assert done.returncode == 0 and "completed" in done.stdout.splitlines()[0], done
    finally:
        supervise_code = stop(supervise) if supervise else None
        serve_code = stop(serve)
    assert (supervise_code, serve_code) == (0, 0), supervise_log.read_text()
    origins = dict(line.split(" ", 1) for line in (work / "origins.txt").read_text().splitlines())
    assert origins["stateous"].startswith(str(cache)), origins
    assert origins["yaml"].startswith(str(cache)), origins
    assert origins["msgspec"].startswith(str(cache)), origins
    assert origins["apsw"].startswith(str(cache)), origins


def test_the_dashboard_is_served_from_inside_the_pyz(pyz: Path, folders: tuple[Path, Path]) -> None:
    python = find_python(f"{sys.version_info[0]}.{sys.version_info[1]}")
    assert python is not None
    work, cache = folders
    assert run(python, pyz, "init", "workflow", "orders", cwd=work, cache=cache).returncode == 0
    log = work / "serve.log"
    graph = "orders/build/orders.json"
    serve = start(
        python, pyz, "serve", graph, "--listen", "127.0.0.1:0", cwd=work, cache=cache, log=log
    )
    try:
        url = wait_for_url(serve, log)
        for path, name in (("/ui/", "index.html"), *((f"/ui/{name}", name) for name in ui.FILES)):
            with urllib.request.urlopen(f"{url}{path}", timeout=10) as answer:
                assert answer.headers["Content-Type"] == ui.FILES[name]
                assert answer.read() == ui.content(name), path
    finally:
        assert stop(serve) == 0, log.read_text()


def test_two_first_runs_at_once_both_succeed_and_leave_one_complete_folder(
    pyz: Path, folders: tuple[Path, Path]
) -> None:
    work, cache = folders
    entry = running_entry(pyz)
    for attempt in range(3):
        cache_round = cache / str(attempt)
        runs = [
            subprocess.Popen(
                [sys.executable, "-I", str(pyz), "--version"],
                cwd=work,
                env=environment(cache_round),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        outcomes = [(process.wait(timeout=120), *process.communicate()) for process in runs]
        assert all(outcome[0] == 0 for outcome in outcomes), outcomes
        assert cache_folders(cache_round) == [cache_round / entry["hash"]]
        assert_complete(cache_round / entry["hash"], pyz, entry)


def test_a_rename_lost_to_another_run_uses_the_winners_folder(
    pyz: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = running_entry(pyz)
    rename = os.rename

    def late_rename(source: str, target: str) -> None:
        monkeypatch.setattr(os, "rename", rename)
        _unpacking.unpack(str(pyz), entry["hash"], entry["tag"], str(tmp_path))
        rename(source, target)

    monkeypatch.setattr(os, "rename", late_rename)
    folder = _unpacking.unpack(str(pyz), entry["hash"], entry["tag"], str(tmp_path))
    assert folder == str(tmp_path / entry["hash"])
    assert cache_folders(tmp_path) == [tmp_path / entry["hash"]]
    assert_complete(Path(folder), pyz, entry)


def test_a_killed_extraction_does_not_break_the_next_run(
    pyz: Path, folders: tuple[Path, Path]
) -> None:
    work, cache = folders
    entry = running_entry(pyz)
    old, recent = cache / ".partial-old", cache / ".partial-recent"
    for partial in (old, recent):
        (partial / "msgspec").mkdir(parents=True)
        (partial / "msgspec" / "__init__.py").write_text("raise ImportError('half written')\n")
    long_ago = time.time() - 2 * _unpacking.STALE_AFTER
    os.utime(old, (long_ago, long_ago))
    done = run(sys.executable, pyz, "--version", cwd=work, cache=cache)
    assert done.returncode == 0, done.stderr
    assert cache_folders(cache) == [recent, cache / entry["hash"]]
    assert_complete(cache / entry["hash"], pyz, entry)


def test_an_interpreter_the_pyz_does_not_carry_gets_one_line(
    python_311: str, tmp_path: Path, folders: tuple[Path, Path]
) -> None:
    work, cache = folders
    only_312 = build(tmp_path / "only-312.pyz", "--python", "3.12")
    done = run(python_311, only_312, "--version", cwd=work, cache=cache)
    assert done.returncode == 1
    assert done.stdout == ""
    assert re.fullmatch(
        r"error: this stateous\.pyz carries CPython 3\.12 on \S+; this is CPython 3\.11 on \S+\n",
        done.stderr,
    ), done.stderr
    assert not cache.exists()


WITHOUT_LZMA = """
import runpy, sys
sys.modules["lzma"] = None  # as in a CPython built without liblzma: importing it fails
sys.argv = [sys.argv[1], "--version"]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def test_a_python_without_lzma_gets_one_line_and_unpacks_nothing(
    pyz: Path, folders: tuple[Path, Path]
) -> None:
    work, cache = folders
    done = subprocess.run(
        [sys.executable, "-I", "-c", WITHOUT_LZMA, str(pyz)],
        cwd=work,
        env=environment(cache),
        capture_output=True,
        text=True,
    )
    assert (done.returncode, done.stdout) == (1, ""), done.stderr
    assert done.stderr == (
        "error: this Python was built without the lzma module, which stateous.pyz needs "
        "to unpack itself\n"
    )
    assert not cache.exists()


def test_a_pyz_with_postgres_loads_psycopg_from_the_zip(
    tmp_path: Path, folders: tuple[Path, Path]
) -> None:
    work, cache = folders
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    python = find_python(version)
    if python is None:
        pytest.skip(f"no CPython {version} outside this virtual environment")
    with_postgres = build(tmp_path / "postgres.pyz", "--python", version, "--with-postgres")
    done = run(python, with_postgres, "init", "workflow", "orders", cwd=work, cache=cache)
    assert done.returncode == 0, done.stderr
    unreachable = "postgresql://postgres@127.0.0.1:1/none"
    args = ("serve", "orders/build/orders.json", "--db", unreachable, "--listen", "127.0.0.1:0")
    done = run(python, with_postgres, *args, cwd=work, cache=cache)
    assert (done.returncode, done.stderr.count("\n")) == (1, 1), done.stderr
    assert done.stderr.startswith("error: cannot connect to the database"), done.stderr
    (folder,) = cache_folders(cache)
    assert (folder / "psycopg_binary").is_dir()


def test_the_hints_of_the_pyz_name_the_pyz(pyz: Path, folders: tuple[Path, Path]) -> None:
    work, cache = folders
    words = f"python3 {pyz}"
    done = run(sys.executable, pyz, "init", "workflow", "orders", cwd=work, cache=cache)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-2:] == [
        f"  {words} serve orders/build/orders.json",
        f"  {words} init supervisor orders/flow.py orders-supervisor",
    ]
    done = run(
        sys.executable, pyz, "init", "supervisor", "orders/flow.py", "box", cwd=work, cache=cache
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == f"Write the routines, then run: {words} supervise box"
    (work / "empty").mkdir()
    done = run(sys.executable, pyz, "supervise", "empty", cwd=work, cache=cache)
    assert done.stderr == (
        "error: empty/stateous.yaml does not exist; make the folder with: "
        f"{words} init supervisor SOURCE empty\n"
    )


def test_the_demo_of_the_pyz_suggests_commands_of_the_pyz(
    pyz: Path, folders: tuple[Path, Path]
) -> None:
    work, cache = folders
    address = free_address()
    done = run(
        sys.executable, pyz, "demo", "--tokens", "2", "--listen", address, cwd=work, cache=cache
    )
    assert done.returncode == 0, done.stderr
    tried = done.stdout.split("\nTry next:\n", 1)[1].splitlines()
    assert [line.split("#")[0].strip() for line in tried] == [
        f"python3 {pyz} demo --keep --tokens 2 --listen {address}",
        f"python3 {pyz} init workflow orders",
        f"python3 {pyz} init supervisor orders/flow.py orders-supervisor",
    ]


def test_the_build_says_on_stderr_what_it_fetches_and_what_it_wrote(tmp_path: Path) -> None:
    """A first build on a slow network shows each step; a second one says the cache served it."""
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    command = [sys.executable, str(ROOT / "build_zipapp.py"), "--out", "stateous.pyz"]
    command += ["--python", version]
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    outputs = []
    for _ in range(2):
        done = subprocess.run(
            command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
        )
        assert (done.returncode, done.stdout) == (0, ""), done.stderr
        outputs.append(done.stderr.splitlines())
    first, second = outputs
    assert first[:-1] == [
        "fetching pure-Python wheels: falcon, waitress, platformdirs ...",
        f"fetching wheels for CPython {version}: PyYAML ...",
        f"compiling the modules with CPython {version}",
        f"fetching wheels for CPython {version}: apsw, msgspec ...",
    ]
    assert second[:-1] == [
        "pure-Python wheels from the cache: falcon, waitress, platformdirs",
        f"wheels for CPython {version} from the cache: PyYAML",
        f"compiling the modules with CPython {version}",
        f"wheels for CPython {version} from the cache: apsw, msgspec",
    ]
    size = (tmp_path / "stateous.pyz").stat().st_size / 2**20
    assert first[-1] == second[-1] == f"wrote stateous.pyz ({size:.1f} MiB)"
