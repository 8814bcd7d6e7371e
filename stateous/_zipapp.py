"""The start of `stateous.pyz`: unpack the code for this CPython, then run the CLI from it.

build_zipapp.py writes this file as the zip's `__main__.py`. The zip carries the Python source
once, in the archive `_python/source.zip`, and per CPython, in `_cpython/<tag>.zip`, the
compiled extensions (which cannot load from inside a zip) and the bytecode of that source,
compiled by that CPython. They are archives inside the zip, not members of it, because the
import system reads the index of the whole zip at every start, at some 13 microseconds a
member. The first run unpacks the source and the running interpreter's set into one cache
folder named by their content hash, through a temporary folder and one rename, so that racing
or killed first runs never leave a broken folder; every run imports from that folder, bytecode
beside source as the import system expects it, with no compiling and no zip to read. A warm
start reads only `_cpython/targets.txt`, a few lines that need neither json nor re. It must
import nothing but the standard library and platformdirs (the rest of the package needs what
it unpacks), and must stay readable by older Pythons, which get one line.
"""

import importlib
import os
import sys
import zipimport

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO

#: Where the zip keeps the Python source, shared by every CPython it carries: the archive
#: `source.tar.xz`, and beside it the modules that a first run off Linux imports from the zip.
PYTHON = "_python"
SOURCE = PYTHON + "/source.tar.xz"
#: Where the zip keeps what each CPython needs of its own (compiled extensions, bytecode),
#: one archive `<tag>.tar.xz` each, the manifest of every file with its hash, and the targets:
#: a first line naming the platform, then one line `<tag> <folder>` per CPython.
CPYTHON = "_cpython"
MANIFEST = CPYTHON + "/manifest.json"
TARGETS = CPYTHON + "/targets.txt"
#: An environment variable that names the cache folder instead of platformdirs' user cache.
CACHE_VARIABLE = "STATEOUS_CACHE"
#: A temporary folder left by a killed run is removed once it is this old, in seconds.
STALE_AFTER = 3600.0
PARTIAL_PREFIX = ".partial-"


class NotCarried(Exception):
    """The zip has no compiled extensions for this interpreter or platform."""


class CannotUnpack(Exception):
    """This interpreter lacks what unpacking the zip takes."""


def running_tag() -> str:
    """Return the wheel tag of the running interpreter, for example `cp312`."""
    version = f"{sys.version_info[0]}{sys.version_info[1]}"
    if sys.implementation.name != "cpython":
        return sys.implementation.name + version
    return "cp" + version + ("t" if "t" in getattr(sys, "abiflags", "") else "")


def running_platform() -> str:
    """Return the platform name that the build recorded for its wheels, for this machine.

    The build records `sysconfig.get_platform()`. On Linux that is `linux-` and the machine
    of `os.uname()`, which is followed here without importing sysconfig, a tenth of a warm
    start; elsewhere sysconfig answers.
    """
    if sys.platform == "linux" and "_PYTHON_HOST_PLATFORM" not in os.environ:
        machine = os.uname().machine.replace(" ", "_").replace("/", "-")
        return "linux-" + machine
    import sysconfig

    return sysconfig.get_platform()


def describe(tag: str) -> str:
    """Return a tag as people read it: `cp312` is `3.12`, `cp313t` is `3.13 (free-threaded)`."""
    if not tag.startswith("cp"):
        return tag
    digits = tag[2:].rstrip("t")
    return f"{digits[0]}.{digits[1:]}" + (" (free-threaded)" if tag.endswith("t") else "")


def read_targets(text: str) -> "tuple[str, dict[str, str]]":
    """Read `targets.txt`: the platform, and the cache folder's name of each CPython's tag."""
    platform, *lines = text.splitlines()
    folders = {}
    for line in lines:
        tag, folder = line.split(" ")
        folders[tag] = folder
    return platform, folders


def choose(targets: str, tag: str, platform: str) -> str:
    """Return the cache folder's name for this interpreter from the text of `targets.txt`,
    or raise NotCarried in one sentence."""
    carried_platform, folders = read_targets(targets)
    folder = folders.get(tag)
    if folder is not None and carried_platform == platform:
        return folder
    carried = ", ".join(describe(name) for name in sorted(folders))
    running = describe(tag)
    raise NotCarried(
        f"this stateous.pyz carries CPython {carried} on {carried_platform};"
        f" this is {'CPython ' if tag.startswith('cp') else ''}{running} on {platform}"
    )


def cache_root() -> str:
    """Return the folder that holds the unpacked extensions."""
    chosen = os.environ.get(CACHE_VARIABLE)
    if chosen:
        return chosen
    if sys.platform.startswith("linux"):
        # platformdirs' own rule on Linux, without the ~20 ms of importing it on every start.
        base = os.environ.get("XDG_CACHE_HOME", "").strip()
        if not os.path.isabs(base):
            base = os.path.expanduser("~/.cache")
        return os.path.join(base, "stateous")
    import platformdirs

    return platformdirs.user_cache_dir("stateous")


def unpack(archive: str, folder: str, tag: str, root: str) -> str:
    """Return the folder of the source and this tag's files under root, unpacking them
    first if it is missing."""
    final = os.path.join(root, folder)
    if os.path.isdir(final):
        return final
    # Imported here, as only a first run needs them: a warm start stays short.
    import json
    import shutil
    import tempfile
    import zipfile

    try:
        import lzma  # noqa: F401  (the reader of the archives inside)
    except ImportError:
        raise CannotUnpack(
            "this Python was built without the lzma module, which stateous.pyz needs "
            "to unpack itself"
        ) from None
    os.makedirs(root, exist_ok=True)
    remove_stale(root)
    partial = tempfile.mkdtemp(prefix=PARTIAL_PREFIX, dir=root)
    try:
        with zipfile.ZipFile(archive) as outer:
            manifest = json.loads(outer.read(MANIFEST))
            files = manifest["targets"][tag]["files"]
            for name in (*manifest["source"], *files):
                if outside(name):
                    raise OSError(f"{archive} lists {name!r}, a path outside its folder")
            for group, listed in ((SOURCE, manifest["source"]), (inner_archive(tag), files)):
                with outer.open(group) as packed:
                    extract(packed, listed, partial, group, archive)
        try:
            os.rename(partial, final)
        except OSError:
            if not os.path.isdir(final):
                raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return final


def outside(name: str) -> bool:
    """Tell whether a listed file's name would be written outside the folder it goes into."""
    return any(part in ("", ".", "..") or "\\" in part or ":" in part for part in name.split("/"))


def extract(
    packed: "IO[bytes]", listed: "dict[str, str]", folder: str, group: str, archive: str
) -> None:
    """Write the files that listed names, from the tar.xz packed (the member group of the zip
    archive), into folder, each checked against its hash; refuse anything else that the
    archive holds and any file it lacks.

    Only listed names are written, as files, by this code rather than by tarfile's
    extraction: a member's own path, type or link is never followed. The archive is read
    as a stream, one member at a time, in the order it was packed.
    """
    import hashlib
    import lzma
    import tarfile

    where = f"{group} in {archive}"
    left = dict(listed)
    try:
        with tarfile.open(fileobj=packed, mode="r|xz") as tar:
            for member in tar:
                digest = left.pop(member.name, None)
                content = tar.extractfile(member) if member.isfile() else None
                if digest is None or content is None:
                    raise OSError(
                        f"{where} holds {member.name!r}, which is not a file that its"
                        " manifest lists"
                    )
                data = content.read()
                if hashlib.sha256(data).hexdigest() != digest:
                    raise OSError(f"{member.name} in {archive} does not match its hash")
                path = os.path.join(folder, *member.name.split("/"))
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "wb") as out:
                    out.write(data)
    except (tarfile.TarError, lzma.LZMAError, EOFError) as ex:
        raise OSError(f"{where} is damaged: {ex}") from None
    if left:
        raise OSError(f"{where} lacks {min(left)}")


def remove_stale(root: str) -> None:
    """Remove temporary folders that killed runs left behind long ago."""
    import shutil
    import time

    cutoff = time.time() - STALE_AFTER
    for name in os.listdir(root):
        path = os.path.join(root, name)
        try:
            stale = name.startswith(PARTIAL_PREFIX) and os.path.getmtime(path) < cutoff
        except OSError:
            continue
        if stale:
            shutil.rmtree(path, ignore_errors=True)


def inner_archive(tag: str) -> str:
    """Return the zip's member that holds a CPython's own files, e.g. `_cpython/cp312.tar.xz`."""
    return CPYTHON + "/" + tag + ".tar.xz"


def prepare(loader: zipimport.zipimporter) -> str:
    """Unpack the running interpreter's code from the loader's zip (once) and return its
    folder.

    The targets are read through the zip importer, which has read the zip's index already.
    Off Linux, finding the cache folder imports platformdirs from the zip's `_python/`.
    """
    targets = loader.get_data(os.path.join(loader.archive, *TARGETS.split("/")))
    tag = running_tag()
    folder = choose(targets.decode(), tag, running_platform())
    sys.path.append(os.path.join(loader.archive, PYTHON))
    try:
        return unpack(loader.archive, folder, tag, cache_root())
    finally:
        sys.path.pop()


def run() -> int:
    """Put the unpacked code first on the path and run the `stateous` command."""
    try:
        folder = prepare(globals()["__loader__"])
    except (NotCarried, CannotUnpack, OSError) as ex:
        print(f"error: {ex}", file=sys.stderr)
        return 1
    sys.path.insert(0, folder)
    return importlib.import_module("stateous.cli.main").main()


if __name__ == "__main__":
    sys.exit(run())
