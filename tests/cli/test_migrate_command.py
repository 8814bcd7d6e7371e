"""`stateous token migrate` against real `serve` processes that served two graph versions one
after the other on one database, SQLite and Postgres."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.control.serving import Launcher, Served, command, environment, write_graph
from tests.control.support import BACKENDS, Backend, open_backend
from tests.control.test_migrate import V1, V2, shop


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    with open_backend(request.param, tmp_path) as fresh:
        yield fresh


def serve(launcher: Launcher, backend: Backend, graph: Path) -> Served:
    if backend.name == "sqlite":
        return launcher.serve(graph, Path(backend.url))
    return launcher.serve(graph, None, "--db", backend.url)


def token(served: Served, *args: str) -> subprocess.CompletedProcess[str]:
    """Run `stateous token ARGS` against the served control plane."""
    return subprocess.run(
        command("token", *args, "--url", served.url),
        env=environment(),
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def second(launcher: Launcher, backend: Backend, tmp_path: Path) -> Served:
    """Version 2 served, after version 1 started A (in draft, which version 2 lacks) and B
    and C (in check, which version 2 keeps as it was)."""
    old, new = tmp_path / "v1.json", tmp_path / "v2.json"
    write_graph(old, shop(version=1))
    write_graph(new, shop(version=2))
    first = serve(launcher, backend, old)
    for name in ("A", "B", "C"):
        first.ok("POST", "/tokens", {"token": name, "context": {"title": name}})
    for name in ("B", "C"):
        first.ok("POST", f"/tokens/{name}/events/submitted")
    assert first.stop() == 0
    return serve(launcher, backend, new)


def test_migrate_one_token_a_dry_run_first_and_one_refused(second: Served) -> None:
    dry = token(second, "migrate", "B", "--dry-run")
    assert (dry.returncode, dry.stderr) == (0, "")
    assert dry.stdout == f"B: would migrate from {V1} to {V2} (1 token(s))\n  B  check  active\n"
    assert second.ok("GET", "/tokens/B")["checksum"] == V1

    done = token(second, "migrate", "B", "--to", V2)
    refused = token(second, "migrate", "A")
    missing = token(second, "migrate", "B", "--to", "sha256:00")
    again = token(second, "migrate", "B")

    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == f"B: migrated from {V1} to {V2} (1 token(s))\n  B  check  active\n"
    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr == (
        f"error: the control plane at {second.url} refused (409): token 'A' is in 'draft', "
        f"which the graph {V2} does not have\n"
    )
    assert (missing.returncode, missing.stderr) == (
        1,
        f"error: the control plane at {second.url} refused (404): this database keeps no "
        "graph file of checksum 'sha256:00'\n",
    )
    assert again.stdout == f"B: moves by {V2} already; nothing to migrate\n"
    migrated = [e["data"] for e in second.history("B") if e["kind"] == "migrated"]
    assert migrated == [{"from": V1, "to": V2}]
    second.ok("POST", "/tokens/B/events/checked")
    assert second.ok("POST", "/tokens/B/events/approved")["state"] == "ship"


def test_migrate_all_of_a_graph_prints_a_line_per_token_and_fails_on_a_refusal(
    second: Served,
) -> None:
    dry = token(second, "migrate", "--all-of", V1, "--dry-run")
    assert second.ok("GET", "/tokens/C")["checksum"] == V1
    done = token(second, "migrate", "--all-of", V1)
    none_left = token(second, "migrate", "--all-of", V2, "--to", V1, "--dry-run")

    gone = f"A: refused (state_gone): token 'A' is in 'draft', which the graph {V2} does not have"
    assert (dry.returncode, dry.stderr) == (1, "error: 1 of 3 token(s) were refused\n")
    assert dry.stdout.splitlines() == [
        gone,
        f"B: would migrate from {V1} to {V2} (1 token(s))",
        "  B  check  active",
        f"C: would migrate from {V1} to {V2} (1 token(s))",
        "  C  check  active",
    ]
    assert done.returncode == 1
    assert done.stdout.splitlines()[0] == gone
    assert done.stdout.splitlines()[1] == f"B: migrated from {V1} to {V2} (1 token(s))"
    assert [second.ok("GET", f"/tokens/{name}")["checksum"] for name in "ABC"] == [V1, V2, V2]
    assert none_left.returncode == 0
    assert none_left.stdout.splitlines() == [
        f"B: would migrate from {V2} to {V1} (1 token(s))",
        "  B  check  active",
        f"C: would migrate from {V2} to {V1} (1 token(s))",
        "  C  check  active",
    ]


def test_a_plan_to_migrate_lists_the_tokens_and_is_applied_once(second: Served) -> None:
    planned = token(second, "migrate", "--where", f"checksum={V1}")

    assert (planned.returncode, planned.stderr) == (0, "")
    first, *listed, last = planned.stdout.splitlines()
    found = re.fullmatch(rf"plan ([0-9a-f]{{16}}): migrate 3 token\(s\) where checksum={V1}", first)
    assert found, first
    plan = found.group(1)
    assert sorted(listed) == ["  A", "  B", "  C"]
    assert last == f"apply it with: stateous token migrate --apply {plan} --to {V2}"

    applied = token(second, "migrate", "--apply", plan, "--to", V2)
    again = token(second, "migrate", "--apply", plan)

    assert (applied.returncode, applied.stderr) == (0, "")
    lines = applied.stdout.splitlines()
    assert lines[0] == f"plan {plan}: migrate"
    assert sorted(lines[1:4]) == [
        f"  A: refused: token 'A' is in 'draft', which the graph {V2} does not have",
        "  B: done",
        "  C: done",
    ]
    assert lines[-1] == "2 done, 1 refused, 0 pending"
    assert again.stdout == applied.stdout
    for name in ("B", "C"):
        migrated = [e["data"] for e in second.history(name) if e["kind"] == "migrated"]
        assert migrated == [{"from": V1, "to": V2, "plan": plan}]
