"""`stateous token show --graph`: the served workflow as a Mermaid `stateDiagram-v2`.

Each transition is one edge, labelled with its event and, in brackets, its guard
or `otherwise`. A parallel state is a composite state that holds its child
workflows side by side. Mermaid ids take no `-`, so a state whose name has one,
or whose name the diagram uses already, gets an alias. This module
draws the graph file it is given; it neither fetches nor checks it.
"""

from __future__ import annotations

import re

from stateous.model.graph_file import GraphFile, TransitionSpec, WorkflowSpec
from stateous.model.names import END_NAME, START_NAME

INDENT = "    "
#: Words that open a statement of Mermaid's state diagrams, so no state's id may be one.
RESERVED = {"class", "classdef", "direction", "end", "hide", "note", "scale", "state", "style"}
#: The characters that end a Mermaid edge label, written as HTML entity codes.
LABEL_ESCAPES = str.maketrans({":": "#58;", ";": "#59;"})


def plain(text: str) -> str:
    """Turn a name into the characters a Mermaid id may hold."""
    return re.sub(r"[^A-Za-z0-9_]", "_", text)


class Diagram:
    """The lines of one diagram and the Mermaid ids that its states took."""

    def __init__(self, graph: GraphFile) -> None:
        self.graph = graph
        self.lines = ["stateDiagram-v2", f"{INDENT}direction LR"]
        self.ids: dict[tuple[str, str], str] = {}
        self.taken: set[str] = set()

    def ident(self, scope: str, name: str) -> str:
        """Return the Mermaid id of state `name` in `scope`, choosing a free one the first time."""
        if name in (START_NAME, END_NAME):
            return "[*]"
        found = self.ids.get((scope, name))
        if found is not None:
            return found
        base = plain(name)
        if base in self.taken or base.lower() in RESERVED:
            base = plain(f"{scope.rsplit('/', 1)[-1]}_{name}")
        chosen, number = base, 1
        while chosen in self.taken:
            number += 1
            chosen = f"{base}_{number}"
        self.taken.add(chosen)
        self.ids[(scope, name)] = chosen
        return chosen

    def declare(self, scope: str, name: str, pad: str, opens: bool) -> None:
        """Add a `state` line when the state needs an alias or opens a composite state."""
        ident = self.ident(scope, name)
        shown = ident if ident == name else f'"{name}" as {ident}'
        if opens:
            self.lines.append(f"{pad}state {shown} {{")
        elif ident != name:
            self.lines.append(f"{pad}state {shown}")

    def draw(self, scope: str, flow: WorkflowSpec, depth: int) -> None:
        """Add the states and edges of one workflow, at `depth` levels of nesting."""
        pad = INDENT * depth
        for name, state in flow.states.items():
            self.declare(scope, name, pad, opens=bool(state.parallel))
            if state.parallel:
                for index, child in enumerate(state.parallel):
                    if index:
                        self.lines.append(f"{pad}{INDENT}--")
                    self.declare(f"{scope}/{name}", child, pad + INDENT, opens=True)
                    nested = self.graph.workflow_spec(child)
                    self.draw(f"{scope}/{name}/{child}", nested, depth + 2)
                    self.lines.append(f"{pad}{INDENT}}}")
                self.lines.append(f"{pad}}}")
        for transition in flow.transitions:
            source = self.ident(scope, transition.source)
            target = self.ident(scope, transition.target)
            self.lines.append(f"{pad}{source} --> {target}{label(transition)}")


def label(transition: TransitionSpec) -> str:
    """The edge's label: `: event [guard]`, or nothing for an unguarded edge from START."""
    parts = [transition.on] if transition.on else []
    if transition.when:
        parts.append(f"[{transition.when}]")
    elif transition.otherwise:
        parts.append("[otherwise]")
    return f": {' '.join(parts).translate(LABEL_ESCAPES)}" if parts else ""


def mermaid(graph: GraphFile) -> str:
    """Draw the whole graph: the top workflow, with child workflows inside parallel states."""
    diagram = Diagram(graph)
    diagram.draw(graph.workflow, graph.workflow_spec(graph.workflow), 1)
    return "\n".join(diagram.lines)
