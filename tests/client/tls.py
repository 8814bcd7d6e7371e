"""A private CA, a server certificate for 127.0.0.1, and nginx as a real TLS proxy.

The certificates are made with the `openssl` command in the test's folder: a CA,
a certificate that it signs for `localhost` and `127.0.0.1`, and a second CA that
signed nothing here, for the tests of a wrong CA. `Nginx` writes a config in the
same folder (pid, logs and temporary files all there), listens with TLS on a free
port of 127.0.0.1 and 127.0.0.2, and passes every request to a control plane on
another port as the nginx site of docs/how-to/run-across-computers.md does (its
proxying lines are taken from there). Only its certificate names 127.0.0.1, so
127.0.0.2 is a wrong host name for the same server.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.supervisor.support import free_port

#: How long nginx may take to listen.
START_TIMEOUT = 10.0
#: Where Debian puts nginx, which a PATH without the sbin folders leaves out.
NGINX_PLACES = ("/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx")


@dataclass(frozen=True)
class Certificates:
    """The files of a private CA and of the server certificate it signed."""

    ca: Path
    other_ca: Path
    certificate: Path
    key: Path


def openssl(folder: Path, *args: str) -> None:
    done = subprocess.run(
        ["openssl", *args], cwd=folder, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr


def new_ca(folder: Path, name: str) -> Path:
    """A self-signed CA certificate `name.pem`, with its key `name.key` beside it."""
    openssl(
        folder,
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
        "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2",
        "-subj", f"/CN={name}",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    )  # fmt: skip
    return folder / f"{name}.pem"


def make_certificates(folder: Path) -> Certificates:
    """Make the CA, the server's certificate for localhost and 127.0.0.1, and another CA."""
    if shutil.which("openssl") is None:
        pytest.fail("the openssl command is missing; .ci/run installs it (apt-get install openssl)")
    folder.mkdir(parents=True, exist_ok=True)
    ca = new_ca(folder, "stateous-test-ca")
    other = new_ca(folder, "another-ca")
    (folder / "server.ext").write_text(
        "subjectAltName = DNS:localhost, IP:127.0.0.1\n"
        "basicConstraints = critical, CA:FALSE\n"
        "keyUsage = critical, digitalSignature, keyEncipherment\n"
        "extendedKeyUsage = serverAuth\n"
        "subjectKeyIdentifier = hash\n"
        "authorityKeyIdentifier = keyid, issuer\n"
    )
    openssl(
        folder,
        "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost",
    )  # fmt: skip
    openssl(
        folder,
        "x509", "-req", "-in", "server.csr", "-CA", ca.name, "-CAkey", "stateous-test-ca.key",
        "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "server.ext",
    )  # fmt: skip
    return Certificates(ca, other, folder / "server.pem", folder / "server.key")


def nginx_command() -> str:
    """The nginx program: on PATH, else where Debian installs it; skip when there is none."""
    found = shutil.which("nginx") or next(
        (place for place in NGINX_PLACES if Path(place).is_file()), None
    )
    if found is None:
        pytest.skip("nginx is not installed (.ci/run installs it: apt-get install nginx)")
    return found


CONFIG = """\
daemon off;
master_process off;
worker_processes 1;
pid {folder}/nginx.pid;
error_log {folder}/error.log info;

events {{
    worker_connections 64;
}}

http {{
    access_log {folder}/access.log;
    client_body_temp_path {folder}/client-body;
    proxy_temp_path {folder}/proxy;
    fastcgi_temp_path {folder}/fastcgi;
    uwsgi_temp_path {folder}/uwsgi;
    scgi_temp_path {folder}/scgi;

    upstream stateous {{
        server 127.0.0.1:{upstream};
        keepalive 8;
    }}

    server {{
        listen 127.0.0.1:{port} ssl;
        listen 127.0.0.2:{port} ssl;
        ssl_certificate {certificate};
        ssl_certificate_key {key};
{recipe}
    }}
}}
"""
#: The how-to whose nginx site the proxy serves.
RECIPE = Path(__file__).parents[2] / "docs" / "how-to" / "run-across-computers.md"


def recipe() -> str:
    """The proxying part of the how-to's nginx site: its `server` block after the TLS
    settings, so that the tests run the recipe that users copy."""
    site = RECIPE.read_text().partition("```nginx\n")[2].partition("```")[0]
    server = site.partition("server {\n")[2].rstrip().removesuffix("}")
    lines = server.splitlines()
    last_tls = max(number for number, line in enumerate(lines) if line.lstrip().startswith("ssl_"))
    return "\n".join("    " + line if line else line for line in lines[last_tls + 1 :])


class Nginx:
    """A real nginx process in front of a control plane; `url` is its https:// address."""

    def __init__(self, folder: Path, upstream: int, certificates: Certificates) -> None:
        program = nginx_command()
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        config = folder / "nginx.conf"
        config.write_text(
            CONFIG.format(
                folder=folder,
                upstream=upstream,
                port=self.port,
                certificate=certificates.certificate,
                key=certificates.key,
                recipe=recipe(),
            )
        )
        with (folder / "stderr.log").open("wb") as stderr:
            self.process = subprocess.Popen(
                [program, "-p", str(folder), "-c", str(config), "-e", str(folder / "error.log")],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
        self._wait_listening()

    def _wait_listening(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                said = self.errors()
                self.close()
                raise AssertionError(f"nginx did not listen: {said}")
            time.sleep(0.05)

    def errors(self) -> str:
        """What nginx said on stderr and in its error log."""
        logs = [self.folder / "stderr.log", self.folder / "error.log"]
        return "".join(log.read_text() for log in logs if log.exists())

    def requests(self) -> list[str]:
        """The request lines of the access log, e.g. `POST /tasks/claim HTTP/1.1`."""
        log = self.folder / "access.log"
        lines = log.read_text().splitlines() if log.exists() else []
        return [line.split('"')[1] for line in lines if line.count('"') >= 2]

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
