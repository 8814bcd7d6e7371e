"""The agents example, run as the how-to runs it: a stand-in provider that answers 429 once
with `Retry-After: 2` and says what each answer cost, `serve --supervise`, and eight tokens
of one account that all complete, the account's key parked once and reopened by a probe,
without an attempt spent; each token's one answer is a `spent` row within its budget."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from stateous.compiler.contract import contract
from stateous.model.graph_file import load
from tests.conftest import ROOT, run_stateous
from tests.examples.test_demo_and_examples import free_address, serving

EXAMPLES = ROOT / "examples"


def test_the_agents_graph_file_and_contract_are_up_to_date(tmp_path: Path) -> None:
    shutil.copytree(
        EXAMPLES / "agents-within-quotas",
        tmp_path / "agents-within-quotas",
        ignore=shutil.ignore_patterns("build"),
    )
    result = run_stateous("compile", "agents-within-quotas/flow.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    written = (tmp_path / "agents-within-quotas" / "build" / "agents.json").read_bytes()
    assert written == (EXAMPLES / "agents-within-quotas" / "build" / "agents.json").read_bytes()
    graph = load(written)
    assert (EXAMPLES / "agents-within-quotas-supervisor" / "contract.py").read_text() == contract(
        graph
    ).text


def history(url: str, token: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"{url}/tokens/{token}/history") as answer:
        found: list[dict[str, Any]] = json.loads(answer.read())
    return found


def test_the_agents_example_parks_the_account_on_a_429_and_completes_every_token(
    tmp_path: Path,
) -> None:
    shutil.copytree(EXAMPLES / "agents-within-quotas", tmp_path / "agents-within-quotas")
    shutil.copytree(
        EXAMPLES / "agents-within-quotas-supervisor",
        tmp_path / "agents-within-quotas-supervisor",
        ignore=shutil.ignore_patterns(".stateous", "__pycache__"),
    )
    provider_address, address = free_address(), free_address()
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    provider = subprocess.Popen(
        [sys.executable, "agents-within-quotas/provider.py", provider_address.split(":")[1]],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    args = ["agents-within-quotas/build/agents.json", "--listen", address]
    args += ["--supervise", "agents-within-quotas-supervisor"]
    env["PROVIDER_URL"] = f"http://{provider_address}"
    url = f"http://{address}"
    try:
        assert provider.stdout is not None
        assert provider.stdout.readline().startswith("provider on ")
        with serving(args, tmp_path, env, "serves answer"):
            tokens = [f"ASK-{n}" for n in range(8)]
            for token in tokens:
                context = json.dumps({"account": "acct-1", "prompt": f"question {token}"})
                started = run_stateous("token", "start", token, context, "--url", url, cwd=tmp_path)
                assert started.returncode == 0, started.stderr
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                shown = [
                    run_stateous("token", "show", t, "--url", url, cwd=tmp_path) for t in tokens
                ]
                if all(", completed" in s.stdout.splitlines()[0] for s in shown):
                    break
                time.sleep(0.5)
            else:
                raise AssertionError([s.stdout for s in shown])
            kinds = [entry["kind"] for token in tokens for entry in history(url, token)]
            assert kinds.count("resource_parked") == 1 and kinds.count("resource_probe") == 1
            claims = [
                entry["data"]["attempt"]
                for token in tokens
                for entry in history(url, token)
                if entry["kind"] == "task_claimed"
            ]
            assert set(claims) == {1}
            parked = "\n".join(s.stdout for s in shown)
            assert "(attempt given back): 429 from the provider" in parked, parked
            # The 429 cost nothing; each answer cost what the provider said: 0.002 usd, and a
            # token per word of the prompt and the answer ("question ASK-n", "an answer to ...").
            cost = {"usd": 0.002, "tokens": 7}
            for token in tokens:
                rows = [e["data"] for e in history(url, token) if e["kind"] == "spent"]
                assert [row["spent"] for row in rows] == [cost]
                with urllib.request.urlopen(f"{url}/tokens/{token}") as answer:
                    spent = json.loads(answer.read())["spent"]
                assert (spent["token"], spent["tree"]) == (cost, cost)
                budget = [spent["budget"][k] for k in ("limits", "spent", "reserved")]
                assert budget == [{"usd": 1}, cost, {}]
            line = "spent: tokens=7 usd=0.002; its tree: tokens=7 usd=0.002; budget of ASK-0: usd=1"
            assert line in shown[0].stdout.splitlines()
    finally:
        provider.kill()
        provider.wait(timeout=10)
