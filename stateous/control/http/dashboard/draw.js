/* The dashboard's drawing: elements made without parsing HTML (every value shown is
   text, never markup), a laid-out workflow drawn as SVG, and the sentence of each
   ledger entry, as the control plane words it. It asks the API for nothing. */
window.Draw = (() => {
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const SHOWN_STATES = { __start__: "START", __end__: "END" };
const BUILTIN_EVENTS = ["timeout", "error", "joined"];

/* Set attributes and listeners; `null`, `undefined` and `false` set nothing. */
function setAll(node, attributes) {
  for (const [name, value] of Object.entries(attributes || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      node.addEventListener(name.slice(2), value);
    } else {
      node.setAttribute(name, value === true ? "" : String(value));
    }
  }
  return node;
}

/* Add children: nodes as they are, anything else as text. */
function fill(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function el(tag, attributes, ...children) {
  return fill(setAll(document.createElement(tag), attributes), children);
}

function svgEl(tag, attributes, ...children) {
  return fill(setAll(document.createElementNS(SVG_NS, tag), attributes), children);
}

function stateName(state) {
  return SHOWN_STATES[state] || state;
}

/* An ISO moment of the API as its date and time of day in UTC. */
function utc(moment) {
  if (!moment) return "";
  const date = new Date(moment);
  return Number.isNaN(date.getTime()) ? String(moment) : date.toISOString().slice(0, 19).replace("T", " ");
}

/* The time of day of a moment in UTC, on a 24-hour clock, as every other time here is. */
function clock(date) {
  return date.toISOString().slice(11, 19);
}

/* How long ago a moment was, in words: `12 s ago`, `3 min ago`, `2 h ago`. */
function ago(moment, now = Date.now()) {
  if (!moment) return "never";
  const seconds = Math.max(0, (now - new Date(moment).getTime()) / 1000);
  if (seconds < 120) return `${Math.round(seconds)} s ago`;
  if (seconds < 7200) return `${Math.round(seconds / 60)} min ago`;
  if (seconds < 172800) return `${Math.round(seconds / 3600)} h ago`;
  return `${Math.round(seconds / 86400)} days ago`;
}

let markers = 0;

/* Draw one workflow of `GET /workflow/layout`. `counts` maps a state to its numbers
   ({active, paused}), `current` names a state to mark, `link` gives a state's address. */
function drawGraph(drawing, { counts = {}, current = null, link = null } = {}) {
  const marker = `arrow-${++markers}`;
  const root = svgEl("svg", {
    class: "graph",
    viewBox: `0 0 ${drawing.width} ${drawing.height}`,
    width: drawing.width,
    height: drawing.height,
    role: "img",
    "aria-label": `the workflow ${drawing.workflow}`,
    "data-workflow": drawing.workflow,
  });
  root.append(svgEl("defs", {}, svgEl("marker", {
    id: marker, viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7,
    orient: "auto-start-reverse",
  }, svgEl("path", { d: "M0,0 L10,5 L0,10 z" }))));
  for (const edge of drawing.edges) {
    root.append(svgEl("polyline", {
      class: edge.back ? "edge back" : "edge",
      points: edge.points.map(([x, y]) => `${x},${y}`).join(" "),
      "marker-end": `url(#${marker})`,
    }));
    if (edge.label) {
      const [x, y] = edge.label_at;
      root.append(svgEl("text", {
        class: "edge-label", x, y, "text-anchor": edge.anchor, "dominant-baseline": "middle",
      }, edge.label));
    }
  }
  for (const node of drawing.nodes) root.append(drawNode(node, counts[node.name], current, link));
  return root;
}

function drawNode(node, count, current, link) {
  const classes = ["node", `kind-${node.kind}`];
  if (node.name === current) classes.push("current");
  const active = count ? count.active || 0 : 0;
  const paused = count ? count.paused || 0 : 0;
  const title = [node.name === current ? `${node.label} (this token is here)` : node.label];
  if (count) title.push(`${active} active, ${paused} paused`);
  if (node.parallel.length) title.push(`runs ${node.parallel.join(", ")}`);
  const group = svgEl("g", { class: classes.join(" "), "data-state": node.name },
    svgEl("title", {}, title.join(": ")),
    svgEl("rect", { x: node.x, y: node.y, width: node.width, height: node.height, rx: 6 }),
    svgEl("text", {
      x: node.x + node.width / 2, y: node.y + node.height / 2,
      "text-anchor": "middle", "dominant-baseline": "middle",
    }, node.label));
  if (active) {
    const x = node.x + node.width - 2, y = node.y + 2;
    group.append(svgEl("g", { class: "badge" },
      svgEl("circle", { cx: x, cy: y, r: 10 }),
      svgEl("text", { class: "count", x, y, "text-anchor": "middle", "dominant-baseline": "central" },
        active > 999 ? "999+" : active)));
  }
  const href = link && node.kind !== "start" ? link(node.name) : null;
  return href ? svgEl("a", { href }, group) : group;
}

/* JSON on one line as `stateous token show` writes it: `{"a": 1, "b": [2, 3]}`. */
function compact(value) {
  if (Array.isArray(value)) return `[${value.map(compact).join(", ")}]`;
  if (value !== null && typeof value === "object") {
    return `{${Object.entries(value).map(([key, item]) => `${JSON.stringify(key)}: ${compact(item)}`).join(", ")}}`;
  }
  return JSON.stringify(value);
}

/* An entry's sentence: the `text` that the control plane words for it (the table of
   `stateous token show`), else its kind and data. */
function sentence(entry) {
  if (typeof entry.text === "string" && entry.text) return entry.text;
  const data = entry.data || {};
  return Object.keys(data).length ? `${entry.kind}: ${compact(data)}` : entry.kind;
}

/* Amounts by unit as `token show` writes them, units in order, numbers to 6 digits:
   `tokens=3400 usd=0.42`, or `nothing`. */
function amounts(byUnit) {
  const units = Object.keys(byUnit).sort();
  return units.map((unit) => `${unit}=${Number(byUnit[unit].toPrecision(6))}`).join(" ") || "nothing";
}

/* What a token and its tree spent, and its tree's budget (`spent` of GET /tokens/{id}),
   in the line of `token show`: `spent: usd=0.2; its tree: usd=0.5; budget of T: usd=1`. */
function spentLine(spent) {
  const line = `spent: ${amounts(spent.token)}; its tree: ${amounts(spent.tree)}`;
  const budget = spent.budget;
  if (!budget) return line;
  const reserved = Object.keys(budget.reserved).length ? `, reserved ${amounts(budget.reserved)}` : "";
  const over = budget.over ? ", spent: no task is granted" : "";
  return `${line}; budget of ${budget.token}: ${amounts(budget.limits)}${reserved}${over}`;
}

return { el, fill, svgEl, drawGraph, sentence, compact, spentLine, stateName, utc, clock, ago, BUILTIN_EVENTS };
})();
