"""Every op through both codegens: graph (one joint) -> to_torch / to_relax -> run -> the op's
numpy reference (the cases of test_numpy_ref), float32 within rtol 1e-5, atol 1e-5 (looser only
where the numpy-reference case itself is looser), integers exactly. The completeness of
the tables against explicit lists of known gaps is tests/relax/op/test_op_facts.py."""

import numpy as np
import pytest

from msc.codegen import to_relax, to_torch
from msc.codegen.relax import gen as relax_gen
from msc.errors import UnsupportedOpError
from msc.graph import MSCGraph, MSCJoint, MSCTensor
from msc.relax.op.registry import OPS
from tests.helpers.codegen import assert_outputs, graph_of_call, relax_build_and_run, torch_run
from tests.helpers.numpy_cases import CASES

# Cases a codegen cannot write (the op is supported, this form of it is not), and why.
TORCH_CASE_GAPS = {
    "gather_nd-batch",  # torch has no batched gather_nd
    "unique-unsorted-index",  # torch.unique always sorts and gives no first indices
    "conv2d-nhwc",  # torch convolutions are NCHW
    "col2im", "image.deform_conv2d", "vision.non_max_suppression",  # no torch op (op facts)
}
RELAX_CASE_GAPS: set = set()


def _cases(gaps):
    return [pytest.param(c, id=c.id) for c in CASES if c.id not in gaps]


def _tolerance(case):
    return max(case.rtol, 1e-5), max(case.atol, 1e-5)


@pytest.mark.parametrize("case", _cases(TORCH_CASE_GAPS))
def test_op_through_torch_codegen(case, tmp_path):
    graph, inputs, weights, expected = graph_of_call(case.op, case.args, case.kwargs)
    model = to_torch(graph, weights, {"need_test": False}, build_folder=tmp_path)
    assert_outputs(torch_run(model, inputs), expected, *_tolerance(case))


@pytest.mark.parametrize("case", _cases(RELAX_CASE_GAPS))
def test_op_through_relax_codegen(case, tmp_path):
    graph, inputs, weights, expected = graph_of_call(case.op, case.args, case.kwargs)
    mod = to_relax(graph, weights, {"need_test": False}, build_folder=tmp_path)
    assert_outputs(relax_build_and_run(mod, inputs), expected, *_tolerance(case))


def test_every_row_and_emit_runs_in_a_case():
    ran_torch = {c.op for c in CASES if c.id not in TORCH_CASE_GAPS}
    ran_relax = {c.op for c in CASES if c.id not in RELAX_CASE_GAPS}
    rows = {n for n, d in OPS.items() if "torch" in d.facts}
    emits = {n for n in OPS if relax_gen.emits(n)}
    assert sorted(rows - ran_torch) == ["nn.dropout"]  # random: see the test below
    assert sorted(emits - ran_relax) == ["nn.dropout"]


def test_dropout_is_identity_in_eval_mode(tmp_path):
    x = MSCTensor("x:0", "float32", "", [4, 5], "x")
    inp = MSCJoint(0, "x", "", "input", outputs=[x])
    drop = MSCJoint(1, "dropout", "", "nn.dropout", {"rate": "0.5"}, [(inp, 0)],
                    [MSCTensor("dropout:0", "float32", "", [4, 5], "dropout")])
    model = to_torch(MSCGraph("main", [inp, drop], ["x:0"], ["dropout:0"]),
                     build_folder=tmp_path)
    data = np.random.default_rng(0).random((4, 5), dtype="float32")
    assert_outputs(torch_run(model, [data]), [data])
    assert "F.dropout(x, p=0.5, training=self.training)" in (tmp_path / "main.py").read_text()


def _gap_graph() -> MSCGraph:
    x = MSCTensor("x:0", "float32", "", [2], "x")
    inp = MSCJoint(0, "x", "", "input", outputs=[x])
    nodes = [inp]
    # my_plugin: no op at all; gather_nd with batch dims: a Relax op torch cannot write
    for i, (optype, attrs) in enumerate([("my_plugin", {}), ("gather_nd", {"batch_dims": "1"})]):
        out = MSCTensor(f"n{i}:0", "float32", "", [2], f"n{i}")
        nodes.append(MSCJoint(i + 1, f"n{i}", "", optype, attrs,
                              inputs=[(nodes[-1], 0)] * (i + 1), outputs=[out]))
    return MSCGraph("main", nodes, ["x:0"], ["n1:0"])


def test_unsupported_nodes_are_reported_all_at_once(tmp_path):
    with pytest.raises(UnsupportedOpError) as err:
        to_torch(_gap_graph(), build_folder=tmp_path)
    assert [i["node"] for i in err.value.items] == ["n0", "n1"]
    with pytest.raises(UnsupportedOpError) as err:
        to_relax(_gap_graph(), build_folder=tmp_path)
    assert [i["op"] for i in err.value.items] == ["my_plugin"]


def test_layout_transform_split_with_permute_and_refusal(tmp_path):
    data = np.arange(2 * 6 * 3, dtype="float32").reshape(2, 6, 3)
    split = {"index_map": lambda n, c, h: (n, c // 4, h, c % 4), "pad_value": 1.5}
    graph, inputs, weights, expected = graph_of_call("layout_transform", [data], split)
    model = to_torch(graph, weights, {"need_test": False}, build_folder=tmp_path / "t")
    assert_outputs(torch_run(model, inputs), expected)
    mod = to_relax(graph, weights, {"need_test": False}, build_folder=tmp_path / "r")
    assert_outputs(relax_build_and_run(mod, inputs), expected)
    graph, *_ = graph_of_call("layout_transform", [data], {"index_map": lambda a, b, c:
                                                            (a, b + c, c)})
    with pytest.raises(UnsupportedOpError, match="only permutations and splits"):
        to_torch(graph, build_folder=tmp_path / "t2")
