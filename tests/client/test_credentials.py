"""`Client` carries a secret: from `token=`, `token_file=` or `STATEOUS_TOKEN`, never shown.

A real `stateous serve` serves `orders`; a recording server in front of it keeps
the `Authorization` header of every request that the client sends. A token file
that cannot be used is refused before anything is sent, in a sentence that names
the file and not what it holds.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from stateous import Client
from stateous.client import BadSetting, ClientError, NotFound, Unreachable
from tests.client.recording import BEARER, SECRET, Recorder
from tests.control.serving import Launcher, orders, write_graph
from tests.supervisor.support import free_port

ITEM = {"title": "an order"}


@pytest.fixture
def recorder(launcher: Launcher, tmp_path: Path) -> Iterator[Recorder]:
    graph = tmp_path / "orders.json"
    write_graph(graph, orders())
    served = launcher.serve(graph, tmp_path / "orders.sqlite")
    recording = Recorder(served.port)
    try:
        yield recording
    finally:
        recording.close()


@pytest.fixture(autouse=True)
def no_token_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STATEOUS_TOKEN", raising=False)
    monkeypatch.delenv("STATEOUS_CA_FILE", raising=False)


def secret_file(folder: Path, text: str = SECRET + "\n") -> Path:
    path = folder / "secret"
    path.write_text(text)
    return path


@pytest.mark.parametrize("source", ["token", "token_file", "STATEOUS_TOKEN"])
def test_the_client_sends_its_secret_as_a_bearer_credential_on_every_request(
    recorder: Recorder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    given: dict[str, str | Path] = {}
    if source == "token":
        given["token"] = SECRET
    elif source == "token_file":
        given["token_file"] = secret_file(tmp_path)
    else:
        monkeypatch.setenv("STATEOUS_TOKEN", SECRET)

    with Client(recorder.url, **given) as client:
        client.start("ORDER-1", ITEM)
        client.fire("ORDER-1", "submitted")
        client.history("ORDER-1")

    assert [(seen.method, seen.path) for seen in recorder.requests()] == [
        ("POST", "/tokens"),
        ("POST", "/tokens/ORDER-1/events/submitted"),
        ("GET", "/tokens/ORDER-1/history"),
    ]
    assert recorder.authorizations() == {BEARER}


def test_without_a_secret_the_client_sends_no_authorization(recorder: Recorder) -> None:
    with Client(recorder.url) as client:
        client.health()

    assert recorder.authorizations() == {None}


def test_a_token_file_wins_over_stateous_token(
    recorder: Recorder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STATEOUS_TOKEN", "another-secret")

    with Client(recorder.url, token_file=secret_file(tmp_path)) as client:
        client.health()

    assert recorder.authorizations() == {BEARER}


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (None, "cannot be read: No such file or directory"),
        ("", "is empty"),
        ("\n", "is empty"),
        (f"{SECRET}\n{SECRET}\n", "holds more than one line"),
        (f"{SECRET}\n\n", "holds more than one line"),
        (f"{SECRET} and more\n", "holds characters that cannot go in an HTTP header"),
    ],
    ids=["missing", "empty", "a-newline", "two-lines", "two-newlines", "a-space"],
)
def test_a_token_file_that_cannot_be_used_is_refused_naming_the_file_and_not_its_content(
    recorder: Recorder, tmp_path: Path, content: str | None, says: str
) -> None:
    path = tmp_path / "secret"
    if content is not None:
        path.write_text(content)

    with pytest.raises(BadSetting) as refused:
        Client(recorder.url, token_file=path)

    assert str(refused.value).startswith(f"the token file {path} {says}")
    assert SECRET not in str(refused.value)
    assert recorder.requests() == []


def test_a_token_and_a_token_file_together_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ClientError, match=r"^give token or token_file, not both$"):
        Client("http://127.0.0.1:8080", token=SECRET, token_file=secret_file(tmp_path))


def test_stateous_token_with_two_lines_is_refused_without_showing_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STATEOUS_TOKEN", f"{SECRET}\nmore")

    with pytest.raises(BadSetting) as refused:
        Client("http://127.0.0.1:8080")

    assert str(refused.value) == "STATEOUS_TOKEN holds more than one line"


def test_the_secret_stays_out_of_the_clients_repr_and_of_its_errors(recorder: Recorder) -> None:
    with Client(recorder.url, token=SECRET) as client:
        with pytest.raises(NotFound) as missing:
            client.get("NO-SUCH-TOKEN")
        shown = [repr(client), repr(vars(client)), str(missing.value), repr(missing.value)]
    gone = f"http://127.0.0.1:{free_port()}"
    with Client(gone, token=SECRET) as client, pytest.raises(Unreachable) as unreachable:
        client.health()
    shown += [str(unreachable.value), repr(unreachable.value)]

    assert not [text for text in shown if SECRET in text]
