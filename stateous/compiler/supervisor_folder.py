"""What `stateous init supervisor` puts in a supervisor's folder, file by file.

`plan` decides, from a graph file and what the folder already holds: contract.py
every time, a stub for each state that no file implements, and the settings,
project and `.gitignore` files only when they are absent. It reads the folder's
Python files with `ast` only, never importing user code, and it writes nothing:
the command writes the steps it returns.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from string import Template

from stateous._version import __version__
from stateous.compiler.contract import Contract, Scope, contract
from stateous.compiler.python_source import LINE_LIMIT, Names, identifier
from stateous.compiler.starter import uv_sources
from stateous.model.graph_file import GraphFile

_TEMPLATES = files("stateous.compiler.templates")
#: Modules that a stub must not hide, besides the standard library and what the folder imports.
_KEPT_MODULES = frozenset({"contract", "stateous", "msgspec"})
#: What a stub imports; its function takes another name.
_STUB_NAMES = frozenset({"on_state", "events", "states"})


@dataclass(frozen=True)
class Step:
    """One line of `init`: `wrote`, `kept` or `skipped`, with the file and what to write."""

    verb: str
    path: Path | None
    text: str | None = None
    note: str = ""


def _render(template: str, **values: str) -> str:
    text = Template(_TEMPLATES.joinpath(template).read_text(encoding="utf-8")).substitute(values)
    return text.rstrip("\n") + "\n"


def _dotted(node: ast.expr) -> str | None:
    """`states.design_review.triage` for that attribute chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def _is_on_state(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id == "on_state") or (
        isinstance(node, ast.Attribute) and node.attr == "on_state"
    )


@dataclass(frozen=True)
class Folder:
    """What the folder's Python files say: the states they implement, the modules they import."""

    implemented: frozenset[str]
    imported: frozenset[str]

    @classmethod
    def read(cls, folder: Path) -> Folder:
        """Read every `.py` file of the folder; a file that does not parse says nothing."""
        implemented: set[str] = set()
        imported: set[str] = set()
        for path in sorted(folder.glob("*.py")):
            try:
                tree = ast.parse(path.read_bytes(), str(path))
            except (OSError, SyntaxError, ValueError):
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    imported.update(alias.name.split(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    imported.add(node.module.split(".")[0])
                elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    implemented.update(_marked(node))
        return cls(frozenset(implemented), frozenset(imported))


def _marked(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The states that a function's `@on_state(states.X)` decorators name."""
    found = set()
    for decorator in function.decorator_list:
        if isinstance(decorator, ast.Call) and _is_on_state(decorator.func) and decorator.args:
            name = _dotted(decorator.args[0])
            if name is not None:
                found.add(name)
    return found


def _base(scope: Scope, state: str) -> str:
    """The name of a state's stub: `coding`, or `design_review_triage` for a child's state."""
    name = identifier(state)
    return name if scope.attribute is None else f"{scope.attribute}_{name}"


def _signature(function: str, context: str, emitted: list[str]) -> str:
    """The stub's `def` line, its return type wrapped when the line would be too long."""
    returns = " | ".join(emitted) or "None"
    line = f"def {function}(ctx: {context}) -> {returns}:"
    if len(line) <= LINE_LIMIT:
        return line
    inner = "\n    | ".join(emitted)
    return f"def {function}(ctx: {context}) -> (\n    {inner}\n):"


def stub(made: Contract, scope: Scope, state: str) -> str:
    """The text of the stub of one state."""
    spec = made.graph.workflow_spec(scope.workflow).states[state]
    base = _base(scope, state)
    function = f"{base}_routine" if base in _STUB_NAMES | {scope.context} else base
    emitted = [scope.event_path(event) for event in spec.emits or []]
    return _render(
        "stub.py.tmpl",
        state=state,
        workflow=scope.workflow,
        context=scope.context,
        path=scope.state_path(state),
        signature=_signature(function, scope.context, emitted),
    )


def _stubs(made: Contract, folder: Path, found: Folder) -> list[Step]:
    """A step for each task state: its routine kept, its stub written, or skipped."""
    hidden = set(sys.stdlib_module_names) | _KEPT_MODULES | found.imported
    names = Names()
    owners: dict[str, str] = {}
    steps = []
    for scope, state in made.task_states():
        claim = scope.claim_name(state, made.graph.workflow)
        base = _base(scope, state)
        wanted = f"{base}_routine" if base in hidden else base
        stem = names.claim(wanted)
        owners.setdefault(wanted, claim)
        if scope.state_path(state) in found.implemented:
            steps.append(Step("kept", None, note=f"the routine of {claim!r}"))
            continue
        path = folder / f"{stem}.py"
        if path.exists():
            steps.append(Step("skipped", path, note=f" (it exists, with no routine of {claim!r})"))
            continue
        note = "" if stem == wanted else f" ({wanted}.py is the stub of {owners[wanted]!r})"
        steps.append(Step("wrote", path, stub(made, scope, state), note))
    return steps


def plan(
    graph: GraphFile,
    folder: Path,
    url: str,
    stateous_path: Path | None,
    files: dict[str, str] | None = None,
) -> list[Step]:
    """Every step of `init supervisor` for this folder, in the order they are printed.

    `files` are the settings that name a file (`ca_file`, `token_file`), as paths relative
    to the folder or absolute: stateous.yaml keeps them, so `supervise` reaches the
    control plane the way that init did.
    """
    made = contract(graph)
    named = "".join(f"{key}: {_quoted(path)}\n" for key, path in (files or {}).items())
    once = {
        "stateous.yaml": _render("stateous.yaml.tmpl", url=_quoted(url), files=named),
        "pyproject.toml": _render(
            "supervisor-pyproject.toml.tmpl",
            name=folder.resolve().name,
            workflow=graph.workflow,
            version=__version__,
            sources=uv_sources(stateous_path),
        ),
        ".gitignore": _render("gitignore.tmpl"),
    }
    steps = [Step("wrote", folder / "contract.py", made.text)]
    steps += _stubs(made, folder, Folder.read(folder))
    for name, text in once.items():
        path = folder / name
        steps.append(Step("kept", path) if path.exists() else Step("wrote", path, text))
    return steps


def _quoted(text: str) -> str:
    """A YAML double-quoted string."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
