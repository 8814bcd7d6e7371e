"""The `draft` state of the orders demo: submit the order for review."""

from stateous import on_state

from contract import ItemContext, events, states


@on_state(states.draft)
def draft(ctx: ItemContext) -> events.submitted:
    if ctx.visit > 1:
        ctx.note(f"reworked {ctx['title']!r} after the review")
    return events.submitted()
