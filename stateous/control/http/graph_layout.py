"""The served graph laid out for drawing, so that the dashboard needs no layout tool.

Each workflow of the graph file (the top one and every child workflow) is drawn
top to bottom in layers: START on the first, END on the last, every other state
on the layer after the longest path that reaches it. Transitions that lead back
(a review sending a token back to its draft) are turned round for the layering
and drawn upwards. An edge that spans several layers passes through a point on
each layer between, which the ordering treats as a node, so that edges do not
run through states. The order within each layer is improved by a few sweeps of
barycentres, keeping the order with the fewest crossings. The answer is numbers
only (boxes, polylines, label places); the page draws them. Nothing here reads
a token or the database.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

import msgspec

from stateous.model.graph_file import GraphFile, WorkflowSpec
from stateous.model.names import END_NAME, START_NAME

#: The height of a state's box, in pixels of the drawing.
NODE_HEIGHT = 36.0
#: The width of one character of a label, a little more than the page's 13 px sans-serif.
CHAR_WIDTH = 8.0
#: The room around a state's name inside its box.
PADDING = 28.0
NARROWEST = 72.0
#: The room between two layers (the server labels sit in it) and between two boxes of a layer.
LAYER_GAP = 64.0
NODE_GAP = 40.0
#: The width that an edge passing through a layer takes there.
PASSING_WIDTH = 16.0
MARGIN = 24.0
#: How far a transition from a state to itself loops out on the right of its box.
LOOP = 24.0
#: How far apart two edges between the same two states run, each this far off the middle.
TWIN_SHIFT = 12.0
#: How far a label stands off its line.
LABEL_GAP = 6.0
#: How many down-and-up sweeps the ordering tries.
SWEEPS = 4
SHOWN = {START_NAME: "START", END_NAME: "END"}

Point = tuple[float, float]


class Node(msgspec.Struct, kw_only=True):
    """A state's box: `x`, `y` are its top left corner; `parallel` names its child workflows."""

    name: str
    label: str
    kind: str
    x: float
    y: float
    width: float
    height: float
    parallel: list[str] = []


class Edge(msgspec.Struct, kw_only=True):
    """The transitions from one state to another, as one polyline ending at `target`, with
    their events (and guards) in one label placed at `label_at`."""

    source: str
    target: str
    label: str
    points: list[Point]
    label_at: Point
    #: How the label's text stands at `label_at` (SVG's `text-anchor`): `start` on the right
    #: of its line, `end` on its left, `middle` centred (a loop's).
    anchor: str = "middle"
    back: bool = False


class Drawing(msgspec.Struct, kw_only=True):
    """One workflow laid out."""

    workflow: str
    width: float
    height: float
    nodes: list[Node]
    edges: list[Edge]


class Layout(msgspec.Struct, kw_only=True):
    """Every workflow of the graph file laid out; `top` names the served one."""

    top: str
    workflows: dict[str, Drawing]


def layout(graph: GraphFile) -> Layout:
    """Lay out every workflow of a graph file."""
    names = [graph.workflow, *graph.workflows]
    return Layout(
        top=graph.workflow,
        workflows={name: draw(name, graph.workflow_spec(name)) for name in names},
    )


def edge_label(event: str | None, when: str | None, otherwise: bool) -> str:
    """How one transition reads on its edge: `reviewed [payload.approved == true]`."""
    guard = f"[{when}]" if when else "[otherwise]" if otherwise else ""
    return " ".join(part for part in (event or "", guard) if part)


def joined_edges(spec: WorkflowSpec) -> dict[tuple[str, str], str]:
    """The transitions grouped by their two states, each group's labels joined."""
    labels: dict[tuple[str, str], list[str]] = {}
    for move in spec.transitions:
        label = edge_label(move.on, move.when, move.otherwise)
        group = labels.setdefault((move.source, move.target), [])
        if label and label not in group:
            group.append(label)
    return {pair: ", ".join(group) for pair, group in labels.items()}


def back_edges(names: list[str], pairs: Iterable[tuple[str, str]]) -> set[tuple[str, str]]:
    """The edges that lead back to a state on the way from START (a depth-first walk)."""
    following: dict[str, list[str]] = {name: [] for name in names}
    for source, destination in pairs:
        if source != destination:
            following[source].append(destination)
    found: set[tuple[str, str]] = set()
    seen: set[str] = set()
    for root in names:
        if root in seen:
            continue
        seen.add(root)
        on_path, stack = {root}, [(root, iter(following[root]))]
        while stack:
            name, rest = stack[-1]
            target = next(rest, None)
            if target is None:
                stack.pop()
                on_path.discard(name)
            elif target in on_path:
                found.add((name, target))
            elif target not in seen:
                seen.add(target)
                on_path.add(target)
                stack.append((target, iter(following[target])))
    return found


def layers_of(names: list[str], forward: list[tuple[str, str]]) -> dict[str, int]:
    """Each state's layer: one after the longest path of forward edges that reaches it; END
    below every other state."""
    layer = dict.fromkeys(names, 0)
    incoming: dict[str, int] = dict.fromkeys(names, 0)
    for _, target in forward:
        incoming[target] += 1
    ready = [name for name in names if incoming[name] == 0]
    while ready:
        name = ready.pop(0)
        for source, target in forward:
            if source == name:
                layer[target] = max(layer[target], layer[name] + 1)
                incoming[target] -= 1
                if incoming[target] == 0:
                    ready.append(target)
    if END_NAME in layer:
        layer[END_NAME] = max((layer[name] + 1 for name in names if name != END_NAME), default=1)
    return layer


def crossings(upper: list[str], lower: list[str], links: list[tuple[str, str]]) -> int:
    """How many pairs of the links between two neighbouring layers cross."""
    at_upper = {name: index for index, name in enumerate(upper)}
    at_lower = {name: index for index, name in enumerate(lower)}
    spans = [(at_upper[a], at_lower[b]) for a, b in links if a in at_upper and b in at_lower]
    return sum(
        1
        for index, (a1, b1) in enumerate(spans)
        for a2, b2 in spans[index + 1 :]
        if (a1 - a2) * (b1 - b2) < 0
    )


def total_crossings(rows: list[list[str]], links: list[tuple[str, str]]) -> int:
    return sum(crossings(rows[i], rows[i + 1], links) for i in range(len(rows) - 1))


def sweep(rows: list[list[str]], links: list[tuple[str, str]], downwards: bool) -> None:
    """Sort each layer by the mean place of its neighbours on the layer before it."""
    order = range(1, len(rows)) if downwards else range(len(rows) - 2, -1, -1)
    for index in order:
        before = rows[index - 1] if downwards else rows[index + 1]
        place = {name: spot for spot, name in enumerate(before)}
        neighbours: dict[str, list[int]] = {name: [] for name in rows[index]}
        for a, b in links:
            near, far = (b, a) if downwards else (a, b)
            if near in neighbours and far in place:
                neighbours[near].append(place[far])

        def centre(item: tuple[int, str], found: dict[str, list[int]] = neighbours) -> float:
            spot, name = item
            return sum(found[name]) / len(found[name]) if found[name] else float(spot)

        rows[index] = [name for _, name in sorted(enumerate(rows[index]), key=centre)]


def ordered(rows: list[list[str]], links: list[tuple[str, str]]) -> list[list[str]]:
    """The layers in the order, of those the sweeps tried, with the fewest crossings."""
    best, fewest = [list(row) for row in rows], total_crossings(rows, links)
    for turn in range(SWEEPS * 2):
        sweep(rows, links, downwards=turn % 2 == 0)
        count = total_crossings(rows, links)
        if count < fewest:
            best, fewest = [list(row) for row in rows], count
    return best


def box_width(label: str) -> float:
    return max(NARROWEST, len(label) * CHAR_WIDTH + PADDING)


def draw(workflow: str, spec: WorkflowSpec) -> Drawing:
    """Lay out one workflow."""
    names = [START_NAME, *spec.states]
    labels = joined_edges(spec)
    if any(target == END_NAME for _, target in labels):
        names.append(END_NAME)
    backs = back_edges(names, labels)
    # Each edge as it points down the layers: a back edge is turned round.
    downward = {
        pair: (pair[1], pair[0]) if pair in backs else pair for pair in labels if pair[0] != pair[1]
    }
    layer = layers_of(names, list(dict.fromkeys(downward.values())))
    rows: list[list[str]] = [[] for _ in range(max(layer.values()) + 1)]
    for name in names:
        rows[layer[name]].append(name)
    chains: dict[tuple[str, str], list[str]] = {}
    links: list[tuple[str, str]] = []
    for pair, (upper, lower) in downward.items():
        chain = [upper]
        for between in range(layer[upper] + 1, layer[lower]):
            passing = f"\x00{pair[0]}\x00{pair[1]}\x00{between}"
            rows[between].append(passing)
            chain.append(passing)
        chain.append(lower)
        links.extend(itertools.pairwise(chain))
        chains[pair] = chain
    rows = ordered(rows, links)
    width = {name: box_width(SHOWN.get(name, name)) for name in names}
    widest = max(
        sum(width.get(name, PASSING_WIDTH) for name in row) + NODE_GAP * (len(row) - 1)
        for row in rows
    )
    centre: dict[str, Point] = {}
    for index, row in enumerate(rows):
        used = sum(width.get(name, PASSING_WIDTH) for name in row) + NODE_GAP * (len(row) - 1)
        left = MARGIN + (widest - used) / 2
        middle = MARGIN + index * (NODE_HEIGHT + LAYER_GAP) + NODE_HEIGHT / 2
        for name in row:
            own = width.get(name, PASSING_WIDTH)
            centre[name] = (left + own / 2, middle)
            left += own + NODE_GAP
    nodes = [node_of(name, spec, centre[name], width[name]) for name in names]
    edges = [
        edge_of(
            pair, label, chains.get(pair), centre, width, pair in backs, twin_shift(pair, labels)
        )
        for pair, label in labels.items()
    ]
    return framed(workflow, nodes, edges)


def label_span(edge: Edge) -> tuple[float, float]:
    """The left and right ends of an edge's label, from its place and how it stands there."""
    x, length = edge.label_at[0], len(edge.label) * CHAR_WIDTH
    if edge.anchor == "start":
        return x, x + length
    if edge.anchor == "end":
        return x - length, x
    return x - length / 2, x + length / 2


def framed(workflow: str, nodes: list[Node], edges: list[Edge]) -> Drawing:
    """The drawing moved so that every box, line and label lies inside it, a margin from
    its left and top sides."""
    lefts = [node.x for node in nodes] + [label_span(edge)[0] for edge in edges]
    rights = [node.x + node.width for node in nodes] + [label_span(edge)[1] for edge in edges]
    lefts += [x for edge in edges for x, _ in edge.points]
    rights += [x for edge in edges for x, _ in edge.points]
    move = MARGIN - min(lefts)
    for node in nodes:
        node.x += move
    for edge in edges:
        edge.points = [(x + move, y) for x, y in edge.points]
        edge.label_at = (edge.label_at[0] + move, edge.label_at[1])
    return Drawing(
        workflow=workflow,
        width=max(rights) - min(lefts) + 2 * MARGIN,
        height=max(node.y + node.height for node in nodes) + MARGIN,
        nodes=nodes,
        edges=edges,
    )


def twin_shift(pair: tuple[str, str], labels: dict[tuple[str, str], str]) -> float:
    """How far an edge runs off the middle of its boxes: apart from its twin, the server the
    other way between the same two states, when there is one."""
    if pair[0] == pair[1] or (pair[1], pair[0]) not in labels:
        return 0.0
    return TWIN_SHIFT if pair > (pair[1], pair[0]) else -TWIN_SHIFT


def node_of(name: str, spec: WorkflowSpec, centre: Point, width: float) -> Node:
    state = spec.states.get(name)
    kind = {START_NAME: "start", END_NAME: "end"}.get(name, "state")
    if state is not None and state.parallel:
        kind = "parallel"
    return Node(
        name=name,
        label=SHOWN.get(name, name),
        kind=kind,
        x=centre[0] - width / 2,
        y=centre[1] - NODE_HEIGHT / 2,
        width=width,
        height=NODE_HEIGHT,
        parallel=list(state.parallel or []) if state is not None else [],
    )


def edge_of(
    pair: tuple[str, str],
    label: str,
    chain: list[str] | None,
    centre: dict[str, Point],
    width: dict[str, float],
    back: bool,
    shift: float = 0.0,
) -> Edge:
    """One edge's polyline: from the lower side of the upper box to the upper side of the
    lower one, through its passing points; a loop on the right for a state to itself."""
    source, target = pair
    if chain is None:
        x, y = centre[source]
        right = x + width[source] / 2
        points = [(right, y - 8), (right + LOOP, y - 8), (right + LOOP, y + 8), (right, y + 8)]
        return Edge(
            source=source,
            target=target,
            label=label,
            points=points,
            label_at=(right + LOOP + 4 + len(label) * CHAR_WIDTH / 2, y),
        )
    half = NODE_HEIGHT / 2
    points = [(centre[name][0] + shift, centre[name][1]) for name in chain]
    points[0] = (points[0][0], points[0][1] + half)
    points[-1] = (points[-1][0], points[-1][1] - half)
    if back:
        points.reverse()
    # A label sits in the middle of a one-layer edge, at the passing point of a longer one
    # (away from the labels of the edges that leave and enter the boxes).
    middle = len(points) // 2
    (x1, y1), (x2, y2) = points[middle - 1] if len(points) == 2 else points[middle], points[middle]
    # A label reads beside its line, never across it: on the left of an edge that runs on
    # the left of its twin, else on the right.
    anchor = "end" if shift < 0 else "start"
    beside = -LABEL_GAP if shift < 0 else LABEL_GAP
    return Edge(
        source=source,
        target=target,
        label=label,
        points=points,
        label_at=((x1 + x2) / 2 + beside, (y1 + y2) / 2),
        anchor=anchor,
        back=back,
    )
