"""The docs cannot drift from the code: run their shell examples, check their coverage.

Every page of README.md and docs/ is read for fenced blocks. An HTML comment on
the line before a block (blank lines between are allowed) says what the test
does with it:

- `<!-- test: run -->` before a `bash` block: run it with `bash -e` in the page's
  folder. `run status=1` expects that exit status instead (and runs without
  `-e`); `run retry` runs it again, for up to 20 seconds, until its output
  matches the expected block (for a token that a supervisor moves meanwhile).
- `<!-- test: background -->` before a `bash` block: start it and leave it
  running (`stateous serve`, `stateous supervise`); `background until="TEXT"`
  waits until its output shows TEXT. Every background process of a page is
  stopped with SIGINT at the end of the page, or at `<!-- test: stop -->`.
- `<!-- test: output -->` before a `text` block: the lines that the run block
  before it prints (stdout and stderr together). In the expected lines,
  `HH:MM:SS`, `YYYY-MM-DD` and `<checksum>` (64 hex digits) stand for any such
  value, `<any>` for any text, and a line `...` for any number of lines.
- `<!-- test: file PATH -->` before any block: write the block to PATH in the
  page's folder, so that a page can show a routine and then run it.

Each page runs in a fresh temporary folder that holds a copy of `examples/`,
with `stateous` on PATH (a script like the one pip installs, which runs this
checkout). Each page gets a free port: `8080` in a runnable block is replaced
with it, `stateous serve` without `--listen` listens on it, STATEOUS_URL names
it, and the printed port reads as 8080 again before it is compared. Blocks
without a marker (a Postgres URL on another host, `pip install`, `uv sync`,
the pyz build, which downloads wheels) are not run.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from stateous.cli.parser import build_parser

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = sorted([ROOT / "README.md", *DOCS.rglob("*.md")])
MARK = re.compile(r"<!--\s*test:\s*(.*?)\s*-->")
FENCE = re.compile(r"^(```+|~~~+)\s*([\w+-]*)")
RETRY_SECONDS = 20.0
WAIT_SECONDS = 20.0


@dataclass
class Block:
    language: str
    text: str
    line: int
    mark: str | None = None

    @property
    def verb(self) -> str:
        return (self.mark or "").split(" ", 1)[0]

    @property
    def argument(self) -> str:
        """What follows the verb, e.g. the path of `file PATH`."""
        return (self.mark or "").partition(" ")[2].strip()

    def option(self, name: str) -> str | None:
        found = re.search(rf'{name}(?:="([^"]*)"|=(\S+))?(?:\s|$)', self.mark or "")
        if found is None:
            return None
        return found.group(1) or found.group(2) or ""


@dataclass
class Page:
    path: Path
    items: list[Block | str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return str(self.path.relative_to(ROOT))


def parse(path: Path) -> Page:
    """Read the fenced blocks of a page, each with the marker just before it."""
    page = Page(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    pending: str | None = None
    index = 0
    while index < len(lines):
        line = lines[index]
        fence = FENCE.match(line.strip())
        mark = MARK.fullmatch(line.strip())
        if fence:
            close, body, start = fence.group(1), [], index + 1
            index += 1
            while index < len(lines) and not lines[index].strip().startswith(close):
                body.append(lines[index])
                index += 1
            page.items.append(Block(fence.group(2), "\n".join(body) + "\n", start, pending))
            pending = None
        elif mark:
            if mark.group(1) == "stop":
                page.items.append("stop")
            else:
                pending = mark.group(1)
        elif line.strip():
            pending = None
        index += 1
    if path.name == "README.md" and path.parent == ROOT:
        readme_blocks(page)
    return page


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def expected_pattern(lines: list[str]) -> re.Pattern[str]:
    """Turn the lines of an output block into one regular expression."""
    parts = []
    for line in lines:
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
            continue
        pattern = re.escape(line.rstrip())
        for shown, meaning in (
            ("HH:MM:SS", r"\d\d:\d\d:\d\d"),
            ("YYYY-MM-DD", r"\d{4}-\d\d-\d\d"),
            ("<checksum>", "[0-9a-f]{64}"),
            ("<any>", ".*"),
        ):
            pattern = pattern.replace(re.escape(shown), meaning)
        parts.append(pattern + r"[ \t]*\n")
    return re.compile("".join(parts))


class Runner:
    """Runs the marked blocks of one page in one folder."""

    def __init__(self, page: Page, folder: Path, bin_folder: Path) -> None:
        self.page = page
        self.folder = folder
        self.port = free_port()
        self.background: list[tuple[subprocess.Popen[bytes], Path]] = []
        #: What each run block printed, in order, as the docs show it.
        self.printed: list[str] = []
        self.env = {
            **os.environ,
            "PATH": f"{bin_folder}{os.pathsep}{os.environ.get('PATH', '')}",
            "STATEOUS_URL": f"http://127.0.0.1:{self.port}",
            "PYTHONPATH": str(ROOT),
            "PYTHONUNBUFFERED": "1",
            "TZ": os.environ.get("TZ", "UTC"),
        }

    def where(self, block: Block) -> str:
        return f"{self.page.name}, line {block.line}"

    def script(self, block: Block) -> str:
        """The block's commands, pointed at this page's port."""
        lines = []
        for line in block.text.replace("8080", str(self.port)).splitlines():
            if re.search(r"\bstateous serve\b", line) and "--listen" not in line:
                command, comment = re.match(r"([^#]*?)\s*(#.*)?$", line).groups()
                line = f"{command} --listen 127.0.0.1:{self.port}  {comment or ''}".rstrip()
            lines.append(line)
        return "\n".join(lines) + "\n"

    def shown(self, output: str) -> str:
        """Printed output as the docs show it: the port reads as 8080 again."""
        return output.replace(f"127.0.0.1:{self.port}", "127.0.0.1:8080").replace(
            str(self.folder), "<folder>"
        )

    def run(self, block: Block, expected: Block | None) -> None:
        status = int(block.option("status") or 0)
        flags = ["-e"] if status == 0 else []
        deadline = time.monotonic() + (RETRY_SECONDS if block.option("retry") is not None else 0)
        while True:
            done = subprocess.run(
                ["bash", *flags, "-c", self.script(block)],
                cwd=self.folder,
                env=self.env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                timeout=60,
                check=False,
            )
            output = self.shown(done.stdout.decode("utf-8", "replace"))
            problem = None
            if done.returncode != status:
                problem = f"exit status {done.returncode}, not {status}"
            elif expected is not None:
                pattern = expected_pattern(expected.text.splitlines())
                if not pattern.fullmatch(output):
                    problem = "the printed lines differ from the doc's"
            if problem is None:
                self.printed.append(output)
                return
            if time.monotonic() >= deadline:
                wanted = "" if expected is None else f"\n--- the doc shows:\n{expected.text}"
                pytest.fail(
                    f"{self.where(block)}: {problem}\n--- the block:\n{block.text}"
                    f"--- it printed:\n{output}{wanted}"
                )
            time.sleep(0.3)

    def start(self, block: Block) -> None:
        log = self.folder / f".background-{len(self.background)}.log"
        with log.open("wb") as sink:
            process = subprocess.Popen(
                ["bash", "-c", "exec " + self.script(block).strip()],
                cwd=self.folder,
                env=self.env,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.background.append((process, log))
        until = block.option("until")
        deadline = time.monotonic() + WAIT_SECONDS
        while until:
            text = self.shown(log.read_text(encoding="utf-8", errors="replace"))
            if until in text:
                return
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(
                    f"{self.where(block)}: the background command never printed {until!r}:\n{text}"
                )
            time.sleep(0.1)

    def stop(self) -> None:
        """Stop the background processes, the last started first, as Ctrl-C would."""
        while self.background:
            process, _log = self.background.pop()
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGINT)
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()

    def write(self, block: Block) -> None:
        target = self.folder / block.argument
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(block.text, encoding="utf-8")

    def run_page(self) -> None:
        items = self.page.items
        try:
            for index, item in enumerate(items):
                if item == "stop":
                    self.stop()
                    continue
                assert isinstance(item, Block)
                if item.verb == "file":
                    self.write(item)
                elif item.verb == "background":
                    self.start(item)
                elif item.verb == "run":
                    following = items[index + 1] if index + 1 < len(items) else None
                    expected = (
                        following
                        if isinstance(following, Block) and following.verb == "output"
                        else None
                    )
                    self.run(item, expected)
        finally:
            self.stop()


AUTO_BACKGROUND = {"stateous serve": "serving on", "stateous supervise": " serves "}
HEREDOC = re.compile(r"^cat > \S+ <<'(\w+)'$")


def commands_of(text: str) -> list[str]:
    """Split a shell block into its commands: one per line, a here-document with its lines."""
    commands: list[str] = []
    lines = iter(text.splitlines())
    for line in lines:
        command = line.split("#", 1)[0].strip()
        heredoc = HEREDOC.match(command)
        if heredoc:
            body = [line]
            for inner in lines:
                body.append(inner)
                if inner == heredoc.group(1):
                    break
            commands.append("\n".join(body))
        elif command:
            commands.append(line.rstrip())
    return commands


def readme_blocks(page: Page) -> None:
    """Mark README.md's unmarked shell blocks that hold only `stateous` commands and files.

    README.md carries no markers: a block whose commands are all `stateous ...` or
    `cat > FILE <<'EOF'` here-documents runs command by command, `stateous serve`
    and `stateous supervise` in the background, as in terminals of their own. A
    `text` block right after such a block is what its last command prints; that
    command runs again until it does (a supervisor moves the token meanwhile).
    Blocks that need the network or another host (a pyz build, pip) stay unmarked.
    """
    items: list[Block | str] = []
    last_run: Block | None = None
    for item in page.items:
        follows, last_run = last_run, None
        if not isinstance(item, Block) or item.mark is not None:
            items.append(item)
            continue
        if item.language == "text" and follows is not None:
            follows.mark = "run retry"
            item.mark = "output"
        commands = commands_of(item.text) if item.language in ("bash", "sh") else []
        if not commands or not all(map(readme_command, commands)):
            items.append(item)
            continue
        for command in commands:
            until = next((v for k, v in AUTO_BACKGROUND.items() if command.startswith(k)), None)
            block = Block(item.language, command + "\n", item.line, "run")
            if until:
                block.mark = f'background until="{until}"'
            items.append(block)
        last_run = block if block.verb == "run" else None
    page.items = items


def readme_command(command: str) -> bool:
    """Whether README.md's runner runs this command: `stateous ...`, or a file it writes."""
    return command.startswith("stateous ") or HEREDOC.match(command.split("\n", 1)[0]) is not None


def runnable(page: Page) -> bool:
    return any(
        isinstance(item, Block) and item.verb in ("run", "background", "file")
        for item in page.items
    )


@pytest.fixture(scope="module")
def bin_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with a `stateous` command that runs this checkout, as an installed one would."""
    folder = tmp_path_factory.mktemp("bin")
    shim = folder / "stateous"
    shim.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from stateous.cli.main import main\n"
        "sys.exit(main())\n",
        encoding="utf-8",
    )
    shim.chmod(0o755)
    return folder


@pytest.mark.parametrize("path", PAGES, ids=lambda path: str(path.relative_to(ROOT)))
def test_markers_are_well_formed(path: Path) -> None:
    """Every marker names a known action, on a block of the right language."""
    page = parse(path)
    items = page.items
    for index, item in enumerate(items):
        if not isinstance(item, Block) or item.mark is None:
            continue
        where = f"{page.name}, line {item.line}"
        assert item.verb in ("run", "background", "output", "file"), f"{where}: {item.mark}"
        if item.verb in ("run", "background"):
            assert item.language in ("bash", "sh"), f"{where}: only shell blocks run"
        if item.verb == "output":
            before = items[index - 1] if index else None
            assert isinstance(before, Block) and before.verb == "run", (
                f"{where}: an output block must follow a runnable block"
            )
        if item.verb == "file":
            assert item.argument, f"{where}: a file marker names a path"


README = ROOT / "README.md"
#: The pages that run as they stand; README.md runs in its own test below.
RUNNABLE = [path for path in PAGES if path != README and runnable(parse(path))]


@pytest.mark.parametrize("path", RUNNABLE, ids=lambda path: str(path.relative_to(ROOT)))
def test_shell_examples_run(path: Path, tmp_path: Path, bin_folder: Path) -> None:
    """Run the page's marked blocks in order and compare what they print."""
    shutil.copytree(
        ROOT / "examples",
        tmp_path / "examples",
        ignore=shutil.ignore_patterns("__pycache__", ".stateous", "*.db"),
    )
    Runner(parse(path), tmp_path, bin_folder).run_page()


def test_the_readme_quick_start_ends_with_a_completed_token_that_token_show_shows(
    tmp_path: Path, bin_folder: Path
) -> None:
    """Run README.md's quick start word for word in an empty folder, with real processes."""
    page = parse(README)
    ran = [item for item in page.items if isinstance(item, Block) and item.verb == "run"]
    last = ran[-1].text.split()
    assert last[:3] == ["stateous", "token", "show"], "the quick start ends with token show"
    runner = Runner(page, tmp_path, bin_folder)
    runner.run_page()
    shown = runner.printed[-1].splitlines()
    assert shown[0] == f"{last[3]}: review, completed"
    assert shown[-1].endswith("  completed")


def test_the_readme_quick_start_puts_the_installed_command_on_the_path(tmp_path: Path) -> None:
    """The quick start's set-up block, run in the checkout after the README's second
    command, finds `stateous` in the checkout's .venv and leaves for an empty folder."""
    installed = ROOT / ".venv" / "bin" / "stateous"
    if not installed.exists():
        pytest.skip("the README's second command has not made .venv in this checkout")
    page = parse(README)
    setup = next(
        item
        for item in page.items
        if isinstance(item, Block) and item.text.startswith("export PATH=")
    )
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / ".venv").symlink_to(ROOT / ".venv")
    script = f"{setup.text}\ncommand -v stateous\npwd\nls -A\n"
    environment = {key: value for key, value in os.environ.items() if key != "VIRTUAL_ENV"}
    environment["PATH"] = "/usr/bin:/bin"
    done = subprocess.run(
        ["bash", "-c", script], cwd=checkout, env=environment, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    found, folder, *listed = done.stdout.splitlines()
    assert Path(found).resolve() == installed.resolve()
    assert Path(folder) == tmp_path / "stateous-quick-start" and listed == []


def test_some_pages_run() -> None:
    """The docs keep runnable examples: at least the tutorial pages."""
    names = {str(path.relative_to(DOCS)) for path in RUNNABLE if path.is_relative_to(DOCS)}
    assert {"index.md", "how-to/steer-tokens.md", "how-to/write-a-workflow.md"} <= names


# coverage of the reference


def read(name: str) -> str:
    return (DOCS / "reference" / name).read_text(encoding="utf-8")


#: A row of the refusal table of docs/reference/http.md: its code.
CODE_ROW = re.compile(r"^\| `([a-z_]+)` \| \d{3}\b", re.M)


def test_the_http_reference_names_the_models_refusal_codes_and_no_other() -> None:
    """The refusal table lists exactly the codes of `model.codes`, and every refusal that
    the engine raises answers one of them."""
    from stateous.control import errors
    from stateous.model.codes import RefusalCode

    raised = {
        value.code
        for value in vars(errors).values()
        if isinstance(value, type) and issubclass(value, errors.EngineError)
    }
    assert all(isinstance(code, RefusalCode) for code in raised), raised
    assert sorted(CODE_ROW.findall(read("http.md"))) == sorted(RefusalCode)


#: A size as docs/reference/limits.md writes one: a number, then maybe its unit.
SIZE = re.compile(r"(\d[\d,]*)(d\b| KiB| MiB)?")
UNIT = {"d": 86400, " KiB": 1024, " MiB": 1024 * 1024}


def sizes_of(cell: str) -> list[int]:
    """The numbers of a cell of the Sizes table, in order, units multiplied out."""
    return [int(n.replace(",", "")) * UNIT.get(unit, 1) for n, unit in SIZE.findall(cell)]


def table_rows(text: str, heading: str) -> dict[str, str]:
    """The rows of the first table under `heading`: the first cell, then the second."""
    section = text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line.strip("|").split("|") for line in section.splitlines() if line.startswith("| ")]
    return {what.strip(): most.strip() for what, most in rows[1:]}


def test_the_sizes_of_the_limits_page_are_the_models() -> None:
    """Every size on docs/reference/limits.md is the value of `model.limits` (or, for an
    option of `serve`, its default): a limit is changed in one place and the page follows."""
    from stateous.control import defaults
    from stateous.model import limits
    from stateous.model.durations import LONGEST, in_words

    expected = {
        "Request body": [limits.BODY_LIMIT],
        "Request line and headers": [limits.REQUEST_HEAD_LIMIT],
        "Answers left unread before the next pipelined request waits": [limits.UNREAD_LIMIT],
        "Answers one connection holds unsent while its client reads nothing": [
            limits.CONNECTION_UNSENT_LIMIT
        ],
        "Answers all connections hold unsent while their clients read nothing": [
            limits.TOTAL_UNSENT_LIMIT
        ],
        "Open connections": [defaults.DEFAULT_CONNECTION_LIMIT],
        "Request threads": [defaults.DEFAULT_THREADS],
        "JSON nesting of a body": [limits.BODY_DEPTH_LIMIT],
        "Token id": [limits.TOKEN_ID_LIMIT],
        "Names of workflows, states, events": [limits.NAME_LIMIT],
        "Idempotency key": [limits.IDEMPOTENCY_KEY_LIMIT],
        "Supervisor name": [limits.SUPERVISOR_NAME_LIMIT, limits.SETTINGS_NAME_LIMIT],
        "Claim request id": [limits.REQUEST_ID_LIMIT],
        "Note": [limits.NOTE_LIMIT],
        "Memory key": [limits.MEMORY_KEY_LIMIT],
        "Token priority": [limits.PRIORITY_LIMIT, limits.PRIORITY_LIMIT],
        "Labels of a supervisor, needs of a state": [limits.LABELS_LIMIT, limits.LABEL_LIMIT],
        "States per claim, tasks per heartbeat": [limits.BATCH_LIMIT],
        "Tokens per listing": [limits.LIST_LIMIT, limits.LIST_DEFAULT],
        "Children shown by `token show`": [limits.LIST_LIMIT],
        "Routines per supervisor at once (`tasks`)": [limits.TASKS_LIMIT],
        "Timers set by one report (`schedules`)": [limits.TIMERS_PER_REPORT],
        "Pending timers of one token, its timeout among them": [limits.PENDING_TIMERS],
        "Duration": [LONGEST],
        "An answer that a supervisor reads": [limits.ANSWER_LIMIT, limits.ANSWER_DEPTH_LIMIT],
    }
    text = read("limits.md")
    shown = {what: sizes_of(most) for what, most in table_rows(text, "Sizes").items()}
    assert shown == expected
    assert table_rows(text, "Times")["Lease"].startswith(f"{in_words(limits.LEASE)}, ")
    assert f"heartbeat; default `{defaults.DEFAULT_LEASE}`" in read("cli.md")


def test_every_route_is_in_the_http_reference() -> None:
    from stateous.control.http.app import create_app

    app = create_app(engine=None)  # type: ignore[arg-type]
    text = read("http.md")
    missing = []
    routes = _routes(app)
    for route in routes:
        method, template = route
        if method == "HEAD":
            # one rule of the page covers them: every GET route answers HEAD too
            assert ("GET", template) in routes and "also answers `HEAD`" in text
            continue
        shown = re.sub(r"\{task\}|\{token\}|\{plan\}", "{id}", template)
        if f"`{method} {shown}`" not in text:
            missing.append(f"{method} {shown}")
    assert not missing, f"docs/reference/http.md does not name: {missing}"


#: A row of the role table of docs/reference/http.md: the route, then one cell per caller.
ROLE_ROW = re.compile(r"^\| `(GET|POST|PUT) (\S+)` \|(.*)\|$")


def _may(rule, role: str) -> str:
    """What the role table says of `role` on a route of `rule` (None: open to all)."""
    from stateous.control.http.access import Role

    if rule is not None and rule.webhook == "hook":
        # Only the webhook the path names, by its signature, also with authentication off.
        return {"webhook": "its own, by its signature", "off": "signed only"}.get(role, "no")
    if rule is None or role == "off":
        return "yes"
    if role == "none":
        return "no"
    if Role(role) in rule.roles:
        return "yes"
    if role == "webhook" and rule.webhook == "event":
        return "its events"
    if role == "webhook" and rule.webhook == "start":
        return "with `--may-start`"
    return "no"


def test_the_role_table_says_what_the_route_table_allows_each_caller() -> None:
    from stateous.control.http.routing import RULES

    callers = ("operator", "supervisor", "webhook", "none", "off")
    table = {}
    for line in read("http.md").splitlines():
        found = ROLE_ROW.match(line)
        if found:
            cells = tuple(cell.strip() for cell in found[3].split("|"))
            table[(found[1], found[2].replace("{id}", "{token}"))] = cells
    expected = {
        (method, re.sub(r"\{task\}|\{plan\}", "{token}", template)): tuple(
            _may(rule, c) for c in callers
        )
        for (method, template), rule in RULES.items()
    }
    assert table == expected


def _routes(app) -> list[tuple[str, str]]:
    found = []
    for node in _nodes(app._router._roots):
        if node.resource is None:
            continue
        for method, responder in node.method_map.items():
            if getattr(responder, "__name__", "") != "method_not_allowed" and (
                "on_" in getattr(responder, "__name__", "")
            ):
                found.append((method, node.uri_template))
    return found


def _nodes(nodes):
    for node in nodes:
        yield node
        yield from _nodes(node.children)


def _commands(
    parser: argparse.ArgumentParser, prefix: str = "stateous"
) -> list[tuple[str, list[str]]]:
    """Every command of the parser, with its options and its positional names."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                words: list[str] = []
                for option in sub._actions:
                    if isinstance(option, argparse._HelpAction | argparse._SubParsersAction):
                        continue
                    if option.option_strings:
                        words.append(max(option.option_strings, key=len))
                    elif option.metavar:
                        words.append(str(option.metavar))
                found.append((f"{prefix} {name}", words))
                found += _commands(sub, f"{prefix} {name}")
    return found


def test_every_command_and_option_is_in_the_cli_reference() -> None:
    text = read("cli.md")
    missing = []
    for command, words in _commands(build_parser()):
        if command not in text:
            missing.append(command)
        section = text.split(f"### {command}\n", 1)
        body = section[1].split("\n### ", 1)[0] if len(section) == 2 else text
        missing += [f"{command} {word}" for word in words if word not in body]
    assert "--version" in text
    assert not missing, f"docs/reference/cli.md does not name: {missing}"


def test_every_ledger_kind_is_in_the_reference() -> None:
    """Each kind that the engine writes to the ledger is described in the data reference."""
    from stateous.model.vocabulary import Kind

    text = read("data.md")
    missing = sorted(kind for kind in Kind if f"`{kind}`" not in text)
    assert len(Kind) >= 20
    assert not missing, f"docs/reference/data.md does not name the ledger kinds: {missing}"


def test_every_table_and_column_is_in_the_reference() -> None:
    from stateous.control.store.migrations import SCHEMA, statements

    text = read("data.md")
    missing = []
    for statement in statements("sqlite", SCHEMA):
        table = re.match(r"\s*CREATE TABLE (\w+) \((.*)\)", statement, re.S)
        if table is None:
            continue
        name, body = table.groups()
        if f"`{name}`" not in text:
            missing.append(name)
        for column in re.findall(r"^\s*(\w+) [A-Z]", body, re.M):
            if column not in ("PRIMARY", "CHECK") and f"`{column}`" not in text:
                missing.append(f"{name}.{column}")
    assert "`stateous_version`" in text
    assert not missing, f"docs/reference/data.md does not name: {missing}"


def test_links_between_pages_resolve() -> None:
    """Every relative link of docs/ points at a page that exists."""
    broken = []
    for path in DOCS.rglob("*.md"):
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text(encoding="utf-8")):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (path.parent / target).resolve().exists():
                broken.append(f"{path.relative_to(ROOT)} -> {target}")
    assert not broken, broken
