#!/usr/bin/env python3
"""Write dist/stateous.pyz: the package and every runtime dependency in one executable zip.

The package and the pure-Python wheels are written once, as source, into the archive
`_python/source.tar.xz` inside the zip. Each targeted CPython gets an archive
`_cpython/<tag>.tar.xz` of its own: its compiled extensions (apsw, msgspec, and psycopg's
binary with `--with-postgres`) and the bytecode of the whole tree, compiled by that CPython
(`compileall`, in `__pycache__` as the import system names it, so that no start compiles it
again). A target whose interpreter is not on this machine gets no bytecode; the first run
writes it. The archives inside keep the zip itself to a dozen members, since the import
system reads the index of every member at each start of the zip. Each is a tar compressed
as one LZMA stream (solid), which finds what its files share; on x86 the compiled ones go
through the x86 branch filter first. They are stored in the zip as they are, and equal
inputs give equal bytes: members in a fixed order, with no date and no owner.
`_cpython/manifest.json` lists every file with its hash, and `_cpython/targets.txt`
the platform and each target's cache folder; `stateous/_zipapp.py`, written as the zip's
`__main__.py`, unpacks the source and the running interpreter's set into a cache folder on
first run (with `stateous/_unpacking.py`, a member of its own) and runs from there. Wheels come
from `pip download` and are kept in a user cache folder by name, so a rebuild asks nothing of
the network. Each step says on stderr what it fetches or takes from the cache, so that a first
build on a slow network does not look hung. It imports only the standard library and never
installs anything.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import lzma
import os
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

ROOT = Path(__file__).resolve().parent
PACKAGE = ROOT / "stateous"
BOOTSTRAP = PACKAGE / "_zipapp.py"
#: The first run's unpacking, which the bootstrap imports from the zip's `_python/` by this name.
UNPACKING = PACKAGE / "_unpacking.py"
UNPACKING_MODULE = "_stateous_unpacking.py"
PYTHON = "_python"
#: The form of the archives inside: a tar in one xz stream, read by tarfile and lzma.
PACKED = ".tar.xz"
SOURCE = f"{PYTHON}/source{PACKED}"
CPYTHON = "_cpython"
#: The source that a first run off Linux imports from the zip itself, before it can unpack:
#: platformdirs finds the cache folder there. These stay members of the zip too.
IMPORTED_FROM_THE_ZIP = ("platformdirs/",)
DEFAULT_PYTHONS = ("3.11", "3.12", "3.13")

#: The exact versions shipped, within pyproject.toml's ranges, the same for every target.
COMPILED = {"apsw": "3.54.1.0", "msgspec": "0.23.0"}
PURE = {"falcon": "4.4.0", "waitress": "3.0.2", "platformdirs": "4.14.9"}
#: PyYAML ships only compiled wheels; its pure part runs without the `_yaml` extension.
PURE_PART = {"PyYAML": "6.0.4"}
POSTGRES_COMPILED = {"psycopg-binary": "3.3.9"}
POSTGRES_PURE = {"psycopg": "3.3.9", "typing-extensions": "4.16.0"}

#: Files of the wheels that Stateous never runs: Falcon's benchmarks, ASGI app, test helpers,
#: route inspector with its command and JSON Schema validators (the control plane is a WSGI
#: app that checks bodies itself), type stubs, bills of materials.
LEFT_OUT = (
    "falcon/bench/",
    "falcon/asgi/",
    "falcon/testing/",
    "falcon/inspect.py",
    "falcon/cmd/",
    "falcon/media/validators/",
    "platformdirs-4.14.9.dist-info/sboms/",
)
#: What pip reads of a wheel's metadata, and nothing run from the pyz does (no module asks
#: `importlib.metadata`); each package's license files stay.
UNREAD_METADATA = ("/RECORD", "/METADATA")
#: Of apsw, Stateous runs only the compiled module `apsw` itself, not its Python tools (shell,
#: full-text search helpers, tests) nor its second extension, `apsw._unicode`.
APSW_KEPT = ("apsw/__init__.cpython-",)
#: LZMA2 at its strongest, for what only a first run reads. Its dictionary need not be larger
#: than the data (the preset's is 64 MiB), and a first run allocates what the stream names.
STRONGEST = 9 | lzma.PRESET_EXTREME
LARGEST_DICTIONARY = 64 * 2**20
SMALLEST_DICTIONARY = 4096
#: The platforms whose compiled extensions are x86 code, which the x86 branch filter takes
#: another 3 % off (it writes the targets of calls as absolute addresses, so that the calls
#: of one function look alike).
X86_PLATFORMS = ("x86_64", "amd64", "i686", "win32")
EXTENSIONS = (".so", ".pyd")


class BuildError(Exception):
    """The zipapp cannot be built; the message says why in one sentence."""


def wheel_cache() -> Path:
    """Return the folder that keeps downloaded wheels between builds."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "stateous-build" / "wheels"


def normalized(name: str) -> str:
    """Return a project name as wheel file names spell it: `psycopg-binary` is `psycopg_binary`."""
    return name.lower().replace("-", "_").replace(".", "_")


def cached_wheel(folder: Path, name: str, version: str) -> Path | None:
    """Return the wheel of name==version in folder, if an earlier build downloaded it."""
    prefix = f"{normalized(name)}-{version}-"
    found = [path for path in folder.glob("*.whl") if path.name.lower().startswith(prefix)]
    return found[0] if found else None


def platform_tags() -> list[str]:
    """Return the wheel platform tags this machine accepts, best first, as pip computes them."""
    from pip._vendor.packaging import tags

    return list(tags.platform_tags())


def say(line: str) -> None:
    """Print one line of progress on stderr, at once, so that a slow step does not look hung."""
    print(line, file=sys.stderr, flush=True)


def download(pins: dict[str, str], folder: Path, options: list[str], what: str) -> list[Path]:
    """Return the wheels of pins in folder, downloading with pip only those not there yet.

    `what` names the wheels in the progress line, e.g. `wheels for CPython 3.12`.
    """
    folder.mkdir(parents=True, exist_ok=True)
    missing = [f"{name}=={version}" for name, version in pins.items()]
    missing = [pin for pin in missing if cached_wheel(folder, *pin.split("==")) is None]
    if missing:
        say(f"fetching {what}: {', '.join(pin.split('==')[0] for pin in missing)} ...")
        command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"]
        command += ["--only-binary=:all:", "--dest", str(folder), *options, *missing]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise BuildError(f"pip could not download {', '.join(missing)}:\n{done.stderr}")
    else:
        say(f"{what} from the cache: {', '.join(pins)}")
    wheels = [cached_wheel(folder, name, version) for name, version in pins.items()]
    absent = [name for name, wheel in zip(pins, wheels, strict=True) if wheel is None]
    if absent:
        raise BuildError(f"pip did not leave a wheel of {', '.join(absent)} in {folder}")
    return [wheel for wheel in wheels if wheel is not None]


def compiled_wheels(pins: dict[str, str], python: str, platform: str) -> list[Path]:
    """Return the CPython `python` wheels of pins for this machine."""
    tag = "cp" + python.replace(".", "")
    options = ["--python-version", python, "--implementation", "cp", "--abi", tag]
    for name in platform_tags():
        options += ["--platform", name]
    return download(pins, wheel_cache() / platform / tag, options, f"wheels for CPython {python}")


def pure_wheels(pins: dict[str, str]) -> list[Path]:
    """Return the pure-Python wheels of pins."""
    options = ["--implementation", "py", "--abi", "none", "--platform", "any"]
    return download(pins, wheel_cache() / "pure", options, "pure-Python wheels")


def wheel_members(wheel: Path) -> Iterator[tuple[str, bytes]]:
    """Yield each file of a wheel that Stateous may run, with its content."""
    with zipfile.ZipFile(wheel) as source:
        for info in source.infolist():
            if info.is_dir() or not shipped(info.filename):
                continue
            yield info.filename, source.read(info)


def shipped(name: str) -> bool:
    """Tell whether a wheel's member goes into the zip."""
    if name.startswith(LEFT_OUT) or name.endswith(".pyi"):
        return False
    if ".dist-info/" in name and name.endswith(UNREAD_METADATA):
        return False
    return not name.startswith("apsw/") or name.startswith(APSW_KEPT)


def package_files() -> list[Path]:
    """Return each file of the stateous package in the working tree, bytecode left out."""
    return [
        path
        for path in sorted(PACKAGE.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    ]


def package_members() -> Iterator[tuple[str, bytes]]:
    """Yield each file of the stateous package with its content."""
    for path in package_files():
        yield path.relative_to(ROOT).as_posix(), path.read_bytes()


def content_hash(files: dict[str, str]) -> str:
    """Return one hash of a set of files from their names and hashes."""
    lines = "".join(f"{name} {digest}\n" for name, digest in sorted(files.items()))
    return hashlib.sha256(lines.encode()).hexdigest()[:32]


class Archive:
    """A zip being written into an open file, which refuses two members of the same name."""

    def __init__(self, file: BinaryIO) -> None:
        self.zip = zipfile.ZipFile(file, "w", compression=zipfile.ZIP_DEFLATED)
        self.names: set[str] = set()

    def add(self, name: str, data: bytes, compression: int = zipfile.ZIP_DEFLATED) -> None:
        """Write one member, with a fixed date so that equal inputs give equal zips."""
        if name in self.names:
            raise BuildError(f"two wheels both hold {name}")
        self.names.add(name)
        info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
        info.compress_type = compression
        info.external_attr = 0o644 << 16
        self.zip.writestr(info, data)

    def add_all(self, members: Iterable[tuple[str, bytes]], prefix: str) -> None:
        """Write members under prefix."""
        for name, data in members:
            self.add(prefix + name, data)

    def add_archive(
        self, name: str, members: Iterable[tuple[str, bytes]], machine_code: bool
    ) -> dict[str, str]:
        """Write members into a tar of their own, compressed as one stream (solid), stored as
        the one member name; return their names and content hashes.

        Solid, LZMA finds what the files share (the names and constants of 250 modules'
        bytecode), which a zip's members compressed one by one cannot: it takes a seventh
        off a CPython's set and two fifths off the source. A fresh TarInfo has owner 0,
        date 0 and mode 0644, so the build machine's users and clock leave no trace.
        """
        inner = io.BytesIO()
        hashes: dict[str, str] = {}
        with tarfile.open(fileobj=inner, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for path, data in members:
                if path in hashes:
                    raise BuildError(f"two wheels both hold {path}")
                info = tarfile.TarInfo(path)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
                hashes[path] = hashlib.sha256(data).hexdigest()
        self.add(name, compressed(inner.getvalue(), machine_code), zipfile.ZIP_STORED)
        return hashes


def compressed(data: bytes, machine_code: bool) -> bytes:
    """Return data as one xz stream, through the x86 branch filter first if it holds x86
    machine code."""
    dictionary = min(max(len(data), SMALLEST_DICTIONARY), LARGEST_DICTIONARY)
    lzma2 = {"id": lzma.FILTER_LZMA2, "preset": STRONGEST, "dict_size": dictionary}
    filters = [{"id": lzma.FILTER_X86}, lzma2] if machine_code else [lzma2]
    return lzma.compress(data, format=lzma.FORMAT_XZ, filters=filters)


def write(archive: Archive, pythons: list[str], with_postgres: bool) -> None:
    """Write the bootstrap, the tree's source once, then for each target its compiled
    extensions and its bytecode."""
    compiled = {**COMPILED, **(POSTGRES_COMPILED if with_postgres else {})}
    pure = {**PURE, **(POSTGRES_PURE if with_postgres else {})}
    platform = sysconfig.get_platform()
    # Stored: what every start reads from the zip itself, so that none imports zlib for it.
    archive.add("__main__.py", BOOTSTRAP.read_bytes(), zipfile.ZIP_STORED)
    tree = dict(package_members())
    for wheel in pure_wheels(pure):
        tree |= wheel_members(wheel)
    for wheel in compiled_wheels(PURE_PART, pythons[0], platform):
        tree |= ((name, data) for name, data in wheel_members(wheel) if not native(name))
    # Deflated, not packed: the first run of a pyz off Linux imports platformdirs from here.
    imported = (
        (name, data) for name, data in tree.items() if name.startswith(IMPORTED_FROM_THE_ZIP)
    )
    archive.add_all(imported, f"{PYTHON}/")
    archive.add(f"{PYTHON}/{UNPACKING_MODULE}", UNPACKING.read_bytes())
    source = archive.add_archive(SOURCE, tree.items(), machine_code=False)
    x86 = platform.endswith(X86_PLATFORMS)
    targets = {}
    for python in pythons:
        tag = "cp" + python.replace(".", "")
        members = bytecode(tree, python)
        for wheel in compiled_wheels(compiled, python, platform):
            members += wheel_members(wheel)
        files = archive.add_archive(f"{CPYTHON}/{tag}{PACKED}", members, machine_code=x86)
        everything = {**source, **{f"{tag}/{name}": digest for name, digest in files.items()}}
        targets[tag] = {"tag": tag, "hash": f"{tag}-{content_hash(everything)}", "files": files}
    manifest = {"platform": platform, "source": source, "targets": targets}
    archive.add(f"{CPYTHON}/manifest.json", json.dumps(manifest, indent=1).encode())
    lines = [platform, *(f"{tag} {target['hash']}" for tag, target in targets.items())]
    text = "".join(line + "\n" for line in lines)
    archive.add(f"{CPYTHON}/targets.txt", text.encode(), zipfile.ZIP_STORED)


def interpreter(python: str) -> str | None:
    """Return a command that runs CPython `python` (e.g. `3.12`) on this machine, or None."""
    if f"{sys.version_info[0]}.{sys.version_info[1]}" == python:
        return sys.executable
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    candidates = [
        f"python{python}",
        *map(str, sorted(pyenv.glob(f"versions/{python}.*/bin/python3"))),
    ]
    report = "import sys; print('%d.%d' % sys.version_info[:2])"
    for candidate in candidates:
        try:
            done = subprocess.run([candidate, "-I", "-c", report], capture_output=True, text=True)
        except OSError:
            continue
        if done.returncode == 0 and done.stdout.strip() == python:
            return candidate
    return None


def bytecode(tree: dict[str, bytes], python: str) -> list[tuple[str, bytes]]:
    """Compile the tree's modules with CPython `python`; answer each `.pyc` under the name
    that CPython's import system looks for (`__pycache__/NAME.cpython-3XY.pyc`), or nothing
    when that CPython is not here."""
    command = interpreter(python)
    if command is None:
        say(f"no CPython {python} here: its modules are compiled at each start")
        return []
    say(f"compiling the modules with CPython {python}")
    with tempfile.TemporaryDirectory() as folder:
        for name, data in tree.items():
            if name.endswith(".py"):
                path = Path(folder, name)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
        # -s: no temporary folder's name in the bytecode (the import system names the file
        # it loads from); unchecked-hash: nothing to compare with at import.
        options = ["-q", "-j", "0", "-s", folder, "--invalidation-mode", "unchecked-hash"]
        done = subprocess.run(
            [command, "-I", "-m", "compileall", *options, folder], capture_output=True, text=True
        )
        if done.returncode != 0:
            raise BuildError(f"CPython {python} could not compile the modules:\n{done.stdout}")
        return [
            (path.relative_to(folder).as_posix(), path.read_bytes())
            for path in sorted(Path(folder).rglob("*.pyc"))
        ]


def build(out: Path, pythons: list[str], with_postgres: bool) -> Path:
    """Write the zipapp to out, through a temporary file, and return its path."""
    out.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix=f".{out.name}-", dir=out.parent)
    partial = Path(name)
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(b"#!/usr/bin/env python3\n")
            archive = Archive(file)
            with archive.zip:
                write(archive, pythons, with_postgres)
        partial.chmod(0o755)
        partial.replace(out)
    finally:
        partial.unlink(missing_ok=True)
    return out


def shown(path: Path) -> str:
    """Show a path relative to the current folder when it is inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def native(name: str) -> bool:
    """Tell whether a wheel member is a compiled extension."""
    return name.endswith(EXTENSIONS) or ".so." in name


def parse_pythons(text: str) -> list[str]:
    """Parse `3.11,3.12` into versions, refusing anything that is not `3.N`."""
    pythons = [part.strip() for part in text.split(",") if part.strip()]
    for python in pythons:
        major, _, minor = python.partition(".")
        if major != "3" or not minor.isdigit():
            raise BuildError(f"--python takes versions like 3.12, not {python!r}")
    if not pythons:
        raise BuildError("--python names no version")
    return pythons


def main(argv: list[str] | None = None) -> int:
    """Build the zipapp from the command line."""
    parser = argparse.ArgumentParser(description="Write stateous.pyz, a zipapp of Stateous.")
    parser.add_argument("--out", type=Path, default=ROOT / "dist" / "stateous.pyz")
    parser.add_argument("--python", default=",".join(DEFAULT_PYTHONS), help="e.g. 3.11,3.12")
    parser.add_argument("--with-postgres", action="store_true", help="carry psycopg too")
    args = parser.parse_args(argv)
    try:
        out = build(args.out, parse_pythons(args.python), args.with_postgres)
    except BuildError as ex:
        print(f"error: {ex}", file=sys.stderr)
        return 1
    say(f"wrote {shown(out)} ({out.stat().st_size / 2**20:.1f} MiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
