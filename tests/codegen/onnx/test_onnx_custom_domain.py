"""to_onnx(..., custom_domain=...): joints with no single ONNX operator stay one node of the
custom domain, backed by a model-local FunctionProto that onnxruntime inlines (outputs equal
torch eager, rtol/atol 1e-5); joints written alike share one function; a joint with no ONNX
expression at all still fails naming it. Also the float floor Mod before opset 28 (IEEE
infinities, against numpy)."""

import numpy as np
import onnx
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from msc.codegen import to_onnx
from msc.errors import UnsupportedOpError
from msc.frontends.torch.api import from_torch
from tests.helpers.codegen import graph_of_call
from tests.helpers.numpy_cases import CASES
from tests.helpers.onnx_conformance import run_onnxruntime

pytest.importorskip("onnxruntime")


class TwoGelus(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x, y):
        return F.gelu(self.a(x)) + F.gelu(self.b(y)) * F.silu(x)


@pytest.fixture(scope="module")
def two_gelus():
    torch.manual_seed(0)
    model = TwoGelus().eval()
    graph, weights = from_torch(model, [(["b", 4], "float32"), (["b", 4], "float32")])
    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal((3, 4)).astype("float32") for _ in range(2))
    with torch.no_grad():
        want = model(torch.from_numpy(x), torch.from_numpy(y)).numpy()
    return graph, weights, [x, y], want


@pytest.mark.parametrize("domain", [True, "com.example"])
def test_custom_domain_nodes_run_through_their_functions(two_gelus, domain):
    graph, weights, inputs, want = two_gelus
    model = to_onnx(graph, weights, opset=13, custom_domain=domain)  # 13: Gelu is Erf math
    name = "ai.msc" if domain is True else domain
    custom = [n for n in model.graph.node if n.domain == name]
    assert sorted(n.op_type for n in custom) == ["nn_gelu", "nn_gelu", "nn_silu"]
    assert sorted(f.name for f in model.functions) == ["nn_gelu", "nn_silu"]  # gelus share one
    assert all(f.domain == name for f in model.functions)
    assert {(o.domain, o.version) for o in model.opset_import} == {("", 13), (name, 1)}
    onnx.checker.check_model(model, full_check=True)
    np.testing.assert_allclose(run_onnxruntime(model, inputs)[0], want, rtol=1e-5, atol=1e-5)
    plain = to_onnx(graph, weights, opset=13)
    assert not plain.functions and len(plain.graph.node) > len(model.graph.node)


def test_custom_domain_keeps_weights_as_initializers(two_gelus):
    graph, weights, _, _ = two_gelus
    model = to_onnx(graph, weights, custom_domain=True)
    assert {tuple(t.dims) for t in model.graph.initializer} >= {(4, 4), (4,)}
    assert all(n.op_type != "Constant" or n.attribute[0].t.dims != [4, 4]
               for f in model.functions for n in f.node)


def test_joint_without_onnx_expression_names_it_even_with_custom_domain():
    case = next(c for c in CASES if c.op == "nn.attention_var_len")
    graph, _, weights, _ = graph_of_call(case.op, case.args, case.kwargs)
    with pytest.raises(UnsupportedOpError) as err:
        to_onnx(graph, weights, custom_domain=True)
    assert "custom_domain" in str(err.value)
    [item] = err.value.items
    assert item["op"] == "nn.attention_var_len" and item["node"] in {
        n.name for n in graph.get_nodes()}


@pytest.mark.parametrize("opset", [13, 21, 28])
def test_float_floor_mod_keeps_ieee_infinities(opset):
    a = np.array([0, -3, 3, -1, 1, 5.5, -5.5, np.inf, 1, np.nan], np.float32)
    b = np.array([-2, np.inf, np.inf, -np.inf, -np.inf, 2, 2, 2, 0, 2], np.float32)
    graph, inputs, weights, _ = graph_of_call("floor_mod", [a, b], {})
    got = run_onnxruntime(to_onnx(graph, weights, opset=opset), inputs)[0]
    np.testing.assert_allclose(got, np.mod(a, b), rtol=1e-6)
