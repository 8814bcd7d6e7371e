"""The pyz finds its cache folder and its platform as platformdirs and sysconfig do, without
importing them."""

import sysconfig

import platformdirs
import pytest

from stateous._zipapp import CACHE_VARIABLE, cache_root, running_platform


@pytest.mark.parametrize("xdg", [None, "/tmp/somewhere", "relative/ignored", ""])
def test_the_cache_root_is_platformdirs_user_cache(
    monkeypatch: pytest.MonkeyPatch, xdg: str | None
) -> None:
    monkeypatch.delenv(CACHE_VARIABLE, raising=False)
    if xdg is None:
        monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    else:
        monkeypatch.setenv("XDG_CACHE_HOME", xdg)
    assert cache_root() == platformdirs.user_cache_dir("stateous")


def test_the_cache_variable_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_VARIABLE, "/tmp/stateous-cache")
    assert cache_root() == "/tmp/stateous-cache"


def test_the_running_platform_is_the_one_that_the_build_records() -> None:
    assert running_platform() == sysconfig.get_platform()
