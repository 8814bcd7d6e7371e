"""A supervisor's folder: its settings, its contract and its routines.

`stateous.yaml` is read into typed settings, with one sentence that names a bad
key; the token file and the CA file that it names, relative to the folder, are
read with it, so a file that cannot be used stops the start. Every Python file
of the folder is imported, with the folder first on the import path, and the
functions marked with `@on_state` are collected, one per state. User code runs
here, so every way it can fail becomes one sentence.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import sys
import traceback
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from stateous.client.access import Access
from stateous.client.http import BadSetting
from stateous.client.urls import is_http
from stateous.model.errors import Failure
from stateous.model.invocation import invoked_as
from stateous.model.labels import labels_problem
from stateous.model.limits import SETTINGS_NAME_LIMIT, TASKS_LIMIT
from stateous.model.names import plain_text
from stateous.supervisor.routine import (
    Context,
    StateRef,
    context_model,
    is_stub,
    model_of,
    routine_state,
)

SETTINGS = "stateous.yaml"
CONTRACT = "contract.py"
#: The most characters of a failed attempt's error that the supervisor sends.
ERROR_LIMIT = 2000
#: Folders of installed libraries: a frame in one is not the folder's own code.
INSTALLED = frozenset({"site-packages", "dist-packages"})
#: The keys of stateous.yaml, in the order that a refusal lists them.
KEYS = ("url", "tasks", "name", "token_file", "ca_file", "eager", "labels")


class FolderError(Failure):
    """The folder cannot be supervised as it is."""


@dataclass(frozen=True, slots=True)
class Settings:
    #: The control plane, and its standbys after it, each without a trailing `/`.
    urls: tuple[str, ...]
    tasks: int
    name: str
    #: The secret and the trusted CAs of every connection; their repr hides the secret.
    access: Access = field(default_factory=Access)
    #: Whether a report asks for the supervisor's next task (`next`: granting.py).
    eager: bool = True
    #: What the supervisor's box offers (`gpu: "true"`, `os: macos`), sent with each claim.
    labels: dict[str, str] = field(default_factory=dict)


def read_settings(folder: Path) -> Settings:
    """Read and check `stateous.yaml`; name the key that is wrong."""
    path = folder / SETTINGS
    try:
        raw = msgspec.yaml.decode(path.read_bytes())
    except FileNotFoundError:
        raise FolderError(
            f"{path} does not exist; make the folder with: "
            f"{invoked_as()} init supervisor SOURCE {folder}"
        ) from None
    except (OSError, msgspec.DecodeError) as ex:
        reason = " ".join(str(ex).split())
        raise FolderError(f"{path} cannot be read: {reason}") from None
    if not isinstance(raw, dict):
        raise FolderError(f"{path} must hold the keys url, tasks and name")
    unknown = sorted(set(raw) - set(KEYS))
    if unknown:
        raise FolderError(
            f"{path}: unknown key {unknown[0]!r}; the keys are url, tasks, name, token_file, "
            "ca_file, eager and labels"
        )
    urls = read_urls(path, raw.get("url"))
    tasks = raw.get("tasks", 4)
    if not isinstance(tasks, int) or isinstance(tasks, bool) or not 1 <= tasks <= TASKS_LIMIT:
        raise FolderError(f"{path}: tasks must be a whole number from 1 to {TASKS_LIMIT}")
    name = raw.get("name", socket.gethostname())
    if not plain_text(name, SETTINGS_NAME_LIMIT):
        raise FolderError(
            f"{path}: name must have 1 to {SETTINGS_NAME_LIMIT} characters and no control "
            "characters"
        )
    eager = raw.get("eager", True)
    if not isinstance(eager, bool):
        raise FolderError(f"{path}: eager must be true or false")
    labels = raw.get("labels") or {}
    if (problem := labels_problem(labels)) is not None:
        raise FolderError(f"{path}: labels: {problem}")
    access = read_access(folder, raw)
    return Settings(urls=urls, tasks=tasks, name=name, access=access, eager=eager, labels=labels)


def read_urls(path: Path, value: Any) -> tuple[str, ...]:
    """The `url:` of stateous.yaml: one address, or a list of them (a control plane and its
    standbys); name what is wrong."""
    items = value if isinstance(value, list) and value else [value]
    for item in items:
        if not isinstance(item, str) or not is_http(item):
            raise FolderError(
                f"{path}: url must be an http:// or https:// address, or a list of them, "
                f"not {item!r}"
            )
    return tuple(item.rstrip("/") for item in items)


def _file_setting(folder: Path, raw: dict[str, Any], key: str) -> Path | None:
    """The file that a key names, relative to the folder; None when the key is absent."""
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise FolderError(f"{folder / SETTINGS}: {key} must be the path of a file")
    return folder / value


def read_access(folder: Path, raw: dict[str, Any]) -> Access:
    """Read the secret and the trusted CAs: the files that stateous.yaml names, else the
    environment's `STATEOUS_TOKEN` and `STATEOUS_CA_FILE`."""
    try:
        return Access.read(
            token_file=_file_setting(folder, raw, "token_file"),
            ca_file=_file_setting(folder, raw, "ca_file"),
        )
    except BadSetting as ex:
        raise FolderError(str(ex)) from None


@dataclass(frozen=True, slots=True)
class Routines:
    """What the folder serves: the contract's workflow and checksum, and a routine per state.

    `models` holds the context model of each state's routine, None for a plain dict;
    `stubs` are the states whose only routine is still the stub that init wrote.
    """

    workflow: str
    checksum: str
    by_state: dict[str, tuple[StateRef, Callable[..., Any]]]
    models: dict[str, Any]
    stubs: tuple[str, ...] = ()


def _import(folder: Path, path: Path) -> dict[str, Any]:
    name = path.stem
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise FolderError(f"{path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as ex:
        sys.modules.pop(name, None)
        where = ""
        for frame in reversed(traceback.extract_tb(ex.__traceback__)):
            if Path(frame.filename).resolve().parent == folder:
                where = f" ({Path(frame.filename).name}, line {frame.lineno})"
                break
        raise FolderError(f"{path} does not import: {type(ex).__name__}: {ex}{where}") from None
    return vars(module)


def load_routines(folder: Path) -> Routines:
    """Import the contract and every file of the folder; collect one routine per state."""
    folder = folder.resolve()
    if not (folder / CONTRACT).is_file():
        raise FolderError(
            f"{folder / CONTRACT} does not exist; write it with: "
            f"{invoked_as()} init supervisor SOURCE {folder}"
        )
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    contract = _import(folder, folder / CONTRACT)
    workflow, checksum = contract.get("__workflow__"), contract.get("__checksum__")
    if not isinstance(workflow, str) or not isinstance(checksum, str):
        raise FolderError(f"{folder / CONTRACT} has no __workflow__ and __checksum__")
    found: dict[str, tuple[StateRef, Callable[..., Any], str]] = {}
    stubs: set[str] = set()
    for path in sorted(folder.glob("*.py")):
        if path.name == CONTRACT:
            continue
        for attribute, value in _import(folder, path).items():
            state = routine_state(value)
            if state is None or not callable(value):
                continue
            if is_stub(value):
                stubs.add(state.name)
                continue
            where = f"{path.name}:{attribute}"
            if state.name in found and found[state.name][1] is not value:
                raise FolderError(
                    f"two routines for {state.name!r}: {found[state.name][2]} and {where}; keep one"
                )
            found[state.name] = (state, value, where)
    if not found:
        raise FolderError(_nothing_served(folder, sorted(stubs)))
    by_state = {name: (state, routine) for name, (state, routine, _) in found.items()}
    shared = _shared_model(contract)
    models = {name: context_model(routine) or shared for name, (_, routine) in by_state.items()}
    left = tuple(sorted(stubs - set(by_state)))
    return Routines(workflow, checksum, by_state, models, left)


def _nothing_served(folder: Path, stubs: list[str]) -> str:
    """Why a folder serves no state: it has no routine, or every routine is still the stub."""
    if not stubs:
        return f"{folder} has no routine; mark a function with @on_state(states.<state>)"
    return (
        f"{folder} serves nothing: every routine is still the stub ({', '.join(stubs)}); "
        "write one and remove its stub=True"
    )


def not_served_line(stubs: tuple[str, ...]) -> str:
    """The start's line that names the states whose routine is still the stub."""
    why = "its routine is the stub" if len(stubs) == 1 else "their routines are the stubs"
    return f"not served: {', '.join(stubs)} ({why})"


def _shared_model(contract: dict[str, Any]) -> Any:
    """The context model of every state, when the contract names only one context type.

    The contract names one type per context model, and one plain dict per workflow
    without a model, so a single type is the context of every state.
    """
    types = {value for value in contract.values() if typing.get_origin(value) is Context}
    return model_of(types.pop()) if len(types) == 1 else None


def _own_file(folder: Path, filename: str) -> Path | None:
    """A traceback's file as a path in the folder, if it is the folder's own code."""
    if not os.path.isabs(filename):
        return None
    path = Path(filename)
    if not path.is_relative_to(folder):
        return None
    relative = path.relative_to(folder)
    return None if INSTALLED & set(relative.parts) else relative


def where_raised(folder: Path, error: BaseException) -> str:
    """Where an error was raised, as `path:line`.

    That is the innermost line of the folder's own code that the error passed
    through, relative to the folder, so a person sees the line of their routine or
    helper; when the error never passed through it, the innermost line of all.
    """
    frames = traceback.extract_tb(error.__traceback__)
    for frame in reversed(frames):
        relative = _own_file(folder, frame.filename)
        if relative is not None:
            return f"{relative.as_posix()}:{frame.lineno}"
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else ""


def failure_text(folder: Path, error: BaseException) -> str:
    """The error of a failed attempt: `KeyError: 'name' (routines/review.py:12)`.

    The exception's type and message come first, cut to fit the limit; the place
    where it was raised is always kept.
    """
    message = str(error)
    what = f"{type(error).__name__}: {message}" if message else type(error).__name__
    where = where_raised(folder, error)
    place = f" ({where})" if where else ""
    return what[: ERROR_LIMIT - len(place)] + place
