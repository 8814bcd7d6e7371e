"""The clients over HTTPS, through a real nginx in front of a real `stateous serve`.

Each test makes a private CA and a certificate for 127.0.0.1 with `openssl`, serves
`orders` on a free port with two credentials made by `stateous auth add` (a
supervisor and an operator), and starts nginx on another free port with that
certificate, passing every request to the control plane. A supervisor, the token
commands and `Client` then talk to `https://127.0.0.1:PORT`, trust the private CA
through `ca_file:` in stateous.yaml, `STATEOUS_CA_FILE`, `--ca-file` or
`Client(ca_file=)`, and carry their secrets from token files. A certificate that
the trusted CA did not sign, or that names another host, is refused in one
sentence.
"""

from __future__ import annotations

import os
import queue
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from stateous import Client
from stateous.client import Unreachable, Unverified
from tests.client.tls import Certificates, Nginx, make_certificates
from tests.conftest import run_stateous
from tests.control.serving import Launcher, Served, command, environment
from tests.supervisor.support import (
    ORDERS,
    ROUTINE_IMPORTS,
    Supervisors,
    wait_until,
    write_folder,
    write_graph,
)

ITEM = {"title": "an order"}
#: What the standard library says of a certificate that no trusted CA signed.
UNKNOWN_ISSUER = "unable to get local issuer certificate"


@dataclass
class Proxied:
    """A control plane that asks for credentials, and nginx with TLS in front of it."""

    served: Served
    nginx: Nginx
    certificates: Certificates
    graph: Path
    #: The token files of the credentials `box-1` (supervisor) and `ops` (operator).
    supervisor_secret: Path
    operator_secret: Path

    @property
    def url(self) -> str:
        return self.nginx.url

    def operate(self, method: str, path: str, body: Any = None) -> Any:
        """Call the control plane itself, as the operator; the answer must be 2xx."""
        secret = self.operator_secret.read_text().strip()
        status, answer = self.served.request(
            method, path, body, headers={"Authorization": f"Bearer {secret}"}
        )
        assert 200 <= status < 300, (method, path, status, answer)
        return answer


def credential(folder: Path, db: Path, name: str, role: str) -> Path:
    """Make a credential with `stateous auth add`; return the token file of its secret."""
    made = run_stateous("auth", "add", name, "--role", role, "--db", f"sqlite:///{db}", cwd=folder)
    assert made.returncode == 0, made.stderr
    path = folder / f"{name}.secret"
    path.write_text(made.stdout)
    return path


@pytest.fixture
def proxied(launcher: Launcher, tmp_path: Path) -> Iterator[Proxied]:
    certificates = make_certificates(tmp_path / "certs")
    graph = tmp_path / "orders.json"
    write_graph(graph)
    db = tmp_path / "orders.sqlite"
    served = launcher.serve(graph, db)
    supervisor_secret = credential(tmp_path, db, "box-1", "supervisor")
    operator_secret = credential(tmp_path, db, "ops", "operator")
    wait_until(lambda: served.request("GET", "/tokens")[0] == 401, "credentials asked for")
    nginx = Nginx(tmp_path / "nginx", served.port, certificates)
    try:
        yield Proxied(served, nginx, certificates, graph, supervisor_secret, operator_secret)
    finally:
        nginx.close()


def unverified(url: str, reason: str) -> str:
    return f"the control plane at {url} could not be verified: certificate verify failed: {reason}"


def supervised_folder(proxied: Proxied, folder: Path, ca: Path) -> Path:
    """A supervisor's folder for the proxy's https:// URL, with `ca` copied in as `ca_file`
    and the supervisor's secret as `token_file`."""
    write_folder(folder, proxied.url, proxied.graph)
    shutil.copy(ca, folder / "ca.pem")
    shutil.copy(proxied.supervisor_secret, folder / "secret")
    with (folder / "stateous.yaml").open("a") as settings:
        settings.write("ca_file: ca.pem\ntoken_file: secret\n")
    return folder


def test_a_supervisor_moves_a_token_to_its_end_through_nginx_with_its_ca_and_token_files(
    proxied: Proxied, supervisors: Supervisors, tmp_path: Path
) -> None:
    folder = supervised_folder(proxied, tmp_path / "box-1", proxied.certificates.ca)
    supervisor = supervisors.serving(folder)

    proxied.operate("POST", "/tokens", {"token": "ORDER-1", "context": ITEM})
    wait_until(
        lambda: proxied.operate("GET", "/tokens/ORDER-1")["status"] == "completed",
        "ORDER-1 completed",
        15,
    )

    assert supervisor.log[0] == f"box-1 serves draft, review; the control plane is {proxied.url}"
    assert "task 2 of ORDER-1: reported reviewed" in supervisor.log
    passed = proxied.nginx.requests()
    assert {"GET /health HTTP/1.1", "POST /tasks/claim HTTP/1.1"} <= set(passed)
    assert {"POST /tasks/1/report HTTP/1.1", "POST /tasks/2/report HTTP/1.1"} <= set(passed)
    assert supervisor.stop() == 0


def test_token_commands_work_through_nginx_with_stateous_ca_file_and_a_token_file(
    proxied: Proxied, tmp_path: Path
) -> None:
    env = {"STATEOUS_URL": proxied.url, "STATEOUS_CA_FILE": str(proxied.certificates.ca)}
    secret = ["--token-file", str(proxied.operator_secret)]

    started = run_stateous(
        "token", "start", "ORDER-1", '{"title": "x"}', *secret, cwd=tmp_path, env=env
    )
    shown = run_stateous("token", "show", "ORDER-1", *secret, cwd=tmp_path, env=env)
    anonymous = run_stateous("token", "show", "ORDER-1", cwd=tmp_path, env=env)

    assert (started.returncode, started.stdout, started.stderr) == (
        0,
        "ORDER-1: draft, active\n",
        "",
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[0] == "ORDER-1: draft, active"
    assert "GET /tokens/ORDER-1/history HTTP/1.1" in proxied.nginx.requests()
    assert anonymous.returncode == 1
    assert anonymous.stderr.startswith(f"error: the control plane at {proxied.url} refused (401): ")


def test_the_client_works_through_nginx_with_its_ca_file_and_token_file(proxied: Proxied) -> None:
    with Client(
        proxied.url, ca_file=proxied.certificates.ca, token_file=proxied.operator_secret
    ) as client:
        client.start("ORDER-1", ITEM)
        assert client.get("ORDER-1")["state"] == "draft"
        assert client.health()["workflow"] == "orders"


@pytest.mark.parametrize("trusted", ["another-ca", "system"])
def test_a_certificate_that_the_trusted_ca_did_not_sign_ends_a_command_with_one_line(
    proxied: Proxied, tmp_path: Path, trusted: str
) -> None:
    env = {"STATEOUS_URL": proxied.url}
    if trusted == "another-ca":
        env["STATEOUS_CA_FILE"] = str(proxied.certificates.other_ca)

    shown = run_stateous("token", "show", cwd=tmp_path, env=env)

    assert (shown.returncode, shown.stdout) == (1, "")
    assert shown.stderr == f"error: {unverified(proxied.url, UNKNOWN_ISSUER)}\n"
    assert proxied.nginx.requests() == []


def test_a_certificate_for_another_host_name_is_refused_by_the_cli_and_the_client(
    proxied: Proxied, tmp_path: Path
) -> None:
    other = f"https://127.0.0.2:{proxied.nginx.port}"
    ca = str(proxied.certificates.ca)
    mismatch = "IP address mismatch, certificate is not valid for '127.0.0.2'"

    shown = run_stateous("token", "show", "--url", other, "--ca-file", ca, cwd=tmp_path)
    with Client(other, ca_file=ca) as client, pytest.raises(Unverified) as refused:
        client.health()

    assert (shown.returncode, shown.stderr) == (1, f"error: {unverified(other, mismatch)}\n")
    assert str(refused.value) == unverified(other, mismatch)
    assert isinstance(refused.value, Unreachable)


def test_a_supervisor_that_cannot_verify_the_control_plane_logs_it_and_tries_again(
    proxied: Proxied, supervisors: Supervisors, tmp_path: Path
) -> None:
    folder = supervised_folder(proxied, tmp_path / "box-1", proxied.certificates.other_ca)
    supervisor = supervisors.start(folder)

    for wait in ("1s", "2s"):
        supervisor.wait_log(f"{unverified(proxied.url, UNKNOWN_ISSUER)}; trying again in {wait}")

    assert supervisor.stop() == 0
    assert not any("Traceback" in line for line in supervisor.lines)


def init_through_nginx(proxied: Proxied, tmp_path: Path, *options: str) -> Path:
    """Run `init supervisor https://... box-1 OPTIONS` in `tmp_path`; give the folder the
    supervisor's name and the routines of `orders`; return it."""
    made = run_stateous("init", "supervisor", proxied.url, "box-1", *options, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    folder = tmp_path / "box-1"
    for stub in ("draft.py", "review.py"):
        (folder / stub).unlink()
    with (folder / "stateous.yaml").open("a") as settings:
        settings.write("name: box-1\n")
    (folder / "routines.py").write_text(ROUTINE_IMPORTS + textwrap.dedent(ORDERS))
    return folder


def test_init_supervisor_keeps_its_ca_and_token_files_in_the_settings_that_supervise_reads(
    proxied: Proxied, supervisors: Supervisors, tmp_path: Path
) -> None:
    ca = os.path.relpath(proxied.certificates.ca, tmp_path)
    secret = os.path.relpath(proxied.supervisor_secret, tmp_path)
    folder = init_through_nginx(proxied, tmp_path, "--ca-file", ca, "--token-file", secret)

    settings = (folder / "stateous.yaml").read_text().splitlines()
    assert f'ca_file: "{os.path.join("..", ca)}"' in settings
    assert f'token_file: "{os.path.join("..", secret)}"' in settings
    assert proxied.supervisor_secret.read_text().strip() not in "\n".join(settings)
    supervisor = supervisors.serving(folder)
    proxied.operate("POST", "/tokens", {"token": "ORDER-1", "context": ITEM})
    wait_until(
        lambda: proxied.operate("GET", "/tokens/ORDER-1")["status"] == "completed",
        "ORDER-1 completed",
        15,
    )
    assert supervisor.stop() == 0

    again = run_stateous("init", "supervisor", proxied.url, "box-1", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert f"kept     {os.path.join('box-1', 'stateous.yaml')}" in again.stdout.splitlines()


def test_the_command_that_a_supervisor_prints_for_another_contract_works_as_printed(
    proxied: Proxied, supervisors: Supervisors, tmp_path: Path
) -> None:
    ca = os.path.relpath(proxied.certificates.ca, tmp_path)
    secret = os.path.relpath(proxied.supervisor_secret, tmp_path)
    folder = init_through_nginx(proxied, tmp_path, "--ca-file", ca, "--token-file", secret)
    contract = folder / "contract.py"
    served = re.search(r"__checksum__ = ['\"]([^'\"]+)", contract.read_text())
    assert served is not None
    contract.write_text(contract.read_text().replace(served[1], "0" * len(served[1])))

    code, lines = supervisors.refused(folder)
    assert code == 1
    printed = re.search(r"run `([^`]+)`", lines[-1])
    assert printed is not None, lines
    words = shlex.split(printed[1])
    assert words[:3] == ["python", "-m", "stateous"] and "--refresh" in words, words
    remade = subprocess.run(
        [sys.executable, *words[1:]], cwd=tmp_path, env=environment(), capture_output=True
    )
    assert remade.returncode == 0, remade.stderr
    assert served[1] in contract.read_text()
    assert supervisors.serving(folder).stop() == 0


def test_refresh_of_a_folder_without_settings_says_so_in_one_line(tmp_path: Path) -> None:
    done = run_stateous("init", "supervisor", "--refresh", "box-9", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith("error: ") and "stateous.yaml" in done.stderr
    assert len(done.stderr.splitlines()) == 1
    assert not (tmp_path / "box-9").exists()


#: How soon after its commit a watcher through the proxy must show an entry, in seconds.
PROMPTLY = 1.0


def lines_of(process: subprocess.Popen[str]) -> queue.Queue[tuple[float, str]]:
    """The lines that `process` prints, each with the moment it came, as they come."""
    found: queue.Queue[tuple[float, str]] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            found.put((time.monotonic(), line.rstrip("\n")))

    threading.Thread(target=read, daemon=True).start()
    return found


def test_token_watch_through_the_nginx_recipe_shows_each_entry_within_a_second(
    proxied: Proxied, tmp_path: Path
) -> None:
    proxied.operate("POST", "/tokens", {"token": "ORDER-1", "context": ITEM})
    so_far = len(proxied.operate("GET", "/tokens/ORDER-1/history"))
    secret = ["--token-file", str(proxied.operator_secret)]
    watch = subprocess.Popen(
        command("token", "watch", "ORDER-1", "--url", proxied.url, *secret),
        cwd=tmp_path,
        env={**environment(), "STATEOUS_CA_FILE": str(proxied.certificates.ca)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        printed = lines_of(watch)
        for _ in range(so_far + 1):  # the heading, then the history so far
            printed.get(timeout=15)
        for action in ("pause", "resume", "cancel"):
            time.sleep(2)  # a quiet stream between entries, as a proxy's buffer would keep it
            answer = proxied.operate("POST", f"/tokens/ORDER-1/{action}")
            committed = time.monotonic()
            added = len(proxied.operate("GET", "/tokens/ORDER-1/history")) - so_far
            so_far += added
            for _ in range(added):
                try:
                    came, line = printed.get(timeout=committed + PROMPTLY - time.monotonic())
                except (queue.Empty, ValueError):
                    raise AssertionError(f"no line within {PROMPTLY} s of {action}") from None
                assert came - committed < PROMPTLY, (action, line)
        assert answer["status"] == "cancelled"
        assert watch.wait(timeout=15) == 0
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.wait()
    assert "GET /stream?token=ORDER-1 HTTP/1.1" in proxied.nginx.requests()
