"""The `coding` state of `sdlc`: a coding agent, run through PHD (the `phd` extra).

Install it with `pip install "stateous[phd]"`. Without it, each attempt fails with
the import error in the token's history; remove this file to do the coding
yourself and report `done` with `stateous token fire TICKET-1 done`.
"""

import importlib

from stateous import on_state

from contract import TicketContext, events, states


@on_state(states.coding)
async def coding(ctx: TicketContext) -> events.done | events.stuck:
    phd = importlib.import_module("phd")
    spec = phd.Spec(
        harness="claude",
        model="sonnet",
        stack=phd.Stack.load("stacks/dev"),
        cwd=ctx["repo"],
        credentials=phd.Credentials.from_host("claude"),
        output_schema=states.coding.outcome_schema(),
        idle_timeout_s=900,
    )
    inputs = phd.Inputs(msg=f"Make the tests of {ctx['repo']} pass")
    # The session id is kept in memory at once, so a retry after a crash resumes it.
    async with phd.Dispatcher(spec).run(inputs, session_id=ctx.memory.get("dev")) as handle:
        async for event in handle.events():
            if handle.session_id and "dev" not in ctx.memory:
                ctx.memory["dev"] = handle.session_id
            ctx.note(event.summary)
        result = await handle.wait()
    if result.status != "succeeded":
        if result.error and result.error.kind == "session" and "dev" in ctx.memory:
            del ctx.memory["dev"]
        raise RuntimeError(f"the agent did not succeed: {result.error}")
    return states.coding.outcome(result.structured_output)
