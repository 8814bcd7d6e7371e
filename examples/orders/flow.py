"""The orders workflow. Check it and write its graph file with:

    stateous compile examples/orders/flow.py

A token starts in `draft`; `submitted` sends it to `review`; the review's verdict
either ends the token or sends it back to `draft`.
"""

from stateous import END, START, Workflow

from schemas import Item, Verdict

# Every token of this workflow carries an Item as its context.
flow = Workflow("orders", context=Item)

# States: where a token can be. Each one gets a routine in the supervisor.
# Optional: timeout="6h" (then the event `timeout`), retries=2 (more attempts).
draft = flow.state("draft")
review = flow.state("review")

# Events: the outcomes that move a token. A payload model is optional.
submitted = flow.event("submitted")
reviewed = flow.event("reviewed", payload=Verdict)

# Transitions: where each event takes a token.
flow.transition(START, draft)
flow.transition(draft, review, on=submitted)
# A guard (when=) picks the transition from the data; otherwise=True is the fallback.
flow.transition(review, END, on=reviewed, when="payload.approved == true")
flow.transition(review, draft, on=reviewed, otherwise=True)
