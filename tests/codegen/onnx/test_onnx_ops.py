"""Every op of the table through the ONNX codegen: one-joint graph -> to_onnx -> onnxruntime
-> the op's numpy reference (the cases of test_numpy_ref; float32 rtol/atol 1e-5, looser only
where the case itself is), and the ops with no ONNX form fail with an UnsupportedOpError that
names the joint and the op."""

import numpy as np
import pytest

from msc.codegen import to_onnx
from msc.errors import UnsupportedOpError
from msc.relax.op.registry import OPS
from tests.helpers.codegen import assert_outputs, graph_of_call
from tests.helpers.numpy_cases import CASES
from tests.helpers.onnx_conformance import run_onnxruntime

pytest.importorskip("onnxruntime")

# Case -> why the ONNX codegen refuses it (the op has no ONNX form, or not in this form).
CASE_GAPS = {
    "nn.attention_var_len": "packed variable-length sequences",
}
OPSET = {"cumprod": 26, "reinterpret": 26}  # CumProd and BitCast came in opset 26
SHAPE_VALUES = {"shape_of", "tensor_to_shape"}  # a shape in Relax, an int64 tensor in ONNX


def _cases(want_gaps: bool):
    return [pytest.param(c, id=c.id) for c in CASES if (c.id in CASE_GAPS) == want_gaps]


@pytest.mark.parametrize("case", _cases(False))
def test_op_runs_in_onnxruntime(case):
    graph, inputs, weights, expected = graph_of_call(case.op, case.args, case.kwargs)
    got = run_onnxruntime(to_onnx(graph, weights, opset=OPSET.get(case.op)), inputs)
    if case.op in SHAPE_VALUES:
        expected = [np.asarray(expected, dtype="int64")]
    assert_outputs(got, expected, max(case.rtol, 1e-5), max(case.atol, 1e-5))


@pytest.mark.parametrize("case", _cases(True))
def test_op_without_onnx_form_names_joint_and_op(case):
    graph, _, weights, _ = graph_of_call(case.op, case.args, case.kwargs)
    with pytest.raises(UnsupportedOpError, match="ONNX") as err:
        to_onnx(graph, weights)
    [item] = err.value.items
    assert item["op"] == case.op and item["why"]
    assert item["node"] in {n.name for n in graph.get_nodes() if n.optype == case.op}


def test_every_row_runs_in_a_case():
    ran = {c.op for c in CASES if c.id not in CASE_GAPS}
    rows = {n for n, d in OPS.items() if "onnx_codegen" in d.facts}
    assert sorted(rows - ran) == ["nn.dropout"]  # random; identity at inference (below)
