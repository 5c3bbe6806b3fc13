"""A long chain (deeper than Python's recursion limit) goes through the whole tool: ONNX ->
MSCGraph -> JSON -> graph -> text, prototxt, Relax and torch codegen, relax.build, the VM; and
equal calls at different sites share one compiled kernel. No traversal may recurse in the
graph depth. Figures at 1k to 100k joints come from benchmarks/scaling.py."""

import sys

import numpy as np
import pytest
from onnx import TensorProto, helper

from msc import relax
from msc.codegen import to_relax, to_torch
from msc.frontends import translate
from msc.graph import MSCGraph

DEPTH = max(2 * sys.getrecursionlimit(), 2500)


def chain_model(depth: int):
    """x -> Neg -> Relu -> Neg -> ... (``depth`` nodes) on a [1, 4] float input."""
    nodes, prev = [], "x"
    for i in range(depth):
        nodes.append(helper.make_node("Relu" if i % 2 else "Neg", [prev], [f"t{i}"],
                                      name=f"n{i}"))
        prev = f"t{i}"
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [1, 4])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def chain_reference(x: np.ndarray, depth: int) -> np.ndarray:
    for i in range(depth):
        x = np.maximum(x, 0) if i % 2 else -x
    return x


@pytest.fixture(scope="module")
def chain():
    return translate.from_onnx(chain_model(DEPTH))


def test_a_deep_chain_serializes_and_prints(chain, tmp_path):
    graph, _ = chain
    assert graph.inspect()["nodes"]["total"] == DEPTH + 1
    text = graph.to_json()
    assert MSCGraph.from_json(text).to_json() == text
    assert str(graph).count("\n") >= DEPTH
    assert graph.visualize(str(tmp_path / "g.prototxt")).count("layer {") == DEPTH + 1


def test_a_deep_chain_codegens_builds_and_runs(chain, tmp_path):
    graph, weights = chain
    mod = to_relax(graph, weights, build_folder=str(tmp_path / "relax"))
    model = to_torch(graph, weights, build_folder=str(tmp_path / "torch"))
    ex = relax.build(mod, target="llvm")
    x = np.random.default_rng(0).standard_normal((1, 4)).astype("float32")
    got = relax.VirtualMachine(ex, relax.cpu())["main"](x).numpy()
    np.testing.assert_array_equal(got, chain_reference(x, DEPTH))
    import torch

    np.testing.assert_array_equal(model(torch.from_numpy(x)).detach().numpy(), got)


def test_equal_calls_at_different_sites_share_one_compiled_kernel():
    from msc.backend.lowering import compile as tir_compile

    graph, weights = translate.from_onnx(chain_model(40))
    before = len(tir_compile._memo)
    ex = relax.build(to_relax(graph, weights), target="llvm", legalize="prefer")
    assert ex.stats["kernels"]["tir"] >= 20  # the 20 Negs run compiled TIR ...
    assert len(tir_compile._memo) - before <= 1  # ... from one kernel
