"""Fixtures of the Postgres-only tests: a fresh schema on the server of STATEOUS_TEST_POSTGRES."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.control.support import NO_POSTGRES, POSTGRES, Backend, fresh_schema
from tests.proxy import Proxy


@pytest.fixture
def url() -> Iterator[str]:
    """The URL of a fresh, empty schema, dropped after the test; skips without a server."""
    if POSTGRES is None:
        pytest.skip(NO_POSTGRES)
    with fresh_schema(POSTGRES) as fresh:
        yield fresh


@pytest.fixture
def backend(url: str, tmp_path: Path) -> Backend:
    return Backend("postgres", tmp_path, url)


@pytest.fixture
def proxy(url: str) -> Iterator[Proxy]:
    """A proxy to the server of `url`, which the test can take down and bring back."""
    parts = urlsplit(url)
    with_proxy = Proxy((parts.hostname or "127.0.0.1", parts.port or 5432))
    yield with_proxy
    with_proxy.close()
