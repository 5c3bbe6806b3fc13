"""The codegen tests' own helpers (tests/helpers/codegen.py) do what they say."""

import numpy as np

from tests.helpers.codegen import graph_of_call


def test_graph_of_call_puts_weights_under_their_roles():
    x, w = np.ones((1, 2, 5, 5), "float32"), np.ones((3, 2, 3, 3), "float32")
    graph, inputs, weights, expected = graph_of_call("nn.conv2d", [x, w], {"padding": 1})
    conv = graph.find_node("conv2d")
    assert list(conv.weights) == ["weight"] and len(inputs) == 1 and "const" in weights
    assert conv.attrs["padding"] == "1,1,1,1" and expected[0].shape == (1, 3, 5, 5)


def test_graph_of_call_keeps_scalar_arguments_as_attrs():
    graph, inputs, _, _ = graph_of_call("clip", [np.ones((2,), "float32"), -0.5, 0.5], {})
    assert graph.find_node("clip").attrs["min"] == "-0.500000" and len(inputs) == 1
