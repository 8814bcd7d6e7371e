"""The fixtures of the pyz's tests: the pyz, the interpreters that run it, empty folders."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.zipapp.support import DIST, TARGETS, build, find_python, is_fresh


@pytest.fixture(scope="session")
def pyz(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The pyz under test: dist/stateous.pyz if it is up to date, else a fresh build."""
    if is_fresh(DIST):
        return DIST
    return build(tmp_path_factory.mktemp("pyz") / "stateous.pyz")


@pytest.fixture(params=TARGETS)
def python(request: pytest.FixtureRequest) -> str:
    """An installed interpreter of each target CPython."""
    found = find_python(request.param)
    if found is None:
        pytest.skip(f"CPython {request.param} is not installed")
    return found


@pytest.fixture
def python_311() -> str:
    """An installed CPython 3.11."""
    found = find_python("3.11")
    if found is None:
        pytest.skip("CPython 3.11 is not installed")
    return found


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path]:
    """An empty working folder and an empty cache folder beside it."""
    work = tmp_path / "work"
    work.mkdir()
    return work, tmp_path / "cache"
