"""The start of `stateous.pyz`: unpack this CPython's compiled extensions, then run the CLI.

build_zipapp.py writes this file as the zip's `__main__.py`. The zip carries the Python code
per CPython under `_python/<tag>/`, compiled by that CPython, which this puts first on the
path. Compiled extensions cannot load from inside a zip, so the zip carries them per CPython
under `_native/<tag>/` and the first run unpacks the running interpreter's set into a cache
folder named by its content hash, through a temporary folder and one rename, so that racing or
killed first runs never leave a broken folder. It must import nothing but the standard library
and platformdirs (the rest of the package needs the extensions it unpacks), and must stay
readable by older Pythons, which get one line.
"""

import importlib
import json
import os
import sys
import sysconfig
import zipimport

#: Where the zip keeps its compiled extensions and their manifest.
NATIVE = "_native"
#: Where the zip keeps the Python code (source and bytecode) of each CPython it carries.
PYTHON = "_python"
MANIFEST = NATIVE + "/manifest.json"
#: An environment variable that names the cache folder instead of platformdirs' user cache.
CACHE_VARIABLE = "STATEOUS_CACHE"
#: A temporary folder left by a killed run is removed once it is this old, in seconds.
STALE_AFTER = 3600.0
PARTIAL_PREFIX = ".partial-"


class NotCarried(Exception):
    """The zip has no compiled extensions for this interpreter or platform."""


def running_tag() -> str:
    """Return the wheel tag of the running interpreter, for example `cp312`."""
    version = f"{sys.version_info[0]}{sys.version_info[1]}"
    if sys.implementation.name != "cpython":
        return sys.implementation.name + version
    return "cp" + version + ("t" if "t" in getattr(sys, "abiflags", "") else "")


def running_platform() -> str:
    """Return the platform name that the build recorded for its wheels, for this machine."""
    return sysconfig.get_platform()


def describe(tag: str) -> str:
    """Return a tag as people read it: `cp312` is `3.12`, `cp313t` is `3.13 (free-threaded)`."""
    if not tag.startswith("cp"):
        return tag
    digits = tag[2:].rstrip("t")
    return f"{digits[0]}.{digits[1:]}" + (" (free-threaded)" if tag.endswith("t") else "")


def choose(manifest: dict, tag: str, platform: str) -> dict:
    """Return the manifest's entry for this interpreter, or raise NotCarried in one sentence."""
    entry = manifest["targets"].get(tag)
    if entry is not None and manifest["platform"] == platform:
        return entry
    carried = ", ".join(describe(name) for name in sorted(manifest["targets"]))
    running = describe(tag)
    raise NotCarried(
        f"this stateous.pyz carries CPython {carried} on {manifest['platform']};"
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


def unpack(archive: str, entry: dict, root: str) -> str:
    """Return the folder of this entry's files under root, unpacking it first if it is missing."""
    final = os.path.join(root, entry["hash"])
    if os.path.isdir(final):
        return final
    # Imported here, as only a first run needs them: a warm start stays short.
    import hashlib
    import shutil
    import tempfile
    import zipfile

    os.makedirs(root, exist_ok=True)
    remove_stale(root)
    partial = tempfile.mkdtemp(prefix=PARTIAL_PREFIX, dir=root)
    try:
        with zipfile.ZipFile(archive) as source:
            for name, digest in sorted(entry["files"].items()):
                data = source.read(NATIVE + "/" + entry["tag"] + "/" + name)
                if hashlib.sha256(data).hexdigest() != digest:
                    raise OSError(f"{name} in {archive} does not match its hash")
                path = os.path.join(partial, *name.split("/"))
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "wb") as out:
                    out.write(data)
        try:
            os.rename(partial, final)
        except OSError:
            if not os.path.isdir(final):
                raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return final


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


def prepare(loader: zipimport.zipimporter) -> str:
    """Put the running interpreter's code on the path, unpack its extensions from the loader's
    zip and return their folder.

    The manifest is read through the zip importer, which has read the zip's index already.
    """
    manifest = json.loads(loader.get_data(os.path.join(loader.archive, *MANIFEST.split("/"))))
    entry = choose(manifest, running_tag(), running_platform())
    sys.path.insert(0, os.path.join(loader.archive, PYTHON, entry["tag"]))
    return unpack(loader.archive, entry, cache_root())


def run() -> int:
    """Make the extensions importable and run the `stateous` command."""
    try:
        folder = prepare(globals()["__loader__"])
    except (NotCarried, OSError) as ex:
        print(f"error: {ex}", file=sys.stderr)
        return 1
    sys.path.insert(0, folder)
    return importlib.import_module("stateous.cli.main").main()


if __name__ == "__main__":
    sys.exit(run())
