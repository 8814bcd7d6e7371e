"""`stateous compile` and `stateous init workflow`: from `flow.py` to the graph file."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from stateous.cli.errors import CommandError
from stateous.model.names import name_problem


def _shown(path: Path) -> str:
    """Show a path relative to the current folder when it is inside it."""
    try:
        return os.path.relpath(path)
    except ValueError:
        return str(path)


def run_compile(args: argparse.Namespace) -> int:
    """Compile FLOW and write its graph file."""
    from stateous.compiler.compile import compile_flow, default_out, write_graph

    flow = Path(args.flow)
    graph = compile_flow(flow)
    out = Path(args.out) if args.out else default_out(flow, graph)
    write_graph(graph, out)
    print(f"wrote {_shown(out)}")
    return 0


def run_init_workflow(args: argparse.Namespace) -> int:
    """Write a starter workflow's folder, then compile it."""
    from stateous.compiler.compile import compile_flow, default_out, write_graph
    from stateous.compiler.starter import FILES, render

    name: str = args.name
    problem = name_problem(name)
    if problem is not None:
        raise CommandError(f"the workflow's name: {problem}")
    folder = Path(name)
    if (folder / "flow.py").exists():
        raise CommandError(
            f"{_shown(folder / 'flow.py')} exists; init does not write over a workflow"
        )
    stateous_path = Path(args.stateous_path) if args.stateous_path else None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for file_name in FILES:
            target = folder / file_name
            if target.exists():
                print(f"kept     {_shown(target)}")
                continue
            target.write_text(render(file_name, name, _shown(folder), stateous_path))
            print(f"wrote    {_shown(target)}")
    except OSError as ex:
        raise CommandError(f"cannot write in {_shown(folder)}: {ex.strerror or ex}") from None
    graph = compile_flow(folder / "flow.py")
    out = default_out(folder / "flow.py", graph)
    write_graph(graph, out)
    print(f"wrote    {_shown(out)}")
    print()
    print("Next steps:")
    print(f"  stateous serve {_shown(out)}")
    print(f"  stateous init supervisor {_shown(folder / 'flow.py')} {name}-supervisor")
    return 0


def add_commands(commands: argparse._SubParsersAction, init: argparse._SubParsersAction) -> None:
    """Add `compile` and `init workflow` to the parser."""
    compile_command = commands.add_parser(
        "compile",
        help="check a workflow and write its graph file",
        description="Load the workflow in FLOW, check every rule, and write its graph file.",
    )
    compile_command.add_argument("flow", metavar="FLOW", help="the workflow's file, e.g. flow.py")
    compile_command.add_argument(
        "--out",
        metavar="FILE",
        help="the graph file to write (default: build/<workflow>.json beside FLOW)",
    )
    compile_command.set_defaults(run=run_compile)

    workflow = init.add_parser(
        "workflow",
        help="write a starter workflow's folder, and compile it",
        description=(
            "Make the folder NAME/ with a starter flow.py, schemas.py and pyproject.toml, "
            "then compile it to NAME/build/NAME.json."
        ),
    )
    workflow.add_argument("name", metavar="NAME", help="the workflow's name, also its folder")
    workflow.add_argument(
        "--stateous-path",
        metavar="PATH",
        help="a local Stateous checkout for the folder's pyproject.toml to depend on",
    )
    workflow.set_defaults(run=run_init_workflow)
