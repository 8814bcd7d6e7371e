"""The agents workflow: each token asks a language model one question, through a provider
account that a quota limits. Check it and write its graph file with:

    stateous compile examples/agents-within-quotas/flow.py

`answer` takes one slot of the token's account of `llm` (4 calls in flight per account).
When the provider answers 429, the routine raises `QuotaExhausted`: the account's key
parks until the provider's reset, and no attempt is spent. Three failures alike in a row
on one account trip its breaker, so a broken account does not burn the night.

Each token may spend 1 usd (`budget=`); before each call `answer` sets 0.01 usd aside
(`reserve=`), and the routine records what the provider says the call cost (`ctx.spend`).
"""

from stateous import END, START, Workflow

from schemas import Ask

# Each token, with any children it had, may spend 1 usd; the ledger warns at 80 %.
flow = Workflow("agents", context=Ask, budget={"usd": 1}, budget_warn=0.8)

# 4 calls in flight per account; 3 failed attempts alike in a row close the account.
flow.resource("llm", slots=4, breaker=3)

# A call is granted only when 0.01 usd fits what is left of the budget.
answer = flow.state("answer", uses={"llm": "ctx['account']"}, retries=2, reserve={"usd": 0.01})
answered = flow.event("answered")

flow.transition(START, answer)
flow.transition(answer, END, on=answered)
