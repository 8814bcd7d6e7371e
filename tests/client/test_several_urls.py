"""`Client` with several control planes: a list or a comma string, moving on to the next.

A dead port refuses the connection; a standby `serve` answers 503 `not_serving`;
the serving one answers. The client reaches the serving one whatever the order,
and keeps to it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from stateous import Client
from stateous.client import BadSetting, Refused, Unreachable
from tests.control.serving import Launcher, Served, orders, write_graph
from tests.supervisor.standby import standby
from tests.supervisor.support import free_port

ITEM = {"title": "first order"}


@pytest.fixture
def planes(tmp_path: Path) -> Iterator[tuple[Served, Served]]:
    """A serving control plane and its standby, on one SQLite file."""
    launcher = Launcher(tmp_path)
    try:
        graph = tmp_path / "orders.json"
        write_graph(graph, orders())
        db = ("--db", f"sqlite:///{tmp_path / 'orders.sqlite'}")
        yield launcher.serve(graph, None, *db), standby(launcher, graph, *db)
    finally:
        launcher.close()


def test_a_client_moves_past_a_dead_url_and_a_standby_and_keeps_to_the_one_that_answered(
    planes: tuple[Served, Served],
) -> None:
    primary, second = planes
    dead = f"http://127.0.0.1:{free_port()}"
    with Client([dead, second.url, primary.url]) as client:
        assert client.start("ORDER-1", ITEM)["token"] == "ORDER-1"
        assert client.url == primary.url
        assert client.get("ORDER-1")["state"] == "draft"
        assert client.urls == (dead, second.url, primary.url)


def test_a_comma_string_names_several_urls(planes: tuple[Served, Served]) -> None:
    primary, _ = planes
    dead = f"http://127.0.0.1:{free_port()}"
    with Client(f"{dead}/, {primary.url}") as client:
        assert client.health()["workflow"] == "orders"
        assert client.url == primary.url


def test_when_no_url_serves_the_last_one_tried_is_named(planes: tuple[Served, Served]) -> None:
    _, second = planes
    dead = f"http://127.0.0.1:{free_port()}"
    with Client([dead, second.url]) as client, pytest.raises(Refused) as refused:
        client.get("ORDER-1")
    assert (refused.value.status, refused.value.code) == (503, "not_serving")
    with Client([second.url, dead]) as client, pytest.raises(Unreachable) as unreachable:
        client.get("ORDER-1")
    assert str(unreachable.value).startswith(f"cannot reach the control plane at {dead} (")


@pytest.mark.parametrize(
    ("urls", "says"),
    [
        ([], "name at least one control plane's URL"),
        ("", "name at least one control plane's URL"),
        ("http://a:8080,,http://b:8080", "'' is not an http:// or https:// URL"),
        (["http://a:8080", "ftp://b"], "'ftp://b' is not an http:// or https:// URL"),
    ],
)
def test_a_list_with_no_url_or_a_bad_one_is_refused_at_once(urls: object, says: str) -> None:
    with pytest.raises(BadSetting) as refused:
        Client(urls)  # type: ignore[arg-type]
    assert str(refused.value) == says
