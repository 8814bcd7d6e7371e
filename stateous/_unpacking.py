"""The first run of `stateous.pyz`: unpack the source and the running CPython's set from it.

build_zipapp.py writes this file into the zip as `_python/_stateous_unpacking.py`, where the
start (`stateous/_zipapp.py`, the zip's `__main__.py`) imports it only when the cache folder
is missing. A zip holds no bytecode that the import system writes, so the start compiles its
own source at every run: what only a first run needs lives here, compiled then alone.

The files go into one cache folder named by their content hash, through a temporary folder
and one rename, so that racing or killed first runs never leave a broken folder. Only the
files that the manifest lists are written, each checked against its hash, by this code rather
than by tarfile's extraction: a member's own path, type or link is never followed, and
anything else that an archive holds, or a file it lacks, stops the run. It imports only the
standard library, and not typing (nor `__future__`), which would add 10 ms to a first run.
"""

import hashlib
import json
import lzma
import os
import shutil
import tarfile
import tempfile
import time
import zipfile

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO

#: The archive of the Python source, shared by every CPython the zip carries.
SOURCE = "_python/source.tar.xz"
#: Every file of the source and of each CPython's set, with its hash.
MANIFEST = "_cpython/manifest.json"
#: A temporary folder left by a killed run is removed once it is this old, in seconds.
STALE_AFTER = 3600.0
PARTIAL_PREFIX = ".partial-"


def inner_archive(tag: str) -> str:
    """Return the zip's member that holds a CPython's own files, e.g. `_cpython/cp312.tar.xz`."""
    return f"_cpython/{tag}.tar.xz"


def unpack(archive: str, folder: str, tag: str, root: str) -> str:
    """Unpack the source and this tag's files from the zip archive into the folder of that
    name under root, and return its path."""
    final = os.path.join(root, folder)
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
    packed: "IO[bytes]", listed: dict[str, str], folder: str, group: str, archive: str
) -> None:
    """Write the files that listed names, from the tar.xz packed (the member group of the zip
    archive), into folder, each checked against its hash; refuse anything else that the
    archive holds and any file it lacks.

    The archive is read as a stream, one member at a time, in the order it was packed, and
    then to the end of its compressed stream: one cut short may end where tar sees the end
    of its members, and must still be called damaged, not lacking files.
    """
    where = f"{group} in {archive}"
    left = dict(listed)
    try:
        with lzma.open(packed) as stream, tarfile.open(fileobj=stream, mode="r|") as tar:
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
            stream.read()
    except (tarfile.TarError, lzma.LZMAError, EOFError) as ex:
        raise OSError(f"{where} is damaged: {ex}") from None
    if left:
        raise OSError(f"{where} lacks {min(left)}")


def remove_stale(root: str) -> None:
    """Remove temporary folders that killed runs left behind long ago."""
    cutoff = time.time() - STALE_AFTER
    for name in os.listdir(root):
        path = os.path.join(root, name)
        try:
            stale = name.startswith(PARTIAL_PREFIX) and os.path.getmtime(path) < cutoff
        except OSError:
            continue
        if stale:
            shutil.rmtree(path, ignore_errors=True)
