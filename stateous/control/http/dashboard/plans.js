/* The token list's plans: from the list's filters, make a plan of a bulk action
   (`POST /plans`), show its count, its tokens and its id, and act on them only when the
   user presses Apply (`POST /plans/{id}/apply`, in parts, each token once). Discard leaves
   the plan unapplied, so nothing changes. It asks the API only through the `api` it is
   given, so the secret and the headers of every request stay the page's own. */
window.Plans = (() => {
"use strict";

const { el, fill } = window.Draw;
/* Every action a plan can take, in the one place the page names them: its label, whether
   it is drawn as dangerous, and the option it takes (the body field of both the plan and
   its apply). A new action of `POST /plans` is one more line here. */
const ACTIONS = {
  pause: { label: "Pause" },
  resume: { label: "Resume" },
  cancel: { label: "Cancel", danger: true },
  retry: { label: "Retry", option: { field: "from", label: "From state", hint: "empty: each token's last state" } },
  migrate: { label: "Migrate", option: { field: "to", label: "To graph", hint: "empty: the graph served now" } },
};
/* The filters of the token list that a plan takes (not `limit`: a plan holds every token). */
const FILTERS = ["status", "state", "parent", "checksum", "since", "until"];
/* How many of a plan's tokens are listed; the count covers them all. */
const SHOWN = 50;
/* How many tokens one apply request acts on: a long plan goes in parts, its progress shown. */
const PART = 100;

/* The `where` of a plan from the list's filters, like `status=failed state=review`. */
function whereOf(params) {
  return FILTERS.filter((name) => params.get(name)).map((name) => `${name}=${params.get(name)}`).join(" ");
}

function counted(plan) {
  const counts = { done: 0, refused: 0, pending: 0 };
  for (const token of plan.tokens) counts[token.outcome] = (counts[token.outcome] || 0) + 1;
  return `${counts.done} done, ${counts.refused} refused, ${counts.pending} pending`;
}

/* The plan's tokens, the refused first once it was applied, so that the reasons show. */
function tokenTable(plan) {
  const order = (token) => (token.outcome === "refused" ? 0 : 1);
  const tokens = [...plan.tokens].sort((one, other) => order(one) - order(other));
  const rows = tokens.slice(0, SHOWN).map((token) => el("tr", { "data-token": token.token },
    el("td", {}, token.token), el("td", {}, token.outcome), el("td", {}, token.reason || "")));
  return el("div", { class: "scroll" }, el("table", { class: "plan-tokens" },
    el("thead", {}, el("tr", {}, el("th", {}, "Token"), el("th", {}, "Outcome"), el("th", {}, "Reason"))),
    el("tbody", {}, rows)));
}

/* The panel under the list's filters; `kick` reads the list again after an apply. */
function panel({ api, params, kick }) {
  const where = whereOf(params);
  const choice = el("select", { id: "plan-action", name: "action" },
    Object.entries(ACTIONS).map(([action, spec]) => el("option", { value: action }, spec.label)));
  const option = el("input", { id: "plan-option", name: "option" });
  const optionName = el("span");
  const optionLabel = el("label", { id: "plan-option-label" }, optionName, option);
  const make = el("button", { type: "submit", id: "plan-make", disabled: !where }, "Make a plan");
  const shown = el("div", { id: "plan-shown" });
  const result = el("p", { id: "plan-result", role: "status" });
  const say = (text, failed = false) => {
    result.textContent = text;
    result.className = failed ? "error" : "quiet";
  };
  const showOption = () => {
    const spec = ACTIONS[choice.value].option;
    optionLabel.hidden = !spec;
    optionName.textContent = spec ? spec.label : "";
    option.placeholder = spec ? spec.hint : "";
  };
  choice.addEventListener("change", showOption);
  showOption();

  /* The body of the plan and of each apply: the action, and its option when given. */
  const bodyOf = (action, value) => {
    const spec = ACTIONS[action].option;
    return spec && value ? { action, [spec.field]: value } : { action };
  };

  function showPlan(plan, body, applied) {
    const count = plan.tokens.length;
    const summary = el("p", { id: "plan-summary", "data-plan": plan.plan },
      `Plan ${plan.plan}: ${plan.action} ${count} token(s) where ${whereOf(new URLSearchParams(plan.where))}.`,
      applied ? "" : count ? " Nothing is done until you apply it." : " No token matches: there is nothing to apply.");
    const more = count > SHOWN ? el("p", { id: "plan-more", class: "quiet" }, `and ${count - SHOWN} more`) : null;
    const button = (id, label, onclick, classes) => el("button", { type: "button", id, class: classes, onclick }, label);
    const danger = ACTIONS[plan.action] && ACTIONS[plan.action].danger ? "danger" : null;
    const buttons = applied
      ? [button("plan-close", "Close", () => { shown.replaceChildren(); say(""); })]
      : [count ? button("plan-apply", `Apply: ${plan.action} ${count} token(s)`, () => apply(plan, body), danger) : null,
        button("plan-discard", "Discard", () => {
          shown.replaceChildren();
          say(`Plan ${plan.plan} was discarded: no token was touched.`);
        })];
    shown.replaceChildren();
    fill(shown, [summary, tokenTable(plan), more, fill(el("div", { class: "actions" }), buttons)]);
  }

  async function makePlan(event) {
    event.preventDefault();
    const body = bodyOf(choice.value, option.value.trim());
    make.disabled = true;
    say("");
    try {
      const { data } = await api("/plans", { method: "POST", body: { ...body, where } });
      showPlan(data, body, false);
    } catch (error) {
      shown.replaceChildren();
      say(`Refused: ${error.message}`, true);
    } finally {
      make.disabled = false;
    }
  }

  /* Act on the plan's pending tokens a part at a time; an apply cut short can be pressed
     again and goes on with the tokens not acted on yet. */
  async function apply(plan, body) {
    for (const button of shown.querySelectorAll("button")) button.disabled = true;
    let latest = plan;
    try {
      for (let before = Infinity; latest.pending > 0 && latest.pending < before;) {
        before = latest.pending;
        say(`Applying: ${latest.tokens.length - latest.pending} of ${latest.tokens.length} token(s) acted on…`);
        latest = (await api(`/plans/${encodeURIComponent(plan.plan)}/apply`,
          { method: "POST", body: { ...body, limit: PART } })).data;
      }
      showPlan(latest, body, true);
      say(`Applied: ${counted(latest)}.`);
    } catch (error) {
      for (const button of shown.querySelectorAll("button")) button.disabled = false;
      say(`The apply stopped: ${error.message}. Apply again goes on with the tokens not acted on yet.`, true);
    }
    kick();
  }

  return el("section", { id: "plan", "aria-labelledby": "plan-title" },
    el("h2", { id: "plan-title" }, "Act on every token these filters select"),
    el("p", { id: "plan-where", class: "quiet" }, where
      ? `Filters: ${where}`
      : "Filter the list first: a plan acts on the tokens that its filters select."),
    el("form", { class: "actions", id: "plan-form", onsubmit: makePlan },
      el("label", {}, "Action", choice), optionLabel, make),
    shown, result);
}

return { panel };
})();
