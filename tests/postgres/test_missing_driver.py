"""Without psycopg, `serve --db postgresql://...` says in one line what to install."""

from __future__ import annotations

import sys

import pytest

import stateous.control.store
from stateous.control.store import StoreError, open_store


@pytest.mark.parametrize("url", ["postgresql://x@127.0.0.1/db", "postgres://x@127.0.0.1/db"])
def test_a_postgres_url_without_psycopg_says_to_install_the_extra(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    for name in [
        name for name in sys.modules if name.startswith("stateous.control.store.postgres")
    ]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.delattr(stateous.control.store, "postgres", raising=False)
    with pytest.raises(StoreError, match=r"install stateous\[postgres\]"):
        open_store(url, connections=2)
