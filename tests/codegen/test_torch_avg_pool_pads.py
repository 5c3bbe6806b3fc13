"""to_torch of an avg pool with asymmetric padding that excludes the pad (ONNX's
AveragePool with pads 0,0,1,1 in inception_v1): the padded zeros must not count."""

import numpy as np
import pytest

from msc.codegen import to_torch
from msc.relax.op import load_facts
from tests.helpers.codegen import graph_of_call, torch_run


@pytest.mark.parametrize("ceil_mode", [False, True])
def test_avg_pool_asymmetric_pads_exclude_the_padding(ceil_mode):
    load_facts("numpy")
    x = np.random.default_rng(0).standard_normal((1, 2, 6, 6)).astype("float32")
    graph, inputs, weights, expected = graph_of_call(
        "nn.avg_pool2d", [x], {"pool_size": (3, 3), "strides": (2, 2), "padding": (0, 0, 1, 1),
                               "ceil_mode": ceil_mode, "count_include_pad": False})
    got = torch_run(to_torch(graph, weights), inputs)
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-5, atol=1e-6)
