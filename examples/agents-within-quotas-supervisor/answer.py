"""The `answer` state of `agents`: ask the provider; a 429 parks the account's key.

The provider's address is `PROVIDER_URL` (by default the stand-in of
examples/agents-within-quotas/provider.py). A 429 raises `QuotaExhausted` with the
provider's `Retry-After`: the control plane gives the attempt back and lets no task of
this account in until then; one task then probes the provider, and the rest follow in
growing cohorts. An answer says what it cost, which the routine records with
`ctx.spend`: a `spent` row of the token's history, counted against its budget.
"""

import json
import os
import urllib.error
import urllib.request

from stateous import QuotaExhausted, on_state

from contract import AskContext, events, states

PROVIDER = os.environ.get("PROVIDER_URL", "http://127.0.0.1:8099")


@on_state(states.answer)
def answer(ctx: AskContext) -> events.answered:
    body = json.dumps({"account": ctx["account"], "prompt": ctx["prompt"]}).encode()
    request = urllib.request.Request(
        f"{PROVIDER}/v1/answer", body, {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            answered = json.loads(response.read())
    except urllib.error.HTTPError as ex:
        if ex.code != 429:
            raise
        wait = float(ex.headers.get("Retry-After") or 60)
        raise QuotaExhausted(
            resource="llm",
            retry_after=wait,
            reason=f"429 from the provider: {ex.read().decode()[:200]}",
        ) from None
    ctx.spend(**answered["cost"])
    ctx.note(answered["text"][:200])
    return events.answered
