"""Migration: a live token, with its children, moves to another graph file the database keeps.

A top token moves with its tree: itself, its live descendants, and the ended children of
the parallel state it is in now (so that a retry of one of them goes by its parent's graph,
as every child does). Each live token of the tree must find its state in the target graph
with the same contract (`contracts.same`), or, in a parallel state, the same fork
(`contracts.fork`: the same child workflows, join, inputs and context model); the first that
does not refuses the whole tree, naming it. Every check runs before anything is written, so
a refusal, like a dry run, changes nothing. Then each token of the tree is pinned to the
target graph with one `migrated` ledger row, and moves by that graph's rules from then on.

Its task, queued, claimed or waiting, keeps going: the state's contract is the same. Its
timeout keeps counting from when it entered its state, less the time it spent paused, for
as long as the target graph says; a routine's timers and a planned retry stay as they are.
Everything runs inside one transaction per tree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stateous.control import pauses
from stateous.control.errors import ChildToken, ContractChanged, StateGone, TokenNotActive
from stateous.control.graph import Graph
from stateous.control.store import TokenRow, Tx
from stateous.model import contracts
from stateous.model.durations import parse_duration
from stateous.model.vocabulary import LIVE_TOKEN, Kind, TimerKind
from stateous.model.wire import MigrationView, MovedToken

if TYPE_CHECKING:
    from stateous.control.engine import Engine


def seconds(timeout: str | None) -> float | None:
    return None if timeout is None else parse_duration(timeout)


class Migrations:
    """Moving token trees from graph to graph, over one engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def migrate(
        self, token: str, to: str | None = None, *, dry_run: bool = False, by: str | None = None
    ) -> MigrationView:
        """Move a live top token and its tree to the graph `to` (the served one when None), in
        one transaction; a dry run checks and answers the same, and writes nothing."""

        def operation(tx: Tx) -> MigrationView:
            tx.by = by
            return self.migrate_in(tx, token, to, dry_run=dry_run)

        return self.engine.store.write(operation)

    def migrate_in(
        self, tx: Tx, token: str, to: str | None, *, dry_run: bool = False
    ) -> MigrationView:
        """The migration of `token`, inside a transaction opened by the caller (a plan's
        apply marks the token in the same one)."""
        engine = self.engine
        target = engine.graphs.kept(engine.graph.checksum if to is None else to, tx)
        top = engine.token_row(tx, token)
        if top.parent is not None:
            raise ChildToken(
                f"token {token!r} is a child of {top.parent!r}; migrate its top token, which "
                "moves with its children"
            )
        if top.status not in LIVE_TOKEN:
            raise TokenNotActive(
                f"token {token!r} is {top.status}; only an active or paused token can be migrated"
            )
        was, source = top.checksum, engine.graphs.of(tx, top.checksum)
        members = [] if source.checksum == target.checksum else self.tree(tx, top)
        for member in members:
            if member.status in LIVE_TOKEN:
                self.fits(member, top, source, target)
        if not dry_run:
            for member in members:
                self.pin(tx, member, source, target)
        return MigrationView(
            token=token,
            source=was,
            to=target.checksum,
            dry_run=dry_run,
            moved=[
                MovedToken(token=row.token, state=row.state, status=row.status) for row in members
            ],
        )

    def tree(self, tx: Tx, top: TokenRow) -> list[TokenRow]:
        """The top token, its live descendants and every child of the parallel state that a
        live one is in now, parents first."""
        members = [top]
        for member in members:
            if member.status not in LIVE_TOKEN:
                continue
            spec = self.engine.moves.flow(tx, member).spec.states.get(member.state)
            if spec is None or not spec.parallel:
                continue
            prefix = f"{member.token}.{member.state}.{member.visit}."
            members.extend(row for row in tx.children(member.token) if row.token.startswith(prefix))
        return members

    @staticmethod
    def fits(member: TokenRow, top: TokenRow, source: Graph, target: Graph) -> None:
        """Refuse the tree when the live `member`'s state is not in `target`, or has another
        contract (a parallel state: another fork) there."""
        name = source.flows[member.workflow or source.name].claim_name(member.state)
        there = target.flows.get(member.workflow or target.name)
        said = f"token {member.token!r} is in {name!r}"
        if member is not top:
            said = f"token {top.token!r} moves with its children, and {said}"
        if there is None or member.state not in there.spec.states:
            raise StateGone(f"{said}, which the graph {target.checksum} does not have")
        fork = contracts.fork(source.document, name)
        here = source.flows[member.workflow or source.name].state(member.state)
        if here.uses != there.state(member.state).uses:
            # Its task took (or waits for) the slots its state uses here: the same ones, or
            # they would never be given back.
            raise ContractChanged(
                f"{said}, which uses other resources in the graph {target.checksum}"
            )
        if fork is None:
            if not contracts.same(source.document, target.document, name):
                raise ContractChanged(
                    f"{said}, whose contract differs in the graph {target.checksum} (its "
                    "context model, events or payload models)"
                )
        elif fork != contracts.fork(target.document, name):
            raise ContractChanged(
                f"{said}, a parallel state that differs in the graph {target.checksum} (its "
                "child workflows, join, inputs or context model)"
            )

    def pin(self, tx: Tx, member: TokenRow, source: Graph, target: Graph) -> None:
        """Move one token of the tree to `target`: its `migrated` row (naming who asked, as
        each row of the tree does), its timeout by `target`'s state, its graph."""
        data: dict[str, Any] = {"from": member.checksum, "to": target.checksum}
        if tx.by:
            data["by"] = tx.by
        tx.record(member.token, Kind.MIGRATED, data)
        if member.status in LIVE_TOKEN:
            self.retime(tx, member, source, target)
        member.checksum = target.checksum
        tx.save_token(member)

    def retime(self, tx: Tx, member: TokenRow, source: Graph, target: Graph) -> None:
        """Make the pending timeout of the member's visit the one `target` gives its state,
        still counted from when the token entered it, less the time it spent paused."""
        flow = member.workflow
        was = seconds(source.flows[flow or source.name].state(member.state).timeout)
        now = seconds(target.flows[flow or target.name].state(member.state).timeout)
        if was == now:
            return
        if now is None:
            tx.cancel_timers(member.token, TimerKind.TIMEOUT)
        elif was is None:
            due_in = now - pauses.in_state(tx, member)
            self.engine.moves.set_timer(tx, member, "timeout", None, due_in, TimerKind.TIMEOUT)
        else:
            tx.shift_timers(member.token, now - was, TimerKind.TIMEOUT)
