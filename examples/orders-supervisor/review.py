"""The `review` state of the orders demo: send a rework order back once, approve the rest."""

from stateous import on_state

from contract import ItemContext, Verdict, events, states


@on_state(states.review)
async def review(ctx: ItemContext) -> events.reviewed:
    if "rework" in ctx["title"] and ctx.visit == 1:
        return events.reviewed(Verdict(approved=False, note="needs another pass"))
    return events.reviewed(Verdict(approved=True))
