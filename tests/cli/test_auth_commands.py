"""`stateous auth`: credentials made, listed and revoked from the command line, beside a real
`serve` that asks for them from its next request on."""

from __future__ import annotations

import http.client
import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conftest import run_stateous
from tests.control.serving import Launcher, orders, write_graph

SECRET = re.compile(r"stq_[A-Za-z0-9_-]{43}\Z")


def auth(folder: Path, *args: str, db: Path) -> tuple[int, str, str]:
    done = run_stateous("auth", *args, "--db", f"sqlite:///{db}", cwd=folder)
    return done.returncode, done.stdout, done.stderr


def orders_graph(folder: Path) -> Path:
    path = folder / "orders.json"
    write_graph(path, orders())
    return path


def ask(port: int, path: str, secret: str | None = None) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        headers = {} if secret is None else {"Authorization": f"Bearer {secret}"}
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def test_add_prints_the_secret_once_and_list_never_shows_it(tmp_path: Path) -> None:
    db = tmp_path / "cp.db"
    code, out, err = auth(tmp_path, "add", "ops-1", "--role", "operator", db=db)
    assert code == 0, err
    [secret] = out.splitlines()
    assert SECRET.match(secret)
    assert "shown once" in err and secret not in err

    code, out, _ = auth(
        tmp_path, "add", "ci-webhook", "--role", "webhook", "--events", "submitted,reviewed", db=db
    )
    assert code == 0
    code, listed, _ = auth(tmp_path, "list", db=db)
    assert code == 0
    lines = listed.splitlines()
    assert [line.split("  ")[:2] for line in lines] == [
        ["ci-webhook", "webhook"],
        ["ops-1", "operator"],
    ]
    assert "events submitted,reviewed" in lines[0]
    assert "last used never" in lines[1]
    assert "stq_" not in listed
    assert secret not in (tmp_path / "cp.db").read_bytes().decode(errors="replace")


def test_bad_credentials_are_refused_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "cp.db"
    assert auth(tmp_path, "add", "ops-1", "--role", "operator", db=db)[0] == 0
    cases = [
        (("add", "ops-1", "--role", "operator"), "error: a credential named 'ops-1' exists"),
        (
            ("add", "Bad Name", "--role", "operator"),
            "error: a credential's 'Bad Name' is not a valid name",
        ),
        (("add", "hook", "--role", "webhook"), "error: a webhook credential names the events"),
        (("add", "box", "--role", "supervisor", "--events", "x"), "error: --events, --may-start"),
        (("revoke", "nobody"), "error: no credential named 'nobody' is in use"),
    ]
    for args, line in cases:
        code, _, err = auth(tmp_path, *args, db=db)
        assert code == 1, (args, err)
        assert err.splitlines()[0].startswith(line), (args, err)


def test_list_and_revoke_on_no_database_say_so_and_make_no_file(tmp_path: Path) -> None:
    db = tmp_path / "typo.db"
    for args in (("list",), ("revoke", "ops-1")):
        code, out, err = auth(tmp_path, *args, db=db)
        assert (code, out, err.splitlines()) == (1, "", [f"error: there is no database at {db}"])
    assert list(tmp_path.iterdir()) == []


def answer(port: int, path: str, secret: str | None = None) -> tuple[int, dict[str, Any]]:
    """The status and JSON body of a GET."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        headers = {} if secret is None else {"Authorization": f"Bearer {secret}"}
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def settle(check: Callable[[], bool], what: str, seconds: float = 5.0) -> None:
    """Wait until `check` holds; fail after `seconds`."""
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def test_a_revoke_counts_at_once_on_a_running_serve(tmp_path: Path, launcher: Launcher) -> None:
    db = tmp_path / "cp.db"
    _, out, _ = auth(tmp_path, "add", "ops-1", "--role", "operator", db=db)
    secret = out.strip()
    served = launcher.serve(orders_graph(tmp_path), db)
    port = served.port
    assert ask(port, "/tokens", secret) == 200
    assert ask(port, "/tokens") == 401
    assert ask(port, "/health") == 200

    assert auth(tmp_path, "revoke", "ops-1", "--force", db=db)[0] == 0

    assert ask(port, "/tokens", secret) == 401
    _, listed, _ = auth(tmp_path, "list", db=db)
    assert "revoked" in listed and "last used 20" in listed
    assert served.stop() == 0


def test_revoking_the_last_credential_leaves_authentication_on_and_says_how_to_recover(
    tmp_path: Path, launcher: Launcher
) -> None:
    db = tmp_path / "cp.db"
    auth(tmp_path, "add", "ops-1", "--role", "operator", db=db)
    served = launcher.serve(orders_graph(tmp_path), db)
    code, _, err = auth(tmp_path, "revoke", "ops-1", "--force", db=db)
    assert code == 0
    assert "every request but /health is refused" in err

    # more than a beat of the clock later, no request passes without a credential
    time.sleep(2.5)
    status, body = answer(served.port, "/tokens")
    assert (status, body["code"]) == (401, "unauthorized")
    assert "stateous auth add NAME --role operator" in body["error"]
    health = body_of_health(served.port)
    assert (health["workflow"], health["auth"]) == ("orders", "no_credential")
    _, out, _ = auth(tmp_path, "add", "ops-2", "--role", "operator", db=db)
    assert ask(served.port, "/tokens", out.strip()) == 200
    settle(lambda: body_of_health(served.port)["auth"] == "on", "/health says auth is on")
    assert served.stop() == 0


def body_of_health(port: int) -> dict[str, Any]:
    status, body = answer(port, "/health")
    assert status == 200
    return body


def test_the_last_live_operator_is_revoked_only_with_force(tmp_path: Path) -> None:
    db = tmp_path / "cp.db"
    auth(tmp_path, "add", "ops-1", "--role", "operator", db=db)
    auth(tmp_path, "add", "box-1", "--role", "supervisor", db=db)
    assert auth(tmp_path, "revoke", "box-1", db=db)[:2] == (0, "revoked box-1\n")

    code, out, err = auth(tmp_path, "revoke", "ops-1", db=db)
    assert (code, out) == (1, "")
    assert err.splitlines() == [
        "error: 'ops-1' is the last live operator credential: without it no one may steer "
        "tokens; add another first (stateous auth add NAME --role operator), or revoke it "
        "with --force"
    ]
    assert "revoked" not in auth(tmp_path, "list", db=db)[1].splitlines()[1]

    auth(tmp_path, "add", "ops-2", "--role", "operator", db=db)
    assert auth(tmp_path, "revoke", "ops-1", db=db)[0] == 0
    assert auth(tmp_path, "revoke", "ops-2", db=db)[0] == 1
    assert auth(tmp_path, "revoke", "ops-2", "--force", db=db)[0] == 0


def test_disable_and_enable_turn_authentication_off_and_on_under_a_running_serve(
    tmp_path: Path, launcher: Launcher
) -> None:
    db = tmp_path / "cp.db"
    _, out, _ = auth(tmp_path, "add", "ops-1", "--role", "operator", db=db)
    served = launcher.serve(orders_graph(tmp_path), db)
    assert ask(served.port, "/tokens") == 401

    code, said, _ = auth(tmp_path, "disable", db=db)
    assert code == 0
    assert said.startswith("authentication is off:")
    settle(lambda: ask(served.port, "/tokens") == 200, "authentication goes off")
    assert body_of_health(served.port)["auth"] == "off"
    # a secret given is still checked, and counts
    assert ask(served.port, "/tokens", out.strip()) == 200

    code, said, _ = auth(tmp_path, "enable", db=db)
    assert (code, said.split(":")[0]) == (0, "authentication is on")
    settle(lambda: ask(served.port, "/tokens") == 401, "authentication goes on")
    served.stop()
    logged = "\n".join(served.lines)
    assert "authentication was turned off in the database" in logged
    assert "authentication was turned on in the database" in logged
    assert "stq_" not in logged


def test_enable_and_disable_need_a_database_and_say_what_they_did_once(tmp_path: Path) -> None:
    db = tmp_path / "cp.db"
    code, _, err = auth(tmp_path, "enable", db=db)
    assert (code, err.splitlines()) == (1, [f"error: there is no database at {db}"])
    auth(tmp_path, "add", "ops-1", "--role", "operator", db=db)
    assert auth(tmp_path, "enable", db=db)[1] == "authentication is on: it already was\n"
    auth(tmp_path, "revoke", "ops-1", "--force", db=db)
    code, said, _ = auth(tmp_path, "disable", db=db)
    assert said == (
        "authentication is off: whoever reaches the control plane may call every route\n"
    )
    assert auth(tmp_path, "disable", db=db)[1] == "authentication is off: it already was\n"


def test_a_credential_added_beside_a_running_serve_turns_authentication_on(
    tmp_path: Path, launcher: Launcher
) -> None:
    db = tmp_path / "cp.db"
    served = launcher.serve(orders_graph(tmp_path), db)
    assert ask(served.port, "/tokens") == 200
    _, out, _ = auth(tmp_path, "add", "ops-1", "--role", "operator", db=db)
    deadline = time.monotonic() + 5
    while ask(served.port, "/tokens") != 401:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert ask(served.port, "/tokens", out.strip()) == 200
    assert served.stop() == 0


def test_token_show_names_the_credential_that_made_each_change(
    tmp_path: Path, launcher: Launcher
) -> None:
    db = tmp_path / "cp.db"
    _, out, _ = auth(tmp_path, "add", "ops-1", "--role", "operator", db=db)
    _, hook, _ = auth(
        tmp_path, "add", "ci-webhook", "--role", "webhook", "--events", "submitted", db=db
    )
    (tmp_path / "ops.secret").write_text(out)
    (tmp_path / "hook.secret").write_text(hook)
    served = launcher.serve(orders_graph(tmp_path), db)
    url = ("--url", served.url)

    def token(*args: str, secret: str) -> str:
        done = run_stateous("token", *args, *url, "--token-file", secret, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        return done.stdout

    token("start", "ORDER-1", '{"title": "first"}', secret="ops.secret")
    token("fire", "ORDER-1", "submitted", secret="hook.secret")
    shown = token("show", "ORDER-1", secret="ops.secret").splitlines()
    assert any(line.endswith("  #1  started (by ops-1)") for line in shown), shown
    assert any(line.endswith("submitted in draft (by ci-webhook)") for line in shown), shown
    assert served.stop() == 0


def test_a_supervisor_credential_is_bound_to_a_name_or_a_prefix(tmp_path: Path) -> None:
    db = tmp_path / "cp.db"
    for args in [
        ("add", "box-7", "--role", "supervisor"),
        ("add", "box-8", "--role", "supervisor", "--supervisor-name", "build-box-8"),
        ("add", "pool", "--role", "supervisor", "--supervisor-prefix", "pool-"),
        ("add", "ops", "--role", "operator"),
    ]:
        code, _, err = auth(tmp_path, *args, db=db)
        assert code == 0, (args, err)
    code, listed, _ = auth(tmp_path, "list", db=db)
    lines = {line.split("  ")[0]: line for line in listed.splitlines()}
    assert "  acts as 'box-7'" in lines["box-7"]
    assert "  acts as 'build-box-8'" in lines["box-8"]
    assert "  acts as names starting 'pool-'" in lines["pool"]
    assert "acts as" not in lines["ops"]

    cases = [
        (
            ("add", "hook", "--role", "webhook", "--events", "x", "--supervisor-name", "b"),
            "error: --supervisor-name and --supervisor-prefix are for supervisor credentials",
        ),
        (
            ("add", "box-9", "--role", "supervisor", "--supervisor-prefix", ""),
            "error: a supervisor's name or prefix has 1 to 256 characters",
        ),
        (
            ("add", "box-9", "--role", "supervisor", "--supervisor-name", "a\tb"),
            "error: a supervisor's name or prefix has 1 to 256 characters",
        ),
    ]
    for args, line in cases:
        code, _, err = auth(tmp_path, *args, db=db)
        assert code == 1, (args, err)
        assert err.splitlines()[0].startswith(line), (args, err)
    both = ("--supervisor-name", "a", "--supervisor-prefix", "b")
    code, _, err = auth(tmp_path, "add", "box-9", "--role", "supervisor", *both, db=db)
    assert code == 2 and "not allowed with argument" in err
    assert "box-9" not in auth(tmp_path, "list", db=db)[1]


def test_a_github_webhook_keeps_its_mapping_and_list_shows_it(tmp_path: Path) -> None:
    db = tmp_path / "cp.db"
    code, out, err = auth(
        tmp_path,
        *("add", "gh", "--role", "webhook", "--hmac", "--may-start"),
        *("--github-events", "push=pushed,pull_request=pr_changed,release"),
        *("--token-from", "pull_request.head.ref", "--payload-from", "pull_request"),
        *("--start-context-from", "pull_request"),
        db=db,
    )
    assert code == 0, err
    assert out.splitlines()[1].startswith("hmac key: stq_")
    code, listed, _ = auth(tmp_path, "list", db=db)
    [line] = listed.splitlines()
    assert "  events pr_changed,pushed,release  " in line
    assert "  github push=pushed,pull_request=pr_changed,release=release  " in line
    assert "  token from pull_request.head.ref  payload from pull_request  " in line
    assert "  start context from pull_request" in line
    assert "hmac key" not in line and "stq_" not in line

    hook = ("add", "gh-2", "--role", "webhook")
    start_from = ("--start-context-from", "repository")
    cases = [
        (
            (*hook, "--github-events", "push", "--token-from", "=site"),
            "error: a GitHub webhook's deliveries are signed: --hmac",
        ),
        (
            (*hook, "--hmac", "--github-events", "push"),
            "error: a GitHub webhook names the token of a delivery: --token-from",
        ),
        (
            (*hook, "--events", "x", "--token-from", "=site"),
            "error: --token-from, --payload-from and --start-context-from need --github-events",
        ),
        (
            (*hook, "--hmac", "--github-events", "push", "--token-from", "a..b"),
            "error: --token-from 'a..b' is neither a dotted path",
        ),
        (
            (*hook, "--hmac", "--github-events", "Push!", "--token-from", "=site"),
            "error: --github-events: 'Push!' is not a GitHub event kind",
        ),
        (
            (*hook, "--hmac", "--github-events", "push", "--token-from", "=site", *start_from),
            "error: --start-context-from is for a webhook that may start tokens: --may-start",
        ),
    ]
    for args, line in cases:
        code, _, err = auth(tmp_path, *args, db=db)
        assert code == 1, (args, err)
        assert err.splitlines()[0].startswith(line), (args, err)
    assert "gh-2" not in auth(tmp_path, "list", db=db)[1]
