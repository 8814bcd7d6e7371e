"""Benchmark: the size of stateous.pyz, and its cold and warm runs, per installed target CPython.

Run: .venv/bin/python bench/bench_pyz.py [--runs 15] [--python 3.11,3.12,3.13]
It uses dist/stateous.pyz when it is up to date, else builds one in a temporary folder. A cold
run starts on an empty extension cache (so it unpacks); a warm run finds the cache filled. Both
are timed for `--version` and for `token show` against a serve started from the same pyz, as
whole processes in isolated mode (`python -I`), beside `python -I -c pass` (the floor). The
cache is platformdirs' default under a temporary XDG_CACHE_HOME. Targets: the pyz of three
CPythons within 8 MiB; warm `--version` within 40 ms, `token show` within 60 ms.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.zipapp.test_pyz import DIST, SERVING, TARGETS, build, find_python, is_fresh  # noqa: E402

TOKEN = "BENCH-1"


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
            [
                python,
                "-I",
                str(pyz),
                "serve",
                "orders/build/orders.json",
                "--listen",
                "127.0.0.1:0",
            ],
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


def bench(python: str, pyz: Path, runs: int) -> None:
    """Print the timings of one interpreter."""
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        kept = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("PYTHON", "STATEOUS"))
        }
        env = {**kept, "XDG_CACHE_HOME": str(folder / "warm-cache")}
        process, url = serve(python, pyz, folder, env)
        try:
            commands = {
                "--version": [python, "-I", str(pyz), "--version"],
                "token show": [python, "-I", str(pyz), "token", "show", "--url", url, TOKEN],
            }
            floor = [timed([python, "-I", "-c", "pass"], env, folder) for _ in range(runs)]
            print(f"  python -I -c pass      {summary(floor)}")
            for name, argv in commands.items():
                cold = [
                    timed(
                        argv, {**env, "XDG_CACHE_HOME": str(folder / f"cold-{name}-{run}")}, folder
                    )
                    for run in range(max(3, runs // 3))
                ]
                warm = [timed(argv, env, folder) for _ in range(runs)]
                print(f"  {name:<12} cold      {summary(cold)}")
                print(f"  {name:<12} warm      {summary(warm)}")
        finally:
            process.terminate()
            process.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--python", default=",".join(TARGETS), help="versions, e.g. 3.12,3.13")
    args = parser.parse_args()
    if is_fresh(DIST):
        pyz = DIST
    else:
        started = time.perf_counter()
        pyz = build(Path(tempfile.mkdtemp()) / "stateous.pyz")
        print(f"built {pyz} in {time.perf_counter() - started:.1f} s")
    print(f"{pyz}: {pyz.stat().st_size / 2**20:.2f} MiB (budget 8 MiB)")
    for version in args.python.split(","):
        python = find_python(version)
        if python is None:
            print(f"CPython {version}: not installed, skipped")
            continue
        print(f"CPython {version} ({python})")
        bench(python, pyz, args.runs)


if __name__ == "__main__":
    main()
