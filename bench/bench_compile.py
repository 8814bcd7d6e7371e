"""Benchmark: compile a generated workflow of 200 states and 400 guarded transitions.

Run: .venv/bin/python bench/bench_compile.py
Target: under 1 second for the whole `stateous compile` of the generated flow.py.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from stateous.compiler.compile import compile_flow  # noqa: E402

STATES = 200
SCHEMAS = """
import msgspec


class Job(msgspec.Struct):
    n: int = 0
    kind: str = "a"
    urgent: bool = False


class Result(msgspec.Struct):
    score: float
    label: str = ""
"""


def flow_text(states: int = STATES) -> str:
    """Each state has one event with two guarded, exclusive transitions: 2 per state."""
    lines = [
        "from stateous import END, START, Workflow",
        "from schemas import Job, Result",
        'flow = Workflow("big", context=Job)',
    ]
    for index in range(states):
        lines.append(f's{index} = flow.state("s{index}", timeout="1h", retries=1)')
        lines.append(f'e{index} = flow.event("e{index}", payload=Result)')
    lines.append("flow.transition(START, s0)")
    for index in range(states):
        forward = f"s{index + 1}" if index + 1 < states else "END"
        back = f"s{max(index - 1, 0)}"
        first = f"payload.score >= {index} and ctx['kind'] in ['a', 'b'] or ctx['urgent'] == true"
        below = f"payload.score < {index} and ctx['urgent'] != true"
        second = f"{below} or ctx['kind'] not in ['a', 'b'] and {below}"
        lines.append(f'flow.transition(s{index}, {forward}, on=e{index}, when="{first}")')
        lines.append(f'flow.transition(s{index}, {back}, on=e{index}, when="{second}")')
    return "\n".join(lines) + "\n"


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        flow = Path(folder) / "flow.py"
        flow.write_text(flow_text())
        (Path(folder) / "schemas.py").write_text(SCHEMAS)
        runs = []
        for _ in range(5):
            started = time.perf_counter()
            graph = compile_flow(flow)
            runs.append(time.perf_counter() - started)
        guarded = sum(1 for transition in graph.transitions if transition.when)
        print(f"states: {len(graph.states)}, guarded transitions: {guarded}")
        print(f"compile in process: best {min(runs):.3f}s, worst {max(runs):.3f}s")
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "stateous", "compile", str(flow)],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        print(f"`stateous compile` as a process: {time.perf_counter() - started:.3f}s")


if __name__ == "__main__":
    main()
