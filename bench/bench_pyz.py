"""Benchmark: the size of stateous.pyz, and its cold and warm runs, per installed target CPython.

Run: .venv/bin/python bench/bench_pyz.py [--runs 15] [--python 3.11,3.12,3.13] [--pyz A,B]
It uses dist/stateous.pyz when it is up to date, else builds one in a temporary folder;
`--pyz` names the files to time instead, for example the pyz of an earlier checkout beside
this one's, and their runs alternate, so that a slower minute of the machine falls on each.
A cold run starts on an empty extension cache (so it unpacks); a warm run finds the cache
filled. Both are timed for `--version` and for `token show` against a serve started from the
same pyz, as whole processes in isolated mode (`python -I`), beside `python -I -c pass` (the
floor). The third warm figure is a start of `serve` itself: from its process's start, on a
fresh folder and database, to the first 200 of `GET /health`, asked every 2 ms. The cache is
platformdirs' default under a temporary XDG_CACHE_HOME. Targets: the pyz of three CPythons
within 8 MiB; warm `--version` within 40 ms, `token show` within 60 ms, serve to /health
within 200 ms.
"""

from __future__ import annotations

import argparse
import http.client
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.zipapp.support import DIST, TARGETS, build, find_python, is_fresh  # noqa: E402
from tests.zipapp.test_pyz import SERVING  # noqa: E402

TOKEN = "BENCH-1"
GRAPH = "orders/build/orders.json"
#: How often the start of serve asks for /health, in seconds.
POLL = 0.002
HEALTH = "serve to /health"


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    """Run argv to its end and return how long it took, in milliseconds."""
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True)
    elapsed = (time.perf_counter() - started) * 1000
    if done.returncode != 0:
        raise SystemExit(f"error: {' '.join(argv)} failed: {done.stderr.strip()}")
    return elapsed


def summary(times: list[float]) -> str:
    """Return the median and the fastest of some timings."""
    return f"median {statistics.median(times):6.0f} ms, fastest {min(times):6.0f} ms"


def free_port() -> int:
    """Return a loopback port that is free now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def healthy(port: int) -> bool:
    """Tell whether a serve on port answers 200 to `GET /health`."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
    try:
        connection.request("GET", "/health")
        return connection.getresponse().status == 200
    except OSError:
        return False
    finally:
        connection.close()


def time_to_health(python: str, pyz: Path, folder: Path, env: dict[str, str]) -> float:
    """Start serve on a fresh database in folder; return the milliseconds from its start to
    the first 200 of /health."""
    port = free_port()
    argv = [python, "-I", str(pyz), "serve", str(folder.parent / GRAPH)]
    argv += ["--listen", f"127.0.0.1:{port}"]
    folder.mkdir()
    started = time.perf_counter()
    process = subprocess.Popen(
        argv, cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = started + 30
        while not healthy(port):
            if time.perf_counter() > deadline or process.poll() is not None:
                raise SystemExit(f"error: serve of {pyz} did not answer /health")
            time.sleep(POLL)
        return (time.perf_counter() - started) * 1000
    finally:
        process.terminate()
        process.wait(timeout=30)


def serve(
    python: str, pyz: Path, folder: Path, env: dict[str, str]
) -> tuple[subprocess.Popen, str]:
    """Start a serve of the starter workflow from the pyz with one token; return it and its URL."""
    subprocess.run(
        [python, "-I", str(pyz), "init", "workflow", "orders"],
        cwd=folder,
        env=env,
        check=True,
        capture_output=True,
    )
    log = folder / "serve.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [python, "-I", str(pyz), "serve", GRAPH, "--listen", "127.0.0.1:0"],
            cwd=folder,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 30
    while not (found := SERVING.search(log.read_text())):
        if time.monotonic() > deadline or process.poll() is not None:
            process.kill()
            raise SystemExit(f"error: serve did not start: {log.read_text()}")
        time.sleep(0.05)
    url = found[1]
    start = [python, "-I", str(pyz), "token", "start", "--url", url, TOKEN, '{"title": "bench"}']
    subprocess.run(start, cwd=folder, env=env, check=True, capture_output=True)
    return process, url


def bench(python: str, pyzs: list[Path], runs: int) -> None:
    """Print the timings of one interpreter, for each pyz."""
    with tempfile.TemporaryDirectory() as scratch:
        kept = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("PYTHON", "STATEOUS"))
        }
        floor = [timed([python, "-I", "-c", "pass"], kept, Path(scratch)) for _ in range(runs)]
        print(f"  python -I -c pass                 {summary(floor)}")
        folders = [Path(scratch, f"pyz-{number}") for number in range(len(pyzs))]
        envs = [{**kept, "XDG_CACHE_HOME": str(folder / "warm-cache")} for folder in folders]
        served = []
        try:
            for pyz, folder, env in zip(pyzs, folders, envs, strict=True):
                folder.mkdir()
                served.append(serve(python, pyz, folder, env))
            commands = {
                "--version": lambda pyz, url: [python, "-I", str(pyz), "--version"],
                "token show": lambda pyz, url: [
                    *(python, "-I", str(pyz), "token", "show", "--url", url, TOKEN)
                ],
            }
            pairs = list(enumerate(zip(pyzs, folders, envs, strict=True)))
            cold: dict[tuple[int, str], list[float]] = {}
            warm: dict[tuple[int, str], list[float]] = {}
            # Cold runs first: each unpacks some 30 MB, which would slow the warm run after it.
            for run in range(max(3, runs // 3)):
                for number, (pyz, folder, env) in pairs:
                    for name, argv in commands.items():
                        cache = {**env, "XDG_CACHE_HOME": str(folder / f"cold-{name}-{run}")}
                        cold.setdefault((number, name), []).append(
                            timed(argv(pyz, served[number][1]), cache, folder)
                        )
            for _ in range(runs):
                for number, (pyz, folder, env) in pairs:
                    for name, argv in commands.items():
                        warm.setdefault((number, name), []).append(
                            timed(argv(pyz, served[number][1]), env, folder)
                        )
            for run in range(runs):
                for number, (pyz, folder, env) in pairs:
                    warm.setdefault((number, HEALTH), []).append(
                        time_to_health(python, pyz, folder / f"serve-{run}", env)
                    )
            for number, pyz in enumerate(pyzs):
                if len(pyzs) > 1:
                    print(f"  {pyz}")
                for name in commands:
                    print(f"  {name:<16} cold      {summary(cold[number, name])}")
                    print(f"  {name:<16} warm      {summary(warm[number, name])}")
                health = warm[number, HEALTH]
                print(f"  {HEALTH:<16} warm      {summary(health)}")
        finally:
            for process, _ in served:
                process.terminate()
                process.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--python", default=",".join(TARGETS), help="versions, e.g. 3.12,3.13")
    parser.add_argument("--pyz", help="the pyz files to time, separated by commas")
    args = parser.parse_args()
    if args.pyz:
        pyzs = [Path(name).resolve() for name in args.pyz.split(",")]
    elif is_fresh(DIST):
        pyzs = [DIST]
    else:
        started = time.perf_counter()
        pyzs = [build(Path(tempfile.mkdtemp()) / "stateous.pyz")]
        print(f"built {pyzs[0]} in {time.perf_counter() - started:.1f} s")
    for pyz in pyzs:
        print(f"{pyz}: {pyz.stat().st_size / 2**20:.2f} MiB (budget 8 MiB)")
    for version in args.python.split(","):
        python = find_python(version)
        if python is None:
            print(f"CPython {version}: not installed, skipped")
            continue
        print(f"CPython {version} ({python})")
        bench(python, pyzs, args.runs)


if __name__ == "__main__":
    main()
