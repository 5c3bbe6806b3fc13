"""Parameters known only at run time (axes, k, pads as graph inputs) and models with run-time
shapes: each module is built ONCE and run with different values, compared to onnxruntime."""

import io

import numpy as np
import onnx
import pytest
from onnx import helper

from msc import relax
from msc.frontends.onnx.api import from_onnx
from msc.frontends.onnx.testing import IR_VERSION, graph_model, run_ort

RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 3, 4)).astype("float32")


def _vm(model):
    mod, _ = from_onnx(model, as_msc=False)
    return relax.VirtualMachine(relax.build(mod, target="llvm"), relax.cpu())


def _run(vm, feeds: dict) -> list:
    out = vm["main"](*feeds.values())
    return [np.asarray(o.numpy()) for o in (out if isinstance(out, (list, tuple)) else [out])]


def _same(got: list, want: list) -> None:
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def _one_build_many_values(node, feeds: list, opset: int = 18):
    """One build of ``node`` over ``feeds[0]``'s inputs, run with every feed."""
    model = graph_model([node], feeds[0], list(node.output), opset=opset)
    vm = _vm(model)
    for feed in feeds:
        _same(_run(vm, feed), run_ort(model, feed))


def _axes(*values):
    return [{"x": X, "axes": np.array(v, "int64")} for v in values]


@pytest.mark.parametrize("op,keepdims", [("ReduceSum", 0), ("ReduceMax", 1),
                                         ("ReduceLogSumExp", 0), ("ReduceL2", 1)])
def test_reduce_over_axes_given_at_run_time(op, keepdims):
    node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=keepdims)
    _one_build_many_values(node, _axes([0, 2], [-1, 1], [2, 0]))


def test_squeeze_unsqueeze_axes_given_at_run_time():
    feeds = [{"x": RNG.standard_normal((1, 3, 1)).astype("float32"),
              "axes": np.array([a], "int64")} for a in (0, -1)]
    _one_build_many_values(helper.make_node("Squeeze", ["x", "axes"], ["y"]), feeds)
    _one_build_many_values(helper.make_node("Unsqueeze", ["x", "axes"], ["y"]),
                           _axes([0, 3], [1, -1], [4, 2]))


def test_slice_axes_and_bounds_given_at_run_time():
    node = helper.make_node("Slice", ["x", "starts", "ends", "axes"], ["y"])
    feeds = [{"x": X, "starts": np.array(s, "int64"), "ends": np.array(e, "int64"),
              "axes": np.array(a, "int64")}
             for s, e, a in (([0, 1], [2, 3], [2, 1]), ([-2, 0], [99, 1], [1, 0]))]
    _one_build_many_values(node, feeds, opset=13)


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "wrap"])
def test_pad_amounts_and_axes_given_at_run_time(mode):
    node = helper.make_node("Pad", ["x", "pads", "", "axes"], ["y"], mode=mode)
    feeds = [{"x": X, "pads": np.array(p, "int64"), "axes": np.array(a, "int64")}
             for p, a in (([1, 2, 0, 1], [2, 1]), ([0, -1, 2, 1], [-1, 1]))]
    _one_build_many_values(node, feeds)


def test_topk_k_given_at_run_time():
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=-1)
    feeds = [{"x": X, "k": np.array([k], "int64")} for k in (1, 3)]
    _one_build_many_values(node, feeds)


def test_broadcast_of_a_dim_that_is_one_only_at_run_time():
    """Expand to a shape computed by the model, then Add: the expanded dim is symbolic and
    1 at run time (an attention mask); the add must broadcast it."""
    nodes = [helper.make_node("Expand", ["m", "shape"], ["e"]),
             helper.make_node("Add", ["x", "e"], ["y"])]
    feeds = [{"x": X, "m": np.array([[[1.0], [2.0], [3.0]]], "float32"),
              "shape": np.array(s, "int64")} for s in ([1, 1, 1], [2, 3, 1])]
    model = graph_model(nodes, feeds[0], ["y"])
    vm = _vm(model)
    for feed in feeds:
        _same(_run(vm, feed), run_ort(model, feed))


@pytest.mark.filterwarnings("ignore")  # torch's legacy exporter warns about itself
def test_hugging_face_bert_with_dynamic_axes_builds_once_runs_at_two_lengths():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=37,
                                     max_position_embeddings=32)

    class Encoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bert = transformers.BertModel(config)

        def forward(self, input_ids, attention_mask):
            out = self.bert(input_ids=input_ids, attention_mask=attention_mask)
            return out.last_hidden_state

    ids = torch.randint(0, 64, (2, 7))
    buffer = io.BytesIO()
    dynamic = {0: "batch", 1: "sequence"}
    torch.onnx.export(Encoder().eval(), (ids, torch.ones_like(ids)), buffer, opset_version=17,
                      dynamo=False, input_names=["input_ids", "attention_mask"],
                      output_names=["hidden"],
                      dynamic_axes={"input_ids": dynamic, "attention_mask": dynamic,
                                    "hidden": dynamic})
    model = onnx.load_from_string(buffer.getvalue())
    model.ir_version = min(model.ir_version, IR_VERSION)
    vm = _vm(model)
    for batch, length in ((2, 5), (1, 11)):
        mask = np.ones((batch, length), "int64")
        mask[0, -2:] = 0  # padded positions: the mask broadcasts over heads and queries
        feeds = {"input_ids": RNG.integers(0, 64, (batch, length)), "attention_mask": mask}
        _same(_run(vm, feeds), run_ort(model, feeds))


def test_split_of_a_symbolic_dim_into_num_outputs_parts():
    node = helper.make_node("Split", ["x"], ["a", "b"], axis=1, num_outputs=2)
    feeds = [{"x": RNG.standard_normal((2, n)).astype("float32")} for n in (5, 4)]
    model = graph_model([node], feeds[0], ["a", "b"], input_dims={"x": [2, "n"]})
    vm = _vm(model)
    for feed in feeds:
        _same(_run(vm, feed), run_ort(model, feed))


def _expand_to_own_shape(offset: int, sizes=(2, 3)) -> tuple:
    """torch's exported ``expand``: shape = Where(Equal(shape, -1), 1, shape), then Expand
    to it; ``offset`` is added to x's symbolic dim first (0: a size; -5: n - 5, which is -1
    when n is 4)."""
    nodes = [helper.make_node("Shape", ["x"], ["s0"]),
             helper.make_node("Add", ["s0", "offset"], ["s"]),
             helper.make_node("Equal", ["s", "minus_one"], ["eq"]),
             helper.make_node("Where", ["eq", "one", "s"], ["target"]),
             helper.make_node("Expand", ["m", "target"], ["y"])]
    inits = {"offset": np.array([offset, 0], "int64"), "minus_one": np.array([-1], "int64"),
             "one": np.array([1], "int64")}
    feeds = [{"x": np.zeros((n, 6), "float32"), "m": np.ones((1, 1), "float32")}
             for n in sizes]
    model = graph_model(nodes, feeds[0], ["y"], initializers=inits,
                        input_dims={"x": ["n", 6]})
    return model, feeds


def test_a_size_compared_with_minus_one_is_decided_at_import():
    """A dim is never -1, so Equal(n, -1) folds to False and the expanded shape stays
    known ((n, 6)): the Shape of a later tensor needs its dims (GPT-2's ONNX decode step)."""
    model, feeds = _expand_to_own_shape(0)
    mod, _ = from_onnx(model, as_msc=False)
    assert str(mod["main"].ret_struct_info) == 'R.Tensor((n, 6), dtype="float32")'
    vm = _vm(model)
    for feed in feeds:
        _same(_run(vm, feed), run_ort(model, feed))


def test_a_difference_compared_with_minus_one_stays_a_run_time_value():
    """n - 5 may be -1 (n = 4), so Equal(n - 5, -1) is not decided at import: the model
    computes it, and expands to (1, 6) at n = 4 and (2, 6) at n = 7."""
    model, feeds = _expand_to_own_shape(-5, sizes=(4, 7))
    vm = _vm(model)
    for feed in feeds:
        _same(_run(vm, feed), run_ort(model, feed))
