/* The dashboard: three views (the overview, the token list, a token's page), each read
   from the API of the control plane that served this page and read again every few
   seconds, or as soon as `GET /stream` brings a change where it exists. Every request carries `Authorization: Bearer SECRET` once the user has given
   a secret, which this tab keeps in its session storage only, never in an address. A
   route that this control plane does not have (404) leaves its panel saying so. */
"use strict";

const { el, fill, drawGraph, sentence, compact, spentLine, stateName, utc, clock, ago, BUILTIN_EVENTS } = window.Draw;
const POLL_MS = 3000;
/* While `GET /stream` is open, each entry it brings updates the view (at most once a
   second), and polling is only a safety net. */
const STREAM_POLL_MS = 15000;
const STREAM_SETTLE_MS = 1000;
const STREAM_RETRY_MS = 5000;
const SECRET_KEY = "stateous.secret";
const TOKEN_STATUSES = ["active", "paused", "completed", "failed", "cancelled"];
/* How many pages of tokens the overview reads to count them when `/stats` is absent. */
const COUNT_PAGES = 10;
/* The API is served beside `/ui/`, also behind a proxy that adds a prefix. */
const BASE = new URL("../", location.href);
const known = { layout: null, graph: null, tokenParams: null, lease: null };
/* The lease of Stateous 0.2.2, for a control plane whose `/health` does not say its own. */
const FIXED_LEASE = 120;
/* How many failed tokens the overview shows, the most recently failed first. */
const FAILED_SHOWN = 20;
/* The error line (and stop by a repeat) of each failed token shown, by its id and the
   moment it ended: a failed token's history does not change until it is retried, which
   moves it again. */
const failures = new Map();
const limits = { queuedMinutes: 10, waitingHours: 1, leaseSeconds: 30 };

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

const $ = (id) => document.getElementById(id);
const enc = encodeURIComponent;

async function readJson(response) {
  const text = await response.text();
  try {
    return text ? JSON.parse(text) : null;
  } catch (error) {
    return { error: text, code: null };
  }
}

/* The `rel="next"` address of a `Link` header, on this page's own origin only. */
function nextLink(header, from) {
  const found = header && header.match(/<([^>]*)>\s*;\s*rel="?next"?/);
  if (!found) return null;
  const url = new URL(found[1], from);
  return url.origin === location.origin ? url : null;
}

/* Ask the API; a 401 asks the user for a secret, then asks the API again. */
async function api(path, { method = "GET", body, headers = {} } = {}) {
  const url = path instanceof URL ? path : new URL(path.replace(/^\//, ""), BASE);
  const sent = { ...headers };
  const secret = sessionStorage.getItem(SECRET_KEY);
  if (secret) sent.Authorization = `Bearer ${secret}`;
  // Every change says it is JSON, with a body or without: the API refuses it otherwise.
  if (method === "POST" || method === "PUT") sent["Content-Type"] = "application/json";
  const response = await fetch(url, {
    method, headers: sent, body: body === undefined ? undefined : JSON.stringify(body),
    cache: "no-store", credentials: "omit", redirect: "error",
  });
  const data = await readJson(response);
  if (response.status === 401) {
    sessionStorage.removeItem(SECRET_KEY);
    await askSecret(secret ? `The control plane refused that secret: ${data && data.error}` : "");
    return api(url, { method, body, headers });
  }
  if (!response.ok) {
    throw new ApiError(response.status, data && data.code, (data && data.error) || response.statusText);
  }
  return { data, next: nextLink(response.headers.get("Link"), response.url) };
}

/* A route of a newer control plane: its answer, or null when this one does not have it. */
async function optional(path) {
  try {
    return (await api(path)).data;
  } catch (error) {
    if (error.status === 404 && error.code === "not_found") return null;
    throw error;
  }
}

let asking = null;

function askSecret(message) {
  if (asking) return asking;
  asking = new Promise((resolve) => {
    const dialog = $("secret-dialog"), form = $("secret-form"), input = $("secret");
    $("secret-error").textContent = message;
    input.value = "";
    const submitted = (event) => {
      event.preventDefault();
      const secret = input.value.trim();
      if (!secret) return;
      sessionStorage.setItem(SECRET_KEY, secret);
      input.value = "";
      form.removeEventListener("submit", submitted);
      dialog.close();
      asking = null;
      resolve();
    };
    form.addEventListener("submit", submitted);
    if (!dialog.open) dialog.showModal();
    input.focus();
  });
  return asking;
}

async function layout() {
  if (!known.layout) known.layout = (await api("/workflow/layout")).data;
  return known.layout;
}

async function graphFile() {
  if (!known.graph) known.graph = (await api("/workflow")).data;
  return known.graph;
}

/* The lease of this control plane's grants, in seconds. */
async function lease() {
  if (!known.lease) known.lease = (await api("/health")).data.lease || FIXED_LEASE;
  return known.lease;
}

/* The query parameters of `GET /tokens` that this control plane takes, from its OpenAPI. */
async function tokenParams() {
  if (!known.tokenParams) {
    const doc = (await api("/openapi.json")).data;
    const listing = doc.paths["/tokens"].get.parameters || [];
    known.tokenParams = new Set(listing.map((param) => param.name));
  }
  return known.tokenParams;
}

/* The workflow a token runs: a child's id, `<parent>.<state>.<visit>.<workflow>`, names it. */
function workflowOf(token, top) {
  return token.parent ? token.token.split(".").pop() : top;
}

function tokenLink(id) {
  return el("a", { href: `#/tokens/${enc(id)}`, class: "token-link" }, id);
}

function statusBadge(status) {
  return el("span", { class: `status status-${status}` }, status);
}

function table(headings, rows, attributes = {}) {
  return el("div", { class: "scroll" }, el("table", attributes,
    el("thead", {}, el("tr", {}, headings.map((heading) => el("th", {}, heading)))),
    el("tbody", {}, rows)));
}

function unavailable(route) {
  return el("p", { class: "unavailable" },
    `This control plane has no ${route} (it answered 404 not_found): a newer one shows this here.`);
}

function nothing(text) {
  return el("p", { class: "quiet" }, text);
}

/* Read tokens page after page (at most `pages`) of 1000, following each `Link: rel="next"`;
   a full page from a listing without cursors may not be all. */
async function listTokens(query, pages) {
  let url = `/tokens?${query}&limit=1000`;
  const rows = [];
  for (let page = 0; url; page += 1) {
    if (page === pages) return { rows, more: true };
    const { data, next } = await api(url);
    rows.push(...data);
    if (!next && data.length === 1000 && !(await tokenParams()).has("after")) return { rows, more: true };
    url = next;
  }
  return { rows, more: false };
}

// the overview

function countsFromTokens(tokens, top, status, counts) {
  for (const token of tokens) {
    const flow = workflowOf(token, top);
    counts[flow] = counts[flow] || {};
    const count = counts[flow][token.state] || (counts[flow][token.state] = { active: 0, paused: 0 });
    count[status] += 1;
  }
}

function countsFromStats(stats, top) {
  const counts = {};
  for (const [name, numbers] of Object.entries(stats.tokens || {})) {
    const [flow, state] = name.includes("/") ? name.split("/") : [top, name];
    counts[flow] = counts[flow] || {};
    counts[flow][state] = { active: numbers.active || 0, paused: numbers.paused || 0 };
  }
  return counts;
}

function countsTable(drawing, counts) {
  const rows = drawing.nodes.filter((node) => node.kind === "state" || node.kind === "parallel")
    .map((node) => {
      const count = counts[node.name] || { active: 0, paused: 0 };
      const filter = drawing.workflow === known.layout.top ? `&state=${enc(node.name)}` : "";
      return el("tr", { "data-state": node.name },
        el("td", {}, el("a", { href: `#/tokens?status=active${filter}` }, node.label)),
        el("td", { class: "number active" }, count.active),
        el("td", { class: "number paused" }, count.paused));
    });
  return table(["State", "Active", "Paused"], rows,
    { class: "counts", "data-workflow": drawing.workflow });
}

function mountOverview(main) {
  const graphs = el("div");
  const note = el("p", { class: "quiet" });
  const stuck = el("div");
  const supervisors = el("div");
  const failed = el("div");
  const stats = el("div");
  const number = (key, label, unit) => el("label", {}, `${label} (${unit})`, el("input", {
    type: "number", min: 0, value: limits[key], id: `limit-${key}`,
    onchange: (event) => { limits[key] = Number(event.target.value) || 0; kick(); },
  }));
  fill(main, [
    el("section", { id: "workflow" }, el("h2", {}, "Workflow and active tokens per state"), graphs, note),
    el("section", { id: "stuck" }, el("h2", {}, "Stuck work"),
      el("form", { class: "filters", onsubmit: (event) => event.preventDefault() },
        number("queuedMinutes", "Queued longer than", "minutes"),
        number("leaseSeconds", "Lease ends within", "seconds"),
        number("waitingHours", "In one state longer than", "hours")),
      stuck),
    el("section", { id: "failed" }, el("h2", {}, "Failed in the last day"), failed),
    el("section", { id: "supervisors" }, el("h2", {}, "Supervisors"), supervisors),
    el("section", { id: "stats" }, el("h2", {}, "The last hour"), stats),
  ]);
  return async () => {
    // The drawing and the counts, then the rest of the overview: each group asked at once.
    const [drawn, summary] = await Promise.all([layout(), optional("/stats")]);
    const top = drawn.top;
    let counts = {};
    let active = { rows: [], more: false };
    if (summary) {
      counts = countsFromStats(summary, top);
      note.textContent = "Counted by GET /stats.";
    } else {
      active = await listTokens("status=active", COUNT_PAGES);
      const paused = await listTokens("status=paused", COUNT_PAGES);
      countsFromTokens(active.rows, top, "active", counts);
      countsFromTokens(paused.rows, top, "paused", counts);
      note.textContent = active.more || paused.more
        ? "Counted from the first tokens of GET /tokens: there are more."
        : "Counted from GET /tokens.";
    }
    graphs.replaceChildren(...Object.values(drawn.workflows).map((drawing) => el("div",
      { class: "workflow" },
      drawing.workflow === top ? null : el("h3", {}, `Child workflow ${drawing.workflow}`),
      drawGraph(drawing, {
        counts: counts[drawing.workflow] || {},
        link: drawing.workflow === top ? (state) => `#/tokens?status=active&state=${enc(state)}` : null,
      }),
      countsTable(drawing, counts[drawing.workflow] || {}))));
    const [waiting, tasks, seen, leaseSeconds, ended, shared] = await Promise.all([
      summary ? waitingTokens() : active.rows, optional("/tasks?limit=1000"),
      optional("/supervisors"), lease(), failedTokens(), optional("/resources")]);
    stuck.replaceChildren(...stuckWork(tasks, waiting), parkedKeys(shared), stoppedList(ended));
    failed.replaceChildren(failedList(ended));
    supervisors.replaceChildren(supervisorList(seen, leaseSeconds));
    stats.replaceChildren(summary ? lastHour(summary) : unavailable("GET /stats"));
  };
}

/* An ISO moment as the API writes them, `2026-11-30T18:33:50Z`. */
function iso(milliseconds) {
  return new Date(milliseconds).toISOString().replace(/\.\d{3}Z$/, "Z");
}

/* Active tokens that may have waited too long: those that have not moved since the
   cutoff where the listing takes `until`, else its first page. */
async function waitingTokens() {
  const cutoff = iso(Date.now() - limits.waitingHours * 3600 * 1000);
  const bounded = (await tokenParams()).has("until");
  const query = bounded ? `status=active&until=${enc(cutoff)}&limit=100` : "status=active&limit=1000";
  return (await api(`/tokens?${query}`)).data;
}

function taskRows(tasks, detail) {
  return tasks.map((task) => el("tr", {},
    el("td", {}, task.task), el("td", {}, tokenLink(task.token)), el("td", {}, task.state),
    el("td", {}, detail(task))));
}

function stuckList(title, rows, headings) {
  return el("div", { class: "stuck-list" }, el("h3", {}, title),
    rows.length ? table(headings, rows) : nothing("None."));
}

/* The keys that a quota report or a breaker parked, from GET /resources (ours). */
function parkedKeys(shared) {
  if (shared === null) return unavailable("GET /resources: parked keys");
  const rows = [];
  for (const resource of shared) {
    for (const key of resource.keys) {
      if (!key.parked) continue;
      const parked = key.parked;
      const why = parked.fingerprint ? `${parked.reason} (fingerprint ${parked.fingerprint})` : parked.reason;
      rows.push(el("tr", {}, el("td", {}, key.key ? `${resource.name}=${key.key}` : resource.name),
        el("td", {}, parked.cause), el("td", {}, parked.reopening || `until ${parked.until}`),
        el("td", {}, `${key.waiting} waiting`), el("td", {}, why)));
    }
  }
  return stuckList("Parked keys (quota or breaker)", rows, ["Key", "Cause", "", "", "Reason"]);
}

function stuckWork(tasks, activeTokens) {
  const now = Date.now();
  const parts = [];
  if (tasks === null) {
    parts.push(unavailable("GET /tasks: tasks tried again, queued too long and leases near their end"));
  } else {
    const heads = ["Task", "Token", "State", ""];
    const left = (task) => (new Date(task.lease_until).getTime() - now) / 1000;
    parts.push(stuckList("Tasks tried again", taskRows(tasks.filter((task) => task.attempt > 1),
      (task) => `attempt ${task.attempt}, ${task.status}`), heads));
    parts.push(stuckList(`Queued longer than ${limits.queuedMinutes} minutes`, taskRows(
      tasks.filter((task) => task.status === "queued" && task.age > limits.queuedMinutes * 60),
      (task) => `queued ${ago(task.queued_at, now)}`), heads));
    parts.push(stuckList("Waiting for a resource", taskRows(
      tasks.filter((task) => task.waits_for), (task) => task.waits_for), heads));
    parts.push(stuckList("Waiting for a supervisor", taskRows(
      tasks.filter((task) => task.waits), (task) => task.waits), heads));
    parts.push(stuckList(`Leases that end within ${limits.leaseSeconds} seconds`, taskRows(
      tasks.filter((task) => task.status === "claimed" && task.lease_until
        && left(task) < limits.leaseSeconds),
      (task) => `${task.supervisor || ""}: ${Math.max(0, Math.round(left(task)))} s left`), heads));
  }
  const cutoff = now - limits.waitingHours * 3600 * 1000;
  const waiting = activeTokens.filter((token) => new Date(token.entered_at).getTime() < cutoff);
  parts.push(stuckList(`Tokens in one state longer than ${limits.waitingHours} hours`,
    waiting.map((token) => el("tr", {}, el("td", {}, tokenLink(token.token)),
      el("td", {}, stateName(token.state)), el("td", {}, `since ${ago(token.entered_at, now)}`))),
    ["Token", "State", ""]));
  return parts;
}

/* The failed tokens of the last day whose retries a repeated failure ended, each with the
   failure's shape (its error with numbers and ids as `#`) and fingerprint. */
function stoppedList({ rows }) {
  const stopped = rows.filter((row) => row.stop);
  return stuckList("Retries stopped by a repeated failure (failed in the last day)",
    stopped.map(({ token, stop }) => el("tr", { "data-token": token.token },
      el("td", {}, tokenLink(token.token)), el("td", {}, stateName(token.state)),
      el("td", {}, `${stop.repeats} times`),
      el("td", { class: "error-line" }, stop.shape),
      el("td", { class: "fingerprint" }, stop.fingerprint))),
    ["Token", "State", "Repeats", "Failure", "Fingerprint"]);
}

/* The tokens that failed in the last day, each with its error line; `more` when the
   listing has more than are shown. */
async function failedTokens() {
  const since = iso(Date.now() - 24 * 3600 * 1000);
  const { data, next } = await api(`/tokens?status=failed&since=${enc(since)}&limit=${FAILED_SHOWN}`);
  const found = await Promise.all(data.map(failureOf));
  return {
    rows: data.map((token, index) => ({ token, ...found[index] })),
    more: Boolean(next),
  };
}

/* Why a failed token failed: its last `failed` entry's reason, else its last failed
   attempt's error, as its history says them; and its last `retries_stopped` entry, if the
   same failure on the same input ended its retries (`stop`, null if not). */
async function failureOf(token) {
  const key = `${token.token}\u0000${token.entered_at}`;
  if (!failures.has(key)) {
    const entries = (await api(`/tokens/${enc(token.token)}/history`)).data;
    const last = (kind, field) => entries.filter((entry) => entry.kind === kind && entry.data[field])
      .map((entry) => String(entry.data[field])).pop();
    const stops = entries.filter((entry) => entry.kind === "retries_stopped");
    failures.set(key, {
      error: last("failed", "reason") || last("task_failed", "error") || "no error was recorded",
      stop: stops.length ? stops[stops.length - 1].data : null,
    });
  }
  return failures.get(key);
}

function failedList({ rows, more }) {
  if (!rows.length) return nothing("No token failed in the last day.");
  return el("div", {}, table(["Token", "State", "Failed at (UTC)", "Error"], rows.map(({ token, error }) =>
    el("tr", { "data-token": token.token }, el("td", {}, tokenLink(token.token)),
      el("td", {}, stateName(token.state)), el("td", {}, utc(token.entered_at)),
      el("td", { class: "error-line" }, error)))),
  more ? el("p", { class: "quiet" }, el("a", { href: "#/tokens?status=failed" }, "More failed tokens")) : null);
}

/* The latest of the moments a supervisor was heard from, or null. */
function lastHeard(one) {
  const times = [one.last_heartbeat, one.last_claim].filter(Boolean).map((at) => new Date(at).getTime());
  return times.length ? Math.max(...times) : null;
}

/* A supervisor silent for a whole lease is gone: a claim it held has ended by now. */
function supervisorList(found, leaseSeconds) {
  if (found === null) return unavailable("GET /supervisors");
  if (!found.length) return nothing("No supervisor was seen in the last day.");
  const now = Date.now();
  return table(["Supervisor", "Last heartbeat", "Last claim", "Tasks held"], found.map((one) => {
    const heard = lastHeard(one);
    const gone = heard === null || now - heard > leaseSeconds * 1000;
    return el("tr", { "data-supervisor": one.supervisor, class: gone ? "gone" : null },
      el("td", {}, one.supervisor, gone
        ? el("span", { class: "gone-mark", title: `silent for more than a lease (${leaseSeconds} s)` }, " gone")
        : null),
      el("td", { title: utc(one.last_heartbeat) }, ago(one.last_heartbeat)),
      el("td", { title: utc(one.last_claim) }, ago(one.last_claim)),
      el("td", {}, one.tasks.length ? one.tasks.join(", ") : "none"));
  }), { class: "supervisors" });
}

function lastHour(summary) {
  const hour = summary.last_hour || {};
  return el("p", {}, `${hour.events_fired ?? 0} events fired, ${hour.leases_ended ?? 0} leases `
    + `ended, ${hour.attempts_failed ?? 0} attempts failed; ${summary.timers_pending ?? 0} timers pending.`);
}

// the token list

const FILTERS = ["status", "state", "parent", "since", "until", "limit"];

function mountList(main, params) {
  const results = el("div");
  const pager = el("div", { class: "actions" });
  const note = el("p", { class: "quiet" });
  const field = (name, input) => el("label", {}, name, input);
  const inputs = {
    status: el("select", { name: "status" }, el("option", { value: "" }, "any"),
      TOKEN_STATUSES.map((status) => el("option", { value: status }, status))),
    state: el("select", { name: "state" }, el("option", { value: "" }, "any")),
    parent: el("input", { name: "parent", placeholder: "a token id" }),
    since: el("input", { name: "since", placeholder: "2026-11-30T18:33:50Z" }),
    until: el("input", { name: "until", placeholder: "2026-11-30T18:33:50Z" }),
    limit: el("input", { name: "limit", type: "number", min: 1, max: 1000, placeholder: "100" }),
  };
  const search = el("input", { name: "token", placeholder: "ORDER-1", id: "search-id" });
  fill(main, [
    el("section", {},
      el("form", { class: "filters", id: "search", onsubmit: (event) => {
        event.preventDefault();
        if (search.value.trim()) location.hash = `#/tokens/${enc(search.value.trim())}`;
      } }, field("Token id", search), el("button", { type: "submit" }, "Open")),
      el("form", { class: "filters", id: "filters", onsubmit: (event) => {
        event.preventDefault();
        const chosen = new URLSearchParams();
        for (const name of FILTERS) if (inputs[name].value.trim()) chosen.set(name, inputs[name].value.trim());
        const target = `#/tokens?${chosen}`;
        if (location.hash === target) show();
        else location.hash = target;
      } }, FILTERS.map((name) => field(name, inputs[name])), el("button", { type: "submit" }, "Filter")),
      note),
    window.Plans.panel({ api, params, kick }),
    el("section", {}, results, pager),
  ]);
  let page = null;
  let prepared = false;
  return async () => {
    const drawn = await layout();
    const accepted = await tokenParams();
    if (!prepared) {
      prepared = true;
      const states = drawn.workflows[drawn.top].nodes.filter((node) => node.kind !== "start");
      fill(inputs.state, states.map((node) => el("option", { value: node.name }, node.label)));
      for (const name of FILTERS) inputs[name].value = params.get(name) || "";
      const missing = FILTERS.filter((name) => !accepted.has(name));
      for (const name of missing) if (name !== "state") inputs[name].disabled = true;
      note.textContent = missing.length
        ? `This control plane does not filter by ${missing.join(", ")}`
          + (missing.includes("state") ? "; the state is applied to the rows of each page." : ".")
        : "";
    }
    const query = new URLSearchParams();
    for (const name of FILTERS) if (params.get(name) && accepted.has(name)) query.set(name, params.get(name));
    const { data, next } = await api(page || `/tokens?${query}`);
    const state = params.get("state");
    const rows = state && !accepted.has("state") ? data.filter((token) => token.state === state) : data;
    results.replaceChildren(rows.length ? table(["Token", "State", "Status", "Visit", "Entered", "Parent"],
      rows.map((token) => el("tr", { "data-token": token.token },
        el("td", {}, tokenLink(token.token)), el("td", {}, stateName(token.state)),
        el("td", {}, statusBadge(token.status)), el("td", { class: "number" }, token.visit),
        el("td", {}, utc(token.entered_at)), el("td", {}, token.parent ? tokenLink(token.parent) : ""))),
      { class: "tokens" }) : nothing("No token matches."));
    // `fill`, not `replaceChildren`, which would show a missing button as the text "null".
    pager.replaceChildren();
    fill(pager, [
      page ? el("button", { type: "button", onclick: () => { page = null; kick(); } }, "First page") : null,
      next ? el("button", { type: "button", id: "next-page", onclick: () => { page = next; kick(); } }, "Next page") : null]);
  };
}

// a token's page

function acceptedEvents(token, graph) {
  if (token.status !== "active" && token.status !== "paused") return [];
  const flow = flowOf(token, graph);
  const events = (flow ? flow.transitions : [])
    .filter((move) => move.from === token.state && move.on && !BUILTIN_EVENTS.includes(move.on))
    .map((move) => move.on);
  return [...new Set(events)];
}

/* The workflow of the graph file that a token runs. */
function flowOf(token, graph) {
  return token.parent ? graph.workflows[workflowOf(token, graph.workflow)] : graph;
}

/* An example value of a JSON Schema: its default, first choice or constant, else a value
   of its type; an object lists every property. `$ref`s name the graph file's schemas. */
function example(schema, schemas, depth = 0) {
  if (!schema || depth > 8) return null;
  if (schema.$ref) return example(schemas[schema.$ref.split("/").pop()], schemas, depth + 1);
  if ("default" in schema) return schema.default;
  if ("const" in schema) return schema.const;
  if (schema.enum) return schema.enum[0];
  const choice = schema.anyOf || schema.oneOf;
  if (choice) return example(choice.find((one) => one.type !== "null") || choice[0], schemas, depth + 1);
  const type = Array.isArray(schema.type) ? schema.type.find((one) => one !== "null") : schema.type;
  const plain = { boolean: true, string: "", integer: 0, number: 0, array: [], null: null };
  if (type !== "object" && !schema.properties) return type in plain ? plain[type] : null;
  return Object.fromEntries(Object.entries(schema.properties || {})
    .map(([key, inner]) => [key, example(inner, schemas, depth + 1)]));
}

/* The placeholder of the payload field: an example made from the chosen event's payload
   schema, or a word that this event takes none. */
function payloadExample(token, graph, event) {
  const flow = flowOf(token, graph);
  const spec = event && flow && flow.events ? flow.events[event] : null;
  if (!spec || !spec.payload) return event ? `${event} takes no payload: leave this empty` : "";
  const schemas = { ...(graph.schemas || {}), ...((flow && flow.schemas) || {}) };
  const schema = typeof spec.payload === "string" ? schemas[spec.payload] : spec.payload;
  return compact(example(schema, schemas));
}

/* The kinds of entries about a task whose names do not start with `task_`. */
const TASK_KINDS = ["note", "retries_stopped"];

/* The tasks of a token and their attempts, as its history tells them. */
function tasksOf(history) {
  const tasks = new Map();
  for (const entry of history) {
    const data = entry.data || {};
    if (data.task === undefined || !(entry.kind.startsWith("task_") || TASK_KINDS.includes(entry.kind))) continue;
    if (!tasks.has(data.task)) tasks.set(data.task, { id: data.task, state: "", attempts: [], outcome: "", notes: 0 });
    const task = tasks.get(data.task);
    const outcomes = {
      task_queued: "queued", task_claimed: "claimed", task_done: "done", task_cancelled: "cancelled",
      task_waiting: "waiting outside", task_failed: `failed: ${data.error}${data.fingerprint ? ` [${data.fingerprint}]` : ""}`,
      retries_stopped: `not tried again: the same failure ${data.repeats} times with the same input`,
      task_retrying: `to be tried again (attempt ${data.attempt})`,
    };
    if (entry.kind === "task_queued") task.state = data.state;
    if (entry.kind === "task_claimed") task.attempts.push(`${data.attempt}: ${data.supervisor} at ${utc(entry.at)}`);
    if (entry.kind === "note") task.notes += 1;
    else task.outcome = outcomes[entry.kind] || task.outcome;
  }
  return [...tasks.values()];
}

/* The memory keys that the history says are set now, by state; the API shows no values. */
function memoryKeys(history) {
  const keys = new Map();
  for (const entry of history) {
    if (entry.kind !== "memory_set" && entry.kind !== "memory_deleted") continue;
    const { state, memory_key: key } = entry.data;
    keys.set(`${state}\u0000${key}`, { state, key, set: entry.kind === "memory_set", at: entry.at });
  }
  return [...keys.values()].filter((one) => one.set);
}

function mountToken(main, id) {
  const title = el("h1", {}, id);
  const facts = el("p", { id: "facts" });
  const spent = el("p", { id: "spent", hidden: true });
  const result = el("p", { id: "action-result", role: "status" });
  const picture = el("div");
  const context = el("pre", { id: "context" });
  const memory = el("div", { id: "memory" });
  const tasks = el("div", { id: "tasks" });
  const children = el("div", { id: "children" });
  const history = el("ol", { class: "timeline", id: "history" });
  const payload = el("textarea", { id: "payload", spellcheck: "false" });
  // The token as last read, for the example of the event chosen between two updates.
  let shownToken = null;
  const showExample = () => {
    if (shownToken) payload.placeholder = payloadExample(shownToken, known.graph, eventChoice.value);
  };
  const eventChoice = el("select", { id: "event", onchange: showExample });
  // Every button waits for the token to be read before it may be pressed.
  const button = (action, label, classes) => el("button", {
    type: "button", id: action, class: classes, disabled: true, onclick: () => steer(action) }, label);
  const buttons = { pause: button("pause", "Pause"), resume: button("resume", "Resume"),
    cancel: button("cancel", "Cancel", "danger") };
  const fire = el("button", { type: "button", id: "fire", disabled: true, onclick: () => fireEvent() }, "Fire");
  const say = (text, failed = false) => {
    result.textContent = text;
    result.className = failed ? "error" : "quiet";
  };
  document.title = `${id} · Stateous`;
  fill(main, [
    el("section", {}, title, facts, spent,
      el("div", { class: "actions" }, buttons.pause, buttons.resume, buttons.cancel,
        el("div", { class: "fire" }, el("label", {}, "Event", eventChoice),
          el("label", {}, "Payload (a JSON object, may be empty)", payload), fire)), result),
    el("section", {}, el("h2", {}, "Where it is"), picture),
    el("div", { class: "grid" },
      el("section", {}, el("h2", {}, "Context"), context),
      el("section", {}, el("h2", {}, "Memory keys"), memory)),
    el("section", {}, el("h2", {}, "Tasks and attempts"), tasks),
    el("section", {}, el("h2", {}, "Children"), children),
    el("section", {}, el("h2", {}, "History (times in UTC)"), history),
  ]);

  async function steer(action) {
    if (!confirm(`${action[0].toUpperCase()}${action.slice(1)} the token ${id}?`)) return;
    try {
      const { data } = await api(`/tokens/${enc(id)}/${action}`, { method: "POST" });
      say(`Done: the token is ${data.status} in ${stateName(data.state)}.`);
    } catch (error) {
      say(`Refused: ${error.message}`, true);
    }
    kick();
  }

  async function fireEvent() {
    const event = eventChoice.value;
    let body = {};
    if (payload.value.trim()) {
      try {
        body = { payload: JSON.parse(payload.value) };
      } catch (error) {
        say(`The payload is not JSON: ${error.message}`, true);
        return;
      }
    }
    if (!event || !confirm(`Fire ${event} at the token ${id}?`)) return;
    try {
      // One key per click: a request sent again after a secret was asked applies once.
      const key = { "Idempotency-Key": crypto.randomUUID() };
      const { data } = await api(`/tokens/${enc(id)}/events/${enc(event)}`, { method: "POST", body, headers: key });
      const token = data.token || data;
      say(`Done: the token is ${token.status} in ${stateName(token.state)}.`);
    } catch (error) {
      say(`Refused: ${error.message}`, true);
    }
    kick();
  }

  return async () => {
    let token;
    try {
      token = (await api(`/tokens/${enc(id)}`)).data;
    } catch (error) {
      if (error.status !== 404) throw error;
      facts.replaceChildren(el("span", { class: "error" }, error.message));
      return;
    }
    const [drawn, graph, entries, kids] = await Promise.all([layout(), graphFile(),
      api(`/tokens/${enc(id)}/history`), api(`/tokens?parent=${enc(id)}&limit=1000`)]);
    const flow = workflowOf(token, drawn.top);
    facts.replaceChildren(statusBadge(token.status), ` in ${stateName(token.state)}`,
      token.visit > 1 ? ` (visit ${token.visit})` : "", ` since ${utc(token.entered_at)} UTC`,
      token.waits_for ? `; its task ${token.waits_for}` : "",
      token.waits ? `; its task waits: ${token.waits}` : "",
      token.parent ? [", a child of ", tokenLink(token.parent)] : "");
    facts.dataset.status = token.status;
    // Only when the tree spent something or has a budget does the API give `spent`.
    spent.textContent = token.spent ? spentLine(token.spent) : "";
    spent.hidden = !token.spent;
    const live = token.status === "active" || token.status === "paused";
    buttons.pause.disabled = token.status !== "active" || Boolean(token.parent);
    buttons.resume.disabled = token.status !== "paused" || Boolean(token.parent);
    buttons.cancel.disabled = !live || Boolean(token.parent);
    const events = acceptedEvents(token, graph);
    if (events.join() !== [...eventChoice.options].map((option) => option.value).join()) {
      const chosen = eventChoice.value;
      eventChoice.replaceChildren(...events.map((event) => el("option", { value: event }, event)));
      if (events.includes(chosen)) eventChoice.value = chosen;
    }
    fire.disabled = events.length === 0;
    shownToken = token;
    showExample();
    picture.replaceChildren(drawn.workflows[flow]
      ? drawGraph(drawn.workflows[flow], { current: token.state }) : nothing(`workflow ${flow}`));
    context.textContent = JSON.stringify(token.context, null, 2);
    const keys = memoryKeys(entries.data);
    memory.replaceChildren(keys.length ? table(["Key", "State", "Written"], keys.map((one) =>
      el("tr", {}, el("td", {}, one.key), el("td", {}, one.state), el("td", {}, utc(one.at))))) :
      nothing("No memory key is set."),
    el("p", { class: "quiet note-line" }, "Only the keys show: the API gives no memory values, and the keys come from the history."));
    const work = tasksOf(entries.data);
    tasks.replaceChildren(work.length ? table(["Task", "State", "Attempts", "Now", "Notes"],
      work.map((task) => el("tr", {}, el("td", {}, task.id), el("td", {}, task.state),
        el("td", {}, task.attempts.map((line) => el("div", {}, line))), el("td", {}, task.outcome),
        el("td", { class: "number" }, task.notes)))) : nothing("No task yet."));
    children.replaceChildren(kids.data.length ? table(["Child", "State", "Status"], kids.data.map((kid) =>
      el("tr", {}, el("td", {}, tokenLink(kid.token)), el("td", {}, stateName(kid.state)),
        el("td", {}, statusBadge(kid.status))))) : nothing("No children."));
    history.replaceChildren(...entries.data.map((entry) => el("li", { class: `kind-${entry.kind}` },
      el("span", { class: "when" }, utc(entry.at)), el("span", { class: "seq" }, `#${entry.seq}`),
      el("span", { class: "sentence" }, sentence(entry)),
      entry.data && typeof entry.data.fingerprint === "string"
        ? el("span", { class: "fingerprint", title: "the same failure has the same fingerprint" },
          entry.data.fingerprint)
        : null)));
  };
}

// the views, read again every few seconds

let shown = 0;
let timer = null;
let again = null;

function kick() {
  if (again) again();
}

/* The view of the address, and the stream it follows: a token's own entries on its page. */
function viewOf(main) {
  const [path, query] = (location.hash.replace(/^#/, "") || "/").split("?");
  if (path.startsWith("/tokens/")) {
    const id = decoded(path.slice(8));
    if (id === null) return [mountBadLink(main, path.slice(8)), "stream"];
    return [mountToken(main, id), `stream?token=${enc(id)}`];
  }
  if (path === "/tokens") return [mountList(main, new URLSearchParams(query || "")), "stream"];
  document.title = "Stateous";
  return [mountOverview(main), "stream"];
}

/* A part of the address, decoded; null when it is no valid percent-encoding. */
function decoded(part) {
  try {
    return decodeURIComponent(part);
  } catch (error) {
    if (error instanceof URIError) return null;
    throw error;
  }
}

/* A token link whose id cannot be decoded (cut short, or not UTF-8): no token has it. */
function mountBadLink(main, part) {
  document.title = "Stateous";
  fill(main, [el("section", { id: "bad-link" }, el("h1", {}, "No such token"),
    el("p", { class: "error" }, `This is a bad link: "${part}" is not a token id that can be read `
      + "(its percent-encoding is broken), so no such token is shown."),
    el("p", {}, el("a", { href: "#/tokens" }, "List the tokens"), " or ",
      el("a", { href: "#/" }, "go to the overview"), "."))]);
  return async () => {};
}

let streaming = false;
let settling = null;
let stopStream = () => {};

/* Update the view soon after an entry arrives, once for a burst of them. */
function soon() {
  if (!settling) settling = setTimeout(() => { settling = null; kick(); }, STREAM_SETTLE_MS);
}

/* Read server-sent events from `path` while this view is shown; a control plane without
   `GET /stream` (404) leaves the view to polling. fetch, not EventSource, which cannot send
   the Authorization header; a refused secret is asked for by the polling, then retried. */
async function follow(generation, path) {
  while (generation === shown) {
    const controller = new AbortController();
    stopStream = () => controller.abort();
    try {
      const secret = sessionStorage.getItem(SECRET_KEY);
      const response = await fetch(new URL(path, BASE), {
        headers: secret ? { Authorization: `Bearer ${secret}` } : {},
        cache: "no-store", credentials: "omit", signal: controller.signal,
      });
      if (response.status === 404) return;
      if (response.ok && response.body) await readEvents(response.body);
    } catch (error) {
      if (controller.signal.aborted) return;
    } finally {
      setStreaming(false);
    }
    await new Promise((resolve) => setTimeout(resolve, STREAM_RETRY_MS));
  }
}

async function readEvents(body) {
  setStreaming(true);
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value.replace(/\r\n?/g, "\n");
    const events = buffer.split("\n\n");
    buffer = events.pop();
    // A comment line (`: keep-alive`) is no entry.
    if (events.some((event) => /^data:/m.test(event))) soon();
  }
}

function setStreaming(open) {
  streaming = open;
  $("updated").dataset.live = open ? "yes" : "no";
}

function show() {
  const generation = ++shown;
  clearTimeout(timer);
  stopStream();
  const main = $("view");
  main.replaceChildren();
  const [refresh, stream] = viewOf(main);
  // A kick while an update runs makes another one right after it, so no change is missed.
  let running = false;
  let pending = false;
  const loop = async () => {
    if (generation !== shown) return;
    if (running) {
      pending = true;
      return;
    }
    clearTimeout(timer);
    running = true;
    pending = false;
    try {
      if (!document.hidden) {
        await refresh();
        if (generation === shown) {
          $("problem").hidden = true;
          const how = streaming ? "live, " : "";
          $("updated").textContent = `${how}updated ${clock(new Date())} UTC`;
        }
      }
    } catch (error) {
      $("problem").textContent = `The last update failed: ${error.message}`;
      $("problem").hidden = false;
    } finally {
      running = false;
    }
    const wait = pending ? 0 : streaming ? STREAM_POLL_MS : POLL_MS;
    if (generation === shown) timer = setTimeout(loop, wait);
  };
  again = loop;
  loop();
  follow(generation, stream);
}

$("secret-dialog").addEventListener("cancel", (event) => event.preventDefault());
window.addEventListener("hashchange", show);
/* A page kept in the back/forward cache keeps its open requests: its stream would hold one
   of the few connections a browser gives a host (six over HTTP/1.1), and the seventh page
   of this control plane would wait until the cache let one go. So a page that is put
   away stops its updates and its stream, and starts them again when it is shown. */
window.addEventListener("pagehide", (event) => {
  if (!event.persisted) return;
  shown += 1;
  clearTimeout(timer);
  stopStream();
});
window.addEventListener("pageshow", (event) => { if (event.persisted) show(); });
layout().then((drawn) => { $("workflow-name").textContent = drawn.top; }, () => {});
show();
