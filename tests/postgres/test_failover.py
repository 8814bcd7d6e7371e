"""A small, seeded run of bench/bench_failover.py: a real pg_auto_failover formation whose
primary is killed whole under a load of starts, fires and two real supervisors.

It needs `pg_autoctl` (Debian's postgresql-15-auto-failover), which `.ci/run` installs: it
is skipped only where that is missing outside CI.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from collections.abc import Iterator
from types import ModuleType

import pytest

from tests.conftest import ROOT

SMALL = [
    "--seed", "3", "--minutes", "0.1", "--kill-every", "3", "--rate", "10",
    "--supervisors", "2", "--lease", "3s", "--quick",
]  # fmt: skip


@pytest.fixture(scope="module")
def bench() -> Iterator[ModuleType]:
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from autofailover import missing

        why = missing()
        if why is not None and not os.environ.get("CI"):
            pytest.skip(f"{why}; .ci/run installs it")
        spec = importlib.util.spec_from_file_location(
            "bench_failover", ROOT / "bench" / "bench_failover.py"
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["bench_failover"] = module
        spec.loader.exec_module(module)
        yield module
        del sys.modules["bench_failover"]
    finally:
        sys.path.remove(str(ROOT / "bench"))


def test_a_killed_primary_fails_over_and_no_answered_change_token_or_lease_is_lost(
    bench: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    code = bench.main(SMALL)
    out = capsys.readouterr().out
    assert code == 0, out
    assert re.search(r"^failovers: 1 \(node1 killed at [\d:]+\)$", out, re.MULTILINE), out
    assert re.search(r"^tokens: (\d+) \(\1 completed\)$", out, re.MULTILINE), out
    kept = re.search(r"answered 2xx: \d+, [1-9]\d* of them before the last kill; lost: 0;", out)
    assert kept, out
    assert "ended leases: 0" in out, out
    took = re.search(r"from the kill to the first 2xx: ([\d.]+) s", out)
    assert took and float(took[1]) < 30.0, out
    assert out.rstrip().endswith("all checks passed"), out
