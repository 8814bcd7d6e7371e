"""The start of `stateous.pyz`: unpack the code for this CPython, then run the CLI from it.

build_zipapp.py writes this file as the zip's `__main__.py`. The zip carries the Python source
once, in the archive `_python/source.tar.xz`, and per CPython, in `_cpython/<tag>.tar.xz`, the
compiled extensions (which cannot load from inside a zip) and the bytecode of that source,
compiled by that CPython. They are archives inside the zip, not members of it, because the
import system reads the index of the whole zip at every start, at some 13 microseconds a
member. The first run unpacks the source and the running interpreter's set into one cache
folder named by their content hash (stateous/_unpacking.py, which the zip carries as
`_python/_stateous_unpacking.py`: this file is compiled at every start, as a zip holds no
bytecode that the import system writes, so what only a first run needs is not in it); every
run imports from that folder, bytecode beside source as the import system expects it, with
no compiling and no zip to read. A warm start reads only `_cpython/targets.txt`, a few lines
that need neither json nor re. It must import nothing but the standard library and
platformdirs (the rest of the package needs what it unpacks), and must stay readable by older
Pythons, which get one line.
"""

import importlib
import os
import sys
import zipimport

#: Where the zip keeps the Python source, shared by every CPython it carries (the archive
#: `source.tar.xz`), and beside it the modules that a first run imports from the zip itself:
#: the unpacking, and platformdirs off Linux.
PYTHON = "_python"
UNPACKING = "_stateous_unpacking"
#: Where the zip keeps what each CPython needs of its own (compiled extensions, bytecode),
#: one archive `<tag>.tar.xz` each, the manifest of every file with its hash, and the targets:
#: a first line naming the platform, then one line `<tag> <folder>` per CPython.
CPYTHON = "_cpython"
TARGETS = CPYTHON + "/targets.txt"
#: An environment variable that names the cache folder instead of platformdirs' user cache.
CACHE_VARIABLE = "STATEOUS_CACHE"


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


def prepare(loader: zipimport.zipimporter) -> str:
    """Unpack the running interpreter's code from the loader's zip (once) and return its
    folder.

    The targets are read through the zip importer, which has read the zip's index already.
    Off Linux, finding the cache folder imports platformdirs from the zip's `_python/`; a
    first run imports the unpacking from there.
    """
    targets = loader.get_data(os.path.join(loader.archive, *TARGETS.split("/")))
    tag = running_tag()
    folder = choose(targets.decode(), tag, running_platform())
    sys.path.append(os.path.join(loader.archive, PYTHON))
    try:
        root = cache_root()
        final = os.path.join(root, folder)
        if os.path.isdir(final):
            return final
        try:
            import lzma  # noqa: F401  (the reader of the archives inside)
        except ImportError:
            raise CannotUnpack(
                "this Python was built without the lzma module, which stateous.pyz needs "
                "to unpack itself"
            ) from None
        unpacked: str = importlib.import_module(UNPACKING).unpack(loader.archive, folder, tag, root)
        return unpacked
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
    code: int = importlib.import_module("stateous.cli.main").main()
    return code


if __name__ == "__main__":
    sys.exit(run())
