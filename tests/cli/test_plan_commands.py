"""`stateous token pause|resume|cancel|retry --where | --apply` against a real `serve`."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.cli.test_retry_command import failed_in_review, orders, status_of
from tests.control.serving import Launcher, Served, command, environment, write_graph


@pytest.fixture
def graph(tmp_path: Path) -> Path:
    path = tmp_path / "orders.json"
    write_graph(path, orders())
    return path


def token(served: Served, *args: str) -> subprocess.CompletedProcess[str]:
    """Run `stateous token ARGS` against the served control plane."""
    return subprocess.run(
        command("token", *args, "--url", served.url),
        env=environment(),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_plan_is_printed_then_applied_once_and_again_acts_on_nothing(
    launcher: Launcher, graph: Path, tmp_path: Path
) -> None:
    served = launcher.serve(graph, tmp_path / "orders.sqlite")
    for name in ("ORDER-1", "ORDER-2"):
        failed_in_review(served, name)
    served.ok("POST", "/tokens", {"token": "LIVE", "context": {"title": "x"}})

    planned = token(served, "retry", "--where", "status=failed state=review")

    assert (planned.returncode, planned.stderr) == (0, "")
    first, *listed, last = planned.stdout.splitlines()
    found = re.fullmatch(
        r"plan ([0-9a-f]{16}): retry 2 token\(s\) where status=failed state=review", first
    )
    assert found, first
    plan = found.group(1)
    assert sorted(listed) == ["  ORDER-1", "  ORDER-2"]
    assert last == f"apply it with: stateous token retry --apply {plan}"
    assert status_of(served, "ORDER-1") == "failed"

    wrong = token(served, "cancel", "--apply", plan)
    assert (wrong.returncode, wrong.stdout) == (1, "")
    assert wrong.stderr == (
        f"error: the control plane at {served.url} refused (409): plan {plan!r} was made to "
        "retry; apply it with the same action and options\n"
    )
    applied = token(served, "retry", "--apply", plan)
    again = token(served, "retry", "--apply", plan)

    assert (applied.returncode, applied.stderr) == (0, "")
    assert applied.stdout.splitlines()[0] == f"plan {plan}: retry"
    assert sorted(applied.stdout.splitlines()[1:3]) == ["  ORDER-1: done", "  ORDER-2: done"]
    assert applied.stdout.splitlines()[-1] == "2 done, 0 refused, 0 pending"
    assert again.stdout == applied.stdout
    for name in ("ORDER-1", "ORDER-2"):
        assert status_of(served, name) == "active"
        retried = [e["data"] for e in served.history(name) if e["kind"] == "retried"]
        assert [data["plan"] for data in retried] == [plan]


def test_bulk_usage_mistakes_and_refusals_are_one_error_line(
    launcher: Launcher, graph: Path, tmp_path: Path
) -> None:
    served = launcher.serve(graph, tmp_path / "orders.sqlite")
    refused = f"error: the control plane at {served.url} refused"
    cases = [
        (("pause",), "error: give one of: a token's ID, --where FILTERS, --apply PLAN"),
        (("pause", "A", "--where", "status=active"),
         "error: give one of: a token's ID, --where FILTERS, --apply PLAN"),
        (("pause", "--where", "colour=red"),
         f"{refused} (422): where: 'colour' is no filter; "
         "use status, state, parent, checksum, since, until"),
        (("pause", "--where", "status=asleep"),
         f"{refused} (422): status must be one of active, paused, completed, failed, cancelled"),
        (("pause", "--apply", "0123456789abcdef"),
         f"{refused} (404): no plan has the id '0123456789abcdef'"),
        (("retry", "--where", "status=failed", "--context", "{}"),
         "error: --context retries one token; a plan takes only --from"),
    ]  # fmt: skip
    for args, said in cases:
        done = token(served, *args)
        assert (done.returncode, done.stdout, done.stderr) == (1, "", said + "\n"), args
