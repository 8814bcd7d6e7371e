"""A state's contract digest: equal for the same state and models, whichever graph file."""

from __future__ import annotations

from stateous.compiler.compile import compile_workflow
from stateous.model import contracts
from tests.supervisor.support import orders
from tests.supervisor.test_graph_change import Other, escalating


def test_a_digest_is_the_same_across_graph_files_that_keep_the_state_as_it_was() -> None:
    one, changed = compile_workflow(orders()), compile_workflow(escalating())
    assert contracts.digest(one, "draft") == contracts.digest(changed, "draft")
    assert contracts.digest(one, "review") != contracts.digest(changed, "review")
    assert contracts.digest(one, "draft") != contracts.digest(one, "review")
    assert contracts.same(one, changed, "draft") and not contracts.same(one, changed, "review")


def test_another_context_model_changes_every_state_and_an_unknown_state_has_none() -> None:
    one, other = compile_workflow(orders()), compile_workflow(orders(context=Other))
    assert contracts.digest(one, "draft") != contracts.digest(other, "draft")
    assert contracts.digest(one, "nowhere") is None
    assert not contracts.same(one, one, "nowhere")
