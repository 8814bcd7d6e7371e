"""The archives inside stateous.pyz: each one solid xz stream of a tar, the same bytes from the
same inputs, and unpacked only as its manifest names each file, with its hash, under the cache
folder: a changed, missing, extra or damaged file stops the first run with one line and leaves
no folder to run from."""

from __future__ import annotations

import hashlib
import io
import json
import lzma
import sys
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from stateous import _unpacking
from tests.zipapp.support import build, cache_folders, manifest_of, run, running_entry

XZ_MAGIC = b"\xfd7zXZ\x00"
#: A file of the source, which each tampering below changes, drops or shadows.
VICTIM = "stateous/__init__.py"

Members = list[tuple[tarfile.TarInfo, bytes]]


def groups(pyz: Path) -> dict[str, dict[str, str]]:
    """Return each archive inside the pyz with the files and hashes that its manifest lists."""
    manifest = manifest_of(pyz)
    listed = {_unpacking.SOURCE: manifest["source"]}
    for tag, target in manifest["targets"].items():
        listed[_unpacking.inner_archive(tag)] = target["files"]
    return listed


def test_each_inner_archive_is_one_xz_stream_of_a_tar_of_plain_files(pyz: Path) -> None:
    with zipfile.ZipFile(pyz) as archive:
        for group, files in groups(pyz).items():
            assert archive.getinfo(group).compress_type == zipfile.ZIP_STORED
            packed = archive.read(group)
            assert packed.startswith(XZ_MAGIC), group
            decompressor = lzma.LZMADecompressor(lzma.FORMAT_XZ)
            tar = decompressor.decompress(packed)
            assert (decompressor.eof, decompressor.unused_data) == (True, b""), group
            with tarfile.open(fileobj=io.BytesIO(tar)) as inner:
                members = inner.getmembers()
            assert sorted(member.name for member in members) == sorted(files), group
            # Nothing of the build machine: no owner, no date, no mode but a file's.
            kept = {(member.type, member.mode, member.mtime) for member in members}
            owners = {(member.uid, member.gid, member.uname, member.gname) for member in members}
            assert (kept, owners) == ({(tarfile.REGTYPE, 0o644, 0)}, {(0, 0, "", "")}), group


def test_two_builds_of_the_same_inputs_are_the_same_bytes(tmp_path: Path) -> None:
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    first = build(tmp_path / "first.pyz", "--python", version)
    second = build(tmp_path / "second.pyz", "--python", version)
    assert first.read_bytes() == second.read_bytes()


def repacked(pyz: Path, out: Path, edit: Callable[[dict, Members], None]) -> Path:
    """Copy pyz to out, its manifest and the members of its source archive passed through edit,
    which changes them in place."""
    with zipfile.ZipFile(pyz) as archive:
        manifest = json.loads(archive.read(_unpacking.MANIFEST))
        with tarfile.open(fileobj=io.BytesIO(archive.read(_unpacking.SOURCE)), mode="r:xz") as tar:
            members = [(member, tar.extractfile(member).read()) for member in tar]  # type: ignore[union-attr]
        edit(manifest, members)
        inner = io.BytesIO()
        with tarfile.open(fileobj=inner, mode="w") as tar:
            for member, data in members:
                member.size = len(data)
                tar.addfile(member, io.BytesIO(data) if member.isfile() else None)
        changed = {
            _unpacking.MANIFEST: json.dumps(manifest).encode(),
            _unpacking.SOURCE: lzma.compress(inner.getvalue(), preset=1),
        }
        with zipfile.ZipFile(out, "w") as copy:
            for info in archive.infolist():
                copy.writestr(info, changed.get(info.filename) or archive.read(info))
    return out


def changed_content(manifest: dict, members: Members) -> None:
    """A file of the source says something else than what its hash was taken of."""
    for index, (member, data) in enumerate(members):
        if member.name == VICTIM:
            members[index] = (member, data + b"raise SystemExit('tampered')\n")


def unlisted_file(manifest: dict, members: Members) -> None:
    """The archive holds a file, outside its folder, that the manifest does not list."""
    members.append((tarfile.TarInfo("../escaped.py"), b"print('escaped')\n"))


def link_for_a_file(manifest: dict, members: Members) -> None:
    """A listed file is a link, to a file outside the folder, in the archive."""
    link = tarfile.TarInfo(VICTIM)
    link.type, link.linkname = tarfile.SYMTYPE, "../../escaped.py"
    members[:] = [(link, b"") if item[0].name == VICTIM else item for item in members]


def missing_file(manifest: dict, members: Members) -> None:
    """A listed file is not in the archive."""
    members[:] = [(member, data) for member, data in members if member.name != VICTIM]


def path_outside(manifest: dict, members: Members) -> None:
    """Manifest and archive agree on a file outside the folder, with its true hash."""
    data = b"print('escaped')\n"
    manifest["source"]["../escaped.py"] = hashlib.sha256(data).hexdigest()
    members.append((tarfile.TarInfo("../escaped.py"), data))


UNLISTED = "holds {name!r}, which is not a file that its manifest lists"
#: Each tampering, and the sentence that refuses it.
REFUSALS = {
    changed_content: f"{VICTIM} in {{pyz}} does not match its hash",
    unlisted_file: f"{_unpacking.SOURCE} in {{pyz}} " + UNLISTED.format(name="../escaped.py"),
    link_for_a_file: f"{_unpacking.SOURCE} in {{pyz}} " + UNLISTED.format(name=VICTIM),
    missing_file: f"{_unpacking.SOURCE} in {{pyz}} lacks {VICTIM}",
    path_outside: "{pyz} lists '../escaped.py', a path outside its folder",
}


@pytest.mark.parametrize("edit", REFUSALS)
def test_an_archive_that_is_not_as_its_manifest_lists_is_not_unpacked(
    pyz: Path, tmp_path: Path, edit: Callable[[dict, Members], None]
) -> None:
    tampered = repacked(pyz, tmp_path / "tampered.pyz", edit)
    entry = running_entry(tampered)
    cache = tmp_path / "cache" / "root"
    with pytest.raises(OSError) as refused:
        _unpacking.unpack(str(tampered), entry["hash"], entry["tag"], str(cache))
    assert str(refused.value) == REFUSALS[edit].format(pyz=tampered)
    assert cache_folders(cache) == []
    assert sorted(path.name for path in tmp_path.rglob("escaped.py")) == []


def test_a_damaged_archive_stops_the_first_run_with_one_line(
    pyz: Path, folders: tuple[Path, Path]
) -> None:
    work, cache = folders
    damaged = work.parent / "damaged.pyz"
    with zipfile.ZipFile(pyz) as archive, zipfile.ZipFile(damaged, "w") as copy:
        for info in archive.infolist():
            data = archive.read(info)
            copy.writestr(
                info, data[: len(data) // 2] if info.filename == _unpacking.SOURCE else data
            )
    done = run(sys.executable, damaged, "--version", cwd=work, cache=cache)
    assert (done.returncode, done.stdout) == (1, ""), done.stderr
    assert done.stderr.startswith(f"error: {_unpacking.SOURCE} in {damaged} is damaged: "), (
        done.stderr
    )
    assert done.stderr.count("\n") == 1, done.stderr
    assert cache_folders(cache) == []
