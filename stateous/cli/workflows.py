"""`stateous compile` and `stateous init workflow`: from `flow.py` to the graph file."""

from __future__ import annotations

import argparse
from pathlib import Path

from stateous.cli.errors import CommandError
from stateous.cli.folders import add_stateous_path, shown, stateous_checkout
from stateous.cli.parser import Commands
from stateous.model.invocation import invoked_as
from stateous.model.names import name_problem


def run_compile(args: argparse.Namespace) -> int:
    """Compile FLOW and write its graph file."""
    from stateous.compiler.compile import compile_flow, default_out, write_graph

    flow = Path(args.flow)
    graph = compile_flow(flow)
    out = Path(args.out) if args.out else default_out(flow, graph)
    write_graph(graph, out)
    print(f"wrote {shown(out)}")
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
            f"{shown(folder / 'flow.py')} exists; init does not write over a workflow"
        )
    stateous_path = stateous_checkout(args)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for file_name in FILES:
            target = folder / file_name
            if target.exists():
                print(f"kept     {shown(target)}")
                continue
            target.write_text(render(file_name, name, shown(folder), stateous_path))
            print(f"wrote    {shown(target)}")
    except OSError as ex:
        raise CommandError(f"cannot write in {shown(folder)}: {ex.strerror or ex}") from None
    graph = compile_flow(folder / "flow.py")
    out = default_out(folder / "flow.py", graph)
    write_graph(graph, out)
    print(f"wrote    {shown(out)}")
    print()
    command = invoked_as()
    print("Next steps:")
    print(f"  {command} serve {shown(out)}")
    print(f"  {command} init supervisor {shown(folder / 'flow.py')} {name}-supervisor")
    return 0


def add_compile(commands: Commands) -> None:
    """Add `compile` to the parser."""
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


def add_init_workflow(init: Commands) -> None:
    """Add `init workflow` to the `init` command."""
    workflow = init.add_parser(
        "workflow",
        help="write a starter workflow's folder, and compile it",
        description=(
            "Make the folder NAME/ with a starter flow.py, schemas.py and pyproject.toml, "
            "then compile it to NAME/build/NAME.json."
        ),
    )
    workflow.add_argument("name", metavar="NAME", help="the workflow's name, also its folder")
    add_stateous_path(workflow)
    workflow.set_defaults(run=run_init_workflow)
