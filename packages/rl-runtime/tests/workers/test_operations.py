"""The node-operation registry and binding a graph's operation names."""

from __future__ import annotations

import pytest

from rl_core import DuplicateNameError
from rl_core.graph import TaskGraph
from rl_runtime.workers import NODE_OPERATIONS, bind_operations, register_operation
from rl_runtime.workers._errors import UnknownOperationError

from ._fakes import chain_graph, fake_generate, fake_scale, node


def test_fakes_are_registered_and_bound_in_topological_order() -> None:
    assert NODE_OPERATIONS["fake_generate"] is fake_generate
    bound = bind_operations(chain_graph(2, 2))
    assert list(bound) == ["generate", "scale", "check"]
    assert bound["scale"] is fake_scale


def test_registering_a_name_twice_is_refused() -> None:
    with pytest.raises(DuplicateNameError, match=r"node operation 'fake_generate' is already registered"):
        register_operation("fake_generate")(fake_scale)


def test_unknown_operation_names_node_operation_and_registered_names() -> None:
    graph = TaskGraph("g", [node("gen", "fake_generate"), node("rate", "fake_scael", ("gen",))])
    with pytest.raises(
        UnknownOperationError,
        match=r"graph 'g': node 'rate' uses operation 'fake_scael' \(did you mean 'fake_scale'\?\).*"
        r"registered operations: .*fake_generate.*fake_scale",
    ):
        bind_operations(graph)


def test_binding_against_an_explicit_registry() -> None:
    with pytest.raises(UnknownOperationError, match=r"registered operations: none"):
        bind_operations(chain_graph(1, 1), {})
