"""The Restate side of bench_peers.py: a service of two handlers, served by hypercorn.

It runs in the Restate folder's own venv (`bench/.peers/restate/venv`), never in the
project's, and imports nothing of Stateous. `one` runs one durable step, `five` runs
five one after the other, each a `ctx.run` whose action returns at once, as the
Stateous routines and the DBOS steps of the bench do. The first step of a run named
`pick-...` writes the moment it began to the file named by `PEERS_STAMPS`, which is
how the bench measures a pickup.
Run: hypercorn peers_restate_service:app --bind 127.0.0.1:PORT (h2c, as Restate calls).
"""

from __future__ import annotations

import os
import time

import restate

STAMPS = os.environ.get("PEERS_STAMPS", "")

bench = restate.Service("Bench")


def step(run: str, number: int) -> int:
    """Do a step's work, which is nothing; note when a pickup run's first step began."""
    if number == 1 and run.startswith("pick"):
        with open(STAMPS, "a") as stamps:
            stamps.write(f"{run} {time.time():.6f}\n")
    return number


@bench.handler()
async def one(ctx: restate.Context, run: str) -> str:
    await ctx.run_typed("step-1", step, restate.RunOptions(), run, 1)
    return run


@bench.handler()
async def five(ctx: restate.Context, run: str) -> str:
    for number in range(1, 6):
        await ctx.run_typed(f"step-{number}", step, restate.RunOptions(), run, number)
    return run


app = restate.app(services=[bench])
