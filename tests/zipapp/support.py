"""What the tests of stateous.pyz share: the interpreters to run it with, a pyz to run, a run
of it on its own cache, and readers of what it carries."""

from __future__ import annotations

import functools
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import build_zipapp
from stateous import _unpacking, _zipapp
from tests.conftest import ROOT

TARGETS = ("3.11", "3.12", "3.13")
DIST = ROOT / "dist" / "stateous.pyz"

#: What a candidate interpreter prints: its version and its own path.
REPORT = "import sys; print('%d.%d' % sys.version_info[:2], sys.executable)"


@functools.cache
def find_python(version: str) -> str | None:
    """Return an interpreter of CPython `version` (for example `3.12`), or None if none runs.

    The answer is the interpreter's own path, not a launcher such as a pyenv shim.
    """
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    candidates = [f"python{version}"]
    candidates += [str(path) for path in sorted(pyenv.glob(f"versions/{version}.*/bin/python3"))]
    for candidate in candidates:
        try:
            done = subprocess.run(
                [candidate, "-I", "-c", REPORT],
                capture_output=True,
                text=True,
                timeout=30,
            )
        except OSError:
            continue
        found, _, executable = done.stdout.strip().partition(" ")
        if done.returncode == 0 and found == version:
            return executable
    return None


def is_fresh(pyz: Path) -> bool:
    """Tell whether pyz exists and is newer than the package and the build script."""
    if not pyz.is_file():
        return False
    sources = [ROOT / "build_zipapp.py", *build_zipapp.package_files()]
    newest = max(path.stat().st_mtime for path in sources)
    return pyz.stat().st_mtime >= newest


def build(out: Path, *options: str) -> Path:
    """Build a pyz at out with build_zipapp.py and return its path."""
    command = [sys.executable, str(ROOT / "build_zipapp.py"), "--out", str(out), *options]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return out


def environment(cache: Path) -> dict[str, str]:
    """Return the environment of a pyz run whose extensions go to cache."""
    kept = {key: value for key, value in os.environ.items() if not key.startswith("PYTHON")}
    return {**kept, "STATEOUS_CACHE": str(cache), "XDG_CACHE_HOME": str(cache.parent / "xdg")}


def run(
    python: str, pyz: Path, *args: str, cwd: Path, cache: Path
) -> subprocess.CompletedProcess[str]:
    """Run `python -I pyz ARGS` to its end and return the finished process."""
    return subprocess.run(
        [python, "-I", str(pyz), *args],
        cwd=cwd,
        env=environment(cache),
        capture_output=True,
        text=True,
        timeout=120,
    )


def cache_folders(cache: Path) -> list[Path]:
    """Return every folder in the extension cache, hidden ones included."""
    return sorted(path for path in cache.iterdir() if path.is_dir()) if cache.is_dir() else []


def manifest_of(pyz: Path) -> dict:
    """Return the pyz's manifest."""
    with zipfile.ZipFile(pyz) as archive:
        return json.loads(archive.read(_unpacking.MANIFEST))  # type: ignore[no-any-return]


def inner_archive(pyz: Path, group: str) -> tarfile.TarFile:
    """Open an archive inside the pyz (`_python/source.tar.xz`, `_cpython/cp312.tar.xz`)."""
    with zipfile.ZipFile(pyz) as archive:
        return tarfile.open(fileobj=io.BytesIO(archive.read(group)), mode="r:xz")


def inner_members(pyz: Path, group: str) -> dict[str, tarfile.TarInfo]:
    """Return the members of an archive inside the pyz by name."""
    with inner_archive(pyz, group) as inner:
        return {member.name: member for member in inner.getmembers()}


def inner_read(pyz: Path, group: str, name: str) -> bytes:
    """Return one file of an archive inside the pyz."""
    with inner_archive(pyz, group) as inner:
        file = inner.extractfile(name)
        assert file is not None, name
        return file.read()


def running_entry(pyz: Path) -> dict:
    """Return the pyz's manifest entry for the interpreter that runs the tests, checking that
    its targets name the same cache folder."""
    with zipfile.ZipFile(pyz) as archive:
        targets = archive.read(_zipapp.TARGETS).decode()
    folder = _zipapp.choose(targets, _zipapp.running_tag(), _zipapp.running_platform())
    entry = manifest_of(pyz)["targets"][_zipapp.running_tag()]
    assert entry["hash"] == folder
    return entry  # type: ignore[no-any-return]


def assert_complete(folder: Path, pyz: Path, entry: dict) -> None:
    """Check that an unpacked folder holds the source and every file of its entry, each with
    its hash."""
    for name, digest in {**manifest_of(pyz)["source"], **entry["files"]}.items():
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == digest, name
