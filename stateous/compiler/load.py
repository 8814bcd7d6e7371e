"""Import a `flow.py` and find its one top workflow.

The file is imported with its folder first on the import path, so that it can
import `schemas.py` beside it; afterwards every module of that folder is
forgotten again, so that compiling a second flow in the same process never sees
the first one's modules.
"""

from __future__ import annotations

import importlib.util
import sys
import traceback
from pathlib import Path

from stateous.model.errors import DefinitionError, Failure
from stateous.model.workflow import Workflow


class LoadError(Failure):
    """`flow.py` could not be loaded, or holds no single top workflow."""


def _folder_module_names(folder: Path) -> set[str]:
    names = {entry.stem for entry in folder.glob("*.py")}
    names.update(entry.name for entry in folder.iterdir() if (entry / "__init__.py").is_file())
    return names


def _line_in(folder: Path, ex: BaseException) -> str:
    """Name the last line of the user's own files that the failure passed through."""
    for frame in reversed(traceback.extract_tb(ex.__traceback__)):
        if Path(frame.filename).resolve().parent == folder:
            return f" ({Path(frame.filename).name}, line {frame.lineno})"
    return ""


def import_flow(path: Path) -> dict[str, object]:
    """Run `flow.py` as a module and return its top-level names."""
    shown, path = path, path.resolve()
    if not path.is_file():
        raise LoadError(f"{shown} does not exist")
    folder = path.parent
    local = _folder_module_names(folder)
    shadowed = {name: sys.modules.pop(name) for name in local if name in sys.modules}
    saved_path = list(sys.path)
    sys.path.insert(0, str(folder))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None:
        raise LoadError(f"{shown} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    try:
        spec.loader.exec_module(module)
    except DefinitionError as ex:
        raise LoadError(str(ex)) from None
    except SyntaxError as ex:
        where = f" ({Path(ex.filename or path).name}, line {ex.lineno})"
        raise LoadError(f"{shown} does not import: {ex.msg}{where}") from None
    except (Exception, SystemExit) as ex:
        reason = f"{type(ex).__name__}: {ex}"
        raise LoadError(f"{shown} does not import: {reason}{_line_in(folder, ex)}") from None
    finally:
        sys.path[:] = saved_path
        for name in local | {path.stem}:
            sys.modules.pop(name, None)
        sys.modules.update(shadowed)
    return vars(module)


def workflow_tree(top: Workflow) -> list[Workflow]:
    """Return the top workflow and every workflow that its parallel states run, nested."""
    seen: list[Workflow] = []
    pending = [top]
    while pending:
        workflow = pending.pop(0)
        if any(workflow is known for known in seen):
            continue
        seen.append(workflow)
        for state in workflow.states.values():
            pending.extend(state.parallel)
    return seen


def find_top(names: dict[str, object], path: Path) -> Workflow:
    """Pick the one workflow that no parallel state runs."""
    found: list[Workflow] = []
    for value in names.values():
        if isinstance(value, Workflow) and not any(value is known for known in found):
            found.append(value)
    if not found:
        raise LoadError(f"{path} defines no Workflow at module level")
    children = [child for workflow in found for child in workflow_tree(workflow)[1:]]
    tops = [workflow for workflow in found if not any(workflow is child for child in children)]
    if not tops:
        raise LoadError(f"{path}: every workflow runs in a parallel state of another one")
    if len(tops) > 1:
        listed = ", ".join(repr(workflow.name) for workflow in tops)
        raise LoadError(
            f"{path} defines {len(tops)} workflows that no parallel state runs ({listed}); "
            "keep one top workflow per file"
        )
    return tops[0]


def load_flow(path: Path) -> Workflow:
    """Import `flow.py` and return its top workflow."""
    return find_top(import_flow(path), path)
