"""The import rules between the parts of the package, as SPEC.md sets them."""

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "stateous"

#: What each part may import from the package, besides itself and `stateous._version`.
ALLOWED = {
    "model": set(),
    "compiler": {"model"},
    "control": {"model"},
    "supervisor": {"model", "client"},
    "client": {"model"},
    "cli": {"model", "compiler", "control", "supervisor", "client", "root"},
    "root": {"model", "supervisor", "client"},
}
#: Libraries outside the standard library that a part may import.
THIRD_PARTY = {
    "model": {"msgspec"},
    "compiler": {"msgspec"},
    "client": {"msgspec"},
}
KNOWN_THIRD_PARTY = {"msgspec", "apsw", "falcon", "waitress", "platformdirs", "yaml", "psycopg"}


def part_of(module: str) -> str:
    parts = module.split(".")
    if parts[0] != "stateous":
        raise ValueError(module)
    if len(parts) == 1:
        return "root"
    if parts[1] == "__main__":
        return "cli"
    return parts[1]


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def module_name(path: Path) -> str:
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    """Every module that a file imports, anywhere in it, as absolute names."""
    found = set()
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package.pop()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                found.add(".".join([*base, node.module] if node.module else base))
            else:
                found.add(node.module or "")
    return found


def violations(name: str, imported: set[str]) -> list[str]:
    """List the imports of module `name` that its part may not make."""
    part = part_of(name)
    found = []
    for module in sorted(imported):
        top = module.split(".")[0]
        if top == "stateous" and module != "stateous._version":
            other = part_of(module)
            if other != part and other not in ALLOWED[part]:
                found.append(module)
        elif top in KNOWN_THIRD_PARTY and part in THIRD_PARTY and top not in THIRD_PARTY[part]:
            found.append(module)
    return found


@pytest.mark.parametrize("path", modules(), ids=lambda path: module_name(path))
def test_each_module_imports_only_what_its_part_may(path: Path) -> None:
    name = module_name(path)
    assert violations(name, imports_of(path)) == [], f"{name} breaks the import rules"


@pytest.mark.parametrize("path", modules(), ids=lambda path: module_name(path))
def test_each_module_says_what_it_is_for(path: Path) -> None:
    tree = ast.parse(path.read_text())
    assert ast.get_docstring(tree), f"{module_name(path)} has no docstring"


def test_the_rules_catch_forbidden_imports() -> None:
    assert violations("stateous.model.workflow", {"stateous.control.engine"}) == [
        "stateous.control.engine"
    ]
    assert violations("stateous.control.http.app", {"stateous.supervisor.outbox"}) != []
    assert violations("stateous.supervisor.loops", {"stateous.control"}) != []
    assert violations("stateous.supervisor.remote", {"stateous.client.http"}) == []
    assert violations("stateous.compiler.load", {"stateous.control.store"}) != []
    assert violations("stateous.client.client", {"apsw"}) == ["apsw"]
    assert violations("stateous.cli.main", {"stateous.control", "stateous.compiler"}) == []


#: Inside `control`: which of its modules may import the drivers and the web stack.
DRIVERS = {"apsw", "psycopg"}
WEB = {"falcon", "waitress"}
STORE = "stateous.control.store"
HTTP = "stateous.control.http"
#: The modules of the HTTP wing that speak through the web stack: the app (with its reading
#: of bodies and answering of refusals), its resources, and the server; `serve` runs them.
WEB_MODULES = {
    f"{HTTP}.app",
    f"{HTTP}.bodies",
    f"{HTTP}.refusals",
    f"{HTTP}.resources",
    f"{HTTP}.server",
    "stateous.control.serve",
}
#: The largest module a newcomer should have to read whole, in lines.
MODULE_LINES = 600


def control_violations(name: str, imported: set[str]) -> list[str]:
    """List the imports of a module of `control` that break the rules of its rooms: only
    the store speaks to the drivers, only the API (with its body reader), the edge and
    `serve` to the web stack, and the engine's side reaches the store through its package,
    never a backend."""
    tops = {module.split(".")[0]: module for module in imported}
    found = []
    in_store = name == STORE or name.startswith(STORE + ".")
    if not in_store:
        found += [tops[top] for top in DRIVERS & set(tops)]
        found += [
            module
            for module in imported
            if module.startswith(STORE + ".")
            and module.split(".")[3] in ("sqlite", "postgres", "sql")
        ]
    if name not in WEB_MODULES:
        found += [tops[top] for top in WEB & set(tops)]
    return sorted(found)


CONTROL = [path for path in modules() if module_name(path).startswith("stateous.control")]


@pytest.mark.parametrize("path", CONTROL, ids=lambda path: module_name(path))
def test_each_room_of_the_control_plane_imports_only_what_it_may(path: Path) -> None:
    name = module_name(path)
    assert control_violations(name, imports_of(path)) == [], f"{name} breaks the rules"


def test_the_rules_of_the_control_plane_catch_forbidden_imports() -> None:
    assert control_violations("stateous.control.engine", {"apsw"}) == ["apsw"]
    assert control_violations("stateous.control.engine", {"falcon"}) == ["falcon"]
    assert control_violations("stateous.control.moves", {"psycopg.errors"}) == ["psycopg.errors"]
    assert control_violations("stateous.control.engine", {f"{STORE}.sqlite"}) != []
    assert control_violations("stateous.control.serve", {"waitress", STORE}) == []
    assert control_violations(f"{STORE}.sqlite", {"apsw"}) == []
    assert control_violations(f"{STORE}.postgres.store", {"psycopg", "falcon"}) == ["falcon"]


@pytest.mark.parametrize("path", modules(), ids=lambda path: module_name(path))
def test_no_module_is_longer_than_a_newcomer_reads_whole(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= MODULE_LINES, f"{module_name(path)} has {lines} lines"


#: The one module that spells the refusal codes; every other module names them from it.
CODES = PACKAGE / "model" / "codes.py"


def code_literals(path: Path, codes: set[str]) -> list[str]:
    """The string literals of a file that spell a refusal code, with their line numbers."""
    tree = ast.parse(path.read_text(), str(path))
    where = module_name(path) if path.is_relative_to(PACKAGE) else path.name
    return [
        f"{where}:{node.lineno} {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in codes
    ]


def test_no_module_but_the_models_spells_a_refusal_code() -> None:
    """The control plane, the supervisor, the client and the command line name each code
    as `RefusalCode.X`, so a code is written once and a reader finds every use of it."""
    from stateous.model.codes import RefusalCode

    codes = {code.value for code in RefusalCode}
    found = [line for path in modules() if path != CODES for line in code_literals(path, codes)]
    assert found == [], f"refusal codes spelled outside {CODES.name}: {found}"


def test_the_rule_on_codes_catches_a_spelled_code(tmp_path: Path) -> None:
    spelled = tmp_path / "spelled.py"
    spelled.write_text('"""A sample."""\nGONE = ("attempt_over", "the attempt_over code")\n')
    assert code_literals(spelled, {"attempt_over"}) == ["spelled.py:2 'attempt_over'"]


#: The names that say "hold" or "held", each for the one thing the word means: a
#: supervisor holds the task it claimed (the API's `task_not_held`). The control plane
#: keeps its database by its tenure, a transaction reserves ledger positions, the edge
#: keeps answers unsent or awaiting a commit, and a paused token defers events.
HOLDING = {
    "stateous.supervisor.held",
    "stateous.control.errors.TaskNotHeld",
    "stateous.control.holding",
    "stateous.control.holding.held_task",
    "stateous.supervisor.heartbeat.Heart.holds",
    "stateous.supervisor.heartbeat.Heart.held",
}


def says_hold(name: str) -> bool:
    """Whether a snake_case or CamelCase name has "hold" or "held" among its words."""
    words = re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])", name)
    return any(word.lower() in ("hold", "holds", "held", "holder", "holding") for word in words)


def holding_names(path: Path) -> set[str]:
    """The module, class and function names of a file that say "hold" or "held"."""
    name = module_name(path)
    found = {name} if says_hold(name.rsplit(".", 1)[-1]) else set()

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                qualified = f"{prefix}.{child.name}"
                if says_hold(child.name):
                    found.add(qualified)
                visit(child, qualified)

    visit(ast.parse(path.read_text(), str(path)), name)
    return found


def test_hold_means_that_a_supervisor_holds_a_task() -> None:
    named = set().union(*(holding_names(path) for path in modules()))
    assert named == HOLDING


def test_the_rule_on_hold_reads_words_not_letters() -> None:
    assert says_hold("TaskNotHeld") and says_hold("_held_task") and says_hold("HoldLost")
    assert not says_hold("_placeholders") and not says_hold("threshold")


#: Who may import the HTTP wing from outside it: `serve`, which runs the server over the
#: engine (the command line reaches the server's limits through it).
HTTP_DOOR = "stateous.control.serve"
#: The engine's wing as the HTTP wing reaches it: the engine and its public operations
#: (plans, migrations, schedules, resources' steering, spending and budgets, credentials),
#: the errors it refuses with, the views and figures it answers, the waiters of claims,
#: the defaults and histograms; and the store's package face (`Store`, `Tx`, rows,
#: `joined`: a stream reads the ledger, the loop opens turns), never a module inside the
#: store, nor `moves`, `checks`, `claiming`, `graph`.
ENGINE_DOORS = {
    f"stateous.control.{name}"
    for name in (
        "engine",
        "errors",
        "plans",
        "migration",
        "schedules",
        "resource_steering",
        "spending",
        "credentials",
        "webhooks",
        "views",
        "listings",
        "stats",
        "histogram",
        "waiting_claims",
        "defaults",
        "store",
    )
}


def in_http(module: str) -> bool:
    return module == HTTP or module.startswith(HTTP + ".")


def control_imports(path: Path) -> set[str]:
    """The modules of `control` that a file imports, naming each module taken from a
    package (`from stateous.control import plans` imports `stateous.control.plans`)."""
    found = {module for module in imports_of(path) if module.startswith("stateous.control")}
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module in ("stateous.control", HTTP):
            found.discard(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def wing_violations(name: str, imported: set[str]) -> list[str]:
    """List the imports that cross between the control plane's two wings other than by
    their doors: only `serve` imports the HTTP wing from outside, and the HTTP wing
    imports of the engine's only `ENGINE_DOORS`."""
    found = []
    for module in imported:
        if in_http(module):
            if not in_http(name) and name != HTTP_DOOR:
                found.append(module)
        elif in_http(name) and module.startswith("stateous.control") and module not in ENGINE_DOORS:
            found.append(module)
    return sorted(found)


@pytest.mark.parametrize("path", modules(), ids=lambda path: module_name(path))
def test_the_two_wings_of_the_control_plane_meet_only_at_their_doors(path: Path) -> None:
    name = module_name(path)
    assert wing_violations(name, control_imports(path)) == [], f"{name} crosses a wing"


def test_the_rules_of_the_wings_catch_a_crossing() -> None:
    assert wing_violations("stateous.control.engine", {f"{HTTP}.streams"}) == [f"{HTTP}.streams"]
    assert wing_violations("stateous.cli.serving", {f"{HTTP}.server"}) == [f"{HTTP}.server"]
    assert wing_violations("stateous.control.serve", {f"{HTTP}.server"}) == []
    assert wing_violations(f"{HTTP}.app", {f"{HTTP}.access", "stateous.control.engine"}) == []
    assert wing_violations(f"{HTTP}.app", {"stateous.control.moves"}) == ["stateous.control.moves"]
    assert wing_violations(f"{HTTP}.streams", {f"{STORE}.contract"}) == [f"{STORE}.contract"]
    assert wing_violations(f"{HTTP}.streams", {STORE}) == []


def test_the_control_plane_has_two_wings() -> None:
    """A newcomer opening `control/` sees the engine's modules and one `http/` folder: no
    module of the engine's wing speaks through the web stack."""
    control = PACKAGE / "control"
    assert (control / "http" / "__init__.py").is_file()
    for path in control.glob("*.py"):
        name = module_name(path)
        web = {module.split(".")[0] for module in imports_of(path)} & WEB
        assert not web or name == HTTP_DOOR, f"{name} speaks HTTP outside the HTTP wing"
