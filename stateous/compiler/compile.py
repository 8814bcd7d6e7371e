"""Compile a workflow: check every rule, then build and write the graph file."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from stateous.compiler.build import build_graph
from stateous.compiler.guard_rules import Group
from stateous.compiler.load import load_flow, workflow_tree
from stateous.compiler.resource_rules import check_reserves, check_resources
from stateous.compiler.rules import (
    check_builtin_events,
    check_ends,
    check_names,
    check_nesting,
    check_parallel,
    check_paths,
    groups,
)
from stateous.compiler.schedule_rules import check_schedules
from stateous.compiler.schemas import Models
from stateous.model.errors import Failure
from stateous.model.graph_file import GraphFile, dump
from stateous.model.workflow import Workflow


class CompileError(Failure):
    """A workflow broke one or more rules; `problems` lists each in one sentence."""

    def __init__(self, workflow: str, problems: list[str]) -> None:
        self.workflow = workflow
        self.problems = problems
        lines = "".join(f"\n  - {problem}" for problem in problems)
        super().__init__(f"workflow {workflow!r} is not valid:{lines}")


class WriteError(Failure):
    """The graph file could not be written."""


def problems_of(top: Workflow, tree: list[Workflow], models: Models) -> list[str]:
    """Collect every problem of a workflow tree, in a stable order."""
    problems = list(models.problems)
    problems.extend(check_names(tree))
    problems.extend(check_nesting(top))
    problems.extend(check_schedules(top, tree))
    problems.extend(check_resources(tree))
    problems.extend(check_reserves(tree))
    for workflow in tree:
        problems.extend(check_ends(workflow, top))
        problems.extend(check_paths(workflow, top))
        problems.extend(check_builtin_events(workflow, top))
        problems.extend(check_parallel(workflow, top, models))
        for (source, event), transitions in groups(workflow).items():
            problems.extend(Group(workflow, top, source, event, transitions, models).check())
    return list(dict.fromkeys(problems))


def compile_workflow(top: Workflow) -> GraphFile:
    """Check a workflow and its children, and return the graph file; raise CompileError."""
    tree = workflow_tree(top)
    models = Models.of(tree)
    problems = problems_of(top, tree, models)
    if problems:
        raise CompileError(top.name, problems)
    return build_graph(tree, models)


def compile_flow(path: Path) -> GraphFile:
    """Load `flow.py` and compile its top workflow; raise LoadError or CompileError."""
    return compile_workflow(load_flow(path))


def default_out(flow: Path, graph: GraphFile) -> Path:
    """The graph file's place when no --out is given: build/<workflow>.json beside flow.py."""
    return flow.parent / "build" / f"{graph.workflow}.json"


def write_graph(graph: GraphFile, out: Path) -> None:
    """Write the graph file whole or not at all: a temporary file, then a rename."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(dump(graph))
            os.chmod(temporary, 0o644)
            os.replace(temporary, out)
        except BaseException:
            os.unlink(temporary)
            raise
    except OSError as ex:
        raise WriteError(f"cannot write {out}: {ex.strerror or ex}") from None
