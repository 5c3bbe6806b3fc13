"""What is true of each op: every op against every fact kind, with the known gaps listed in one
place (KNOWN_GAPS), and the op traits against the consumers that read them.

A new op fails ``test_op_has_every_fact[<op>]`` naming each kind it misses; a gap that is
closed fails the same test as a stale entry, until it is removed from KNOWN_GAPS."""

import subprocess
import sys

import numpy as np
import pytest

from msc import relax
from msc.codegen.relax import gen as relax_gen
from msc.errors import ShapeError, ValidationError
from msc.frontends.relax.optypes import op_optype
from msc.relax.op.facts import FACT_SOURCES, load_all_facts, load_facts
from msc.relax.op.registry import (
    OPS,
    REQUIRED,
    TRAITS,
    attrs_with_defaults,
    infer_struct_info,
    make_call,
    ops_having,
    ops_in,
    ops_with,
    register,
)
from msc.relax.transform.dead_code_elimination import is_impure

# kind -> whether an op has it (facts attached by FACT_SOURCES, or a consumer's own answer).
HAS = {
    "inference": lambda d: callable(d.infer),
    "numpy": lambda d: "numpy" in d.facts,
    "legalize": lambda d: "legalize" in d.facts,
    "compiled": lambda d: "legalize" in d.facts or "kernel" in d.facts,  # native in the VM
    "relax_codegen": lambda d: relax_gen.emits(d.name),
    "torch": lambda d: "torch" in d.facts,
    "onnx_codegen": lambda d: "onnx_codegen" in d.facts,
    "from_relax": lambda d: op_optype(d.name) is not None,
    "layout": lambda d: "layout" in d.facts,
}
# Fact kinds loaded but not walked, and why.
NOT_WALKED = {"kernel": "a speed-up, walked as part of \"compiled\" (a kernel or a legalize)",
              "prune": "an op without a channel rule freezes the channels it touches (safe)",
              "int8": "a speed-up: an op without an int8 kernel runs in float between its "
                      "dequantize and quantize"}

_RUNTIME = sorted(ops_with("runtime"))
_SHAPE_OPS = ("shape_of", "shape_to_tensor", "size", "tensor_to_shape")
_COMMON_LAYOUT = (
    "arange", "argsort", "broadcast_to", "bucketize", "clip", "collapse_sum_like",
    "collapse_sum_to", "cumprod", "cumsum", "dequantize", "einsum", "eye", "eye_like",
    "col2im", "flatten", "flip", "full", "full_like", "gather_elements", "gather_nd",
    "hamming_window",
    "image.affine_grid", "image.deform_conv2d", "image.grid_sample", "index_copy", "index_put", "index_tensor", "layout_transform",
    "median", "meshgrid", "msc.attention", "msc.embedding", "msc.gelu", "msc.matmul",
    "nn.attention", "nn.attention_bias", "nn.attention_var_len", "nn.batch_flatten",
    "nn.batch_matmul", "nn.bias_add", "nn.cross_entropy_with_logits", "nn.dense",
    "nn.leakyrelu", "nn.log_softmax", "nn.nll_loss", "nn.pad", "nn.pixel_shuffle",
    "nn.softplus", "nonzero", "one_hot", "ones", "ones_like", "outer", "quantize", "repeat",
    "reverse_sequence", "scatter_elements", "scatter_nd", *_SHAPE_OPS, "slice_scatter", "sort",
    "det", "tile", "topk", "tril", "triu", "unique", "vision.non_max_suppression", "where", "zeros",
    "zeros_like",
)

# The known gaps: kind -> {op: why it has no such fact}. Runtime ops (OpDef.runtime: calls into
# TIR / packed functions, effects, runtime objects) have no graph meaning.
_BYTES_VIEW = "the same bytes as another dtype: numpy's ndarray.view, nothing to compute"
_COL2IM = "a scatter-add whose output shape comes from a tensor's values: runs as its numpy fact"
_DET = "an LU factorization with pivoting: runs as its numpy fact"
_DEFORM = "bilinear taps at data-given offsets: runs as its numpy fact"
_NMS = ("greedy, data-dependent selection (ONNX NonMaxSuppression): runs as its numpy fact in "
        "the VM")
KNOWN_GAPS: dict[str, dict[str, str]] = {
    "numpy": {**dict.fromkeys(_RUNTIME, "runtime op: not a value numpy can compute"),
              "nn.dropout": "random"},
    "legalize": {**dict.fromkeys(_RUNTIME, "runtime op: the VM runs it itself"),
                 **dict.fromkeys(_SHAPE_OPS, "shape values: the VM computes them"),
                 "nonzero": "data-dependent output shape: a native kernel",
                 "unique": "data-dependent output shape: a native kernel",
                 "reinterpret": _BYTES_VIEW, "vision.non_max_suppression": _NMS,
                 "col2im": _COL2IM, "image.deform_conv2d": _DEFORM, "det": _DET},
    "compiled": {**dict.fromkeys(_RUNTIME, "runtime op: the VM runs it itself (SPECIAL)"),
                 **dict.fromkeys(_SHAPE_OPS, "shape values: the VM computes them"),
                 "reinterpret": _BYTES_VIEW, "vision.non_max_suppression": _NMS,
                 "col2im": _COL2IM, "image.deform_conv2d": _DEFORM, "det": _DET},
    "relax_codegen": dict.fromkeys(_RUNTIME, "runtime op: no graph node to write"),
    "torch": {**dict.fromkeys(_RUNTIME, "runtime op: no graph node to write"),
              "image.deform_conv2d": "torch has none (torchvision's deform_conv2d: an "
                                     "optional dependency msc does not take)",
              "col2im": "torch's fold is 2-D with symmetric padding only; ONNX's is N-D",
              "vision.non_max_suppression": "torch has no op for it (torchvision's nms has no "
                                            "per-class limit or score threshold)"},
    "onnx_codegen": {**dict.fromkeys(_RUNTIME, "runtime op: no graph node to write"),
                     "nn.attention_var_len": "packed variable-length sequences: a loop over "
                                             "spans, no static ONNX graph"},
    "from_relax": {**dict.fromkeys(_RUNTIME, "runtime op: no graph optype"),
                   "call_dps_packed": "a plugin (named by its symbol) only for an extern func"},
    "layout": {**dict.fromkeys(set(_RUNTIME) - {"call_dps_packed"}, "runtime op: no layout"),
               **dict.fromkeys(_COMMON_LAYOUT, "MSC's common rule: no row of its own")},
}


@pytest.fixture(scope="module", autouse=True)
def _facts():
    load_all_facts()


@pytest.mark.parametrize("name", sorted(OPS))
def test_op_has_every_fact(name):
    missing = {kind for kind, has in HAS.items() if not has(OPS[name])}
    listed = {kind for kind, gaps in KNOWN_GAPS.items() if name in gaps}
    assert (sorted(missing - listed), sorted(listed - missing)) == ([], []), \
        f"{name}: (missing facts, stale KNOWN_GAPS entries)"


def test_known_gaps_name_kinds_and_registered_ops_with_reasons():
    assert sorted(set(KNOWN_GAPS) - set(HAS)) == []
    assert sorted(n for gaps in KNOWN_GAPS.values() for n in gaps if n not in OPS) == []
    assert all(reason.strip() for gaps in KNOWN_GAPS.values() for reason in gaps.values())


def test_every_loaded_kind_is_walked_or_exempt():
    walked = {k for k in HAS if k in FACT_SOURCES}
    assert set(FACT_SOURCES) == walked | set(NOT_WALKED)
    for kind in FACT_SOURCES:
        assert any(kind in d.facts for d in OPS.values()), kind


def test_load_facts_rejects_an_unknown_kind():
    with pytest.raises(ValidationError, match="fact kind"):
        load_facts("kernels")


def test_one_load_attaches_a_kind_whatever_was_imported_before():
    """In a fresh interpreter, load_facts alone attaches as many facts as this process has."""
    kinds = ("numpy", "legalize", "torch", "layout", "onnx_codegen")
    code = ("from msc.relax.op.facts import load_facts; from msc.relax.op.registry import OPS\n"
            f"for k in {kinds!r}:\n"
            "    load_facts(k); print(sum(k in d.facts for d in OPS.values()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert [int(n) for n in out] == [sum(k in d.facts for d in OPS.values()) for k in kinds]


# --------------------------------------------------------------------------------------------
# Traits.

def test_every_op_has_a_family():
    assert sorted(n for n, d in OPS.items() if not d.family) == []


def test_trait_implications():
    assert ops_with("runtime_call") <= ops_with("runtime")
    assert ops_with("pure", False) <= ops_with("runtime")  # the only effects are runtime ops
    assert ops_with("view") <= ops_with("movement") <= ops_with("may_alias")
    assert {OPS[n].family for n in ops_with("activation")} == {"activation", "msc"}
    assert ops_with("runtime") == {n for n, d in OPS.items() if d.family == "special"}
    assert {OPS[n].family for n in ops_with("commutative")} <= {"binary", "compare"}


def test_trait_members():
    """The traits hold what TVM says of these ops."""
    assert ops_with("pure", False) == {"print", "assert_op", "call_builtin_with_ctx"}
    assert ops_with("view") == {"reshape", "flatten", "expand_dims", "squeeze",
                                "nn.batch_flatten"}
    assert {"call_tir", "call_tir_inplace", "call_dps_packed", "call_pure_packed",
            "call_inplace_packed", "call_builtin_with_ctx"} == ops_with("runtime_call")
    assert ops_with("stat_outputs") == {"nn.batch_norm"}
    assert OPS["nn.batch_norm"].stat_outputs == (1, 2)
    assert ops_with("inference_identity") == {"nn.dropout"}
    assert ops_with("movement") == ops_with("view") | {"permute_dims"}
    assert ops_with("activation") == {f"nn.{n}" for n in (
        "relu", "gelu", "gelu_tanh", "silu", "selu", "softplus", "leakyrelu", "prelu")} | {
        "msc.gelu"}


_X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
# movement op -> (args, attrs) of a call on _X (or a reshape of it)
_MOVES = {
    "reshape": ([_X, (6, 4)], {}), "flatten": ([_X], {}), "nn.batch_flatten": ([_X], {}),
    "expand_dims": ([_X], {"axis": (1, 3)}), "squeeze": ([_X.reshape(2, 1, 12)], {"axis": (1,)}),
    "permute_dims": ([_X], {"axes": (2, 0, 1)}),
}


@pytest.mark.parametrize("name", sorted(ops_with("movement")))
def test_movement_ops_hold_each_element_once(name):
    """The trait's meaning, by the op's own numpy fact: the output is the input reordered."""
    load_facts("numpy")
    args, attrs = _MOVES[name]
    out = OPS[name].facts["numpy"](args, attrs)
    assert out.size == _X.size and sorted(np.ravel(out)) == list(range(_X.size))


def _changed_by_one_element(name: str) -> np.ndarray:
    """Where the output changes when one input element does (out[i] = f(x[i]): there only)."""
    load_facts("numpy")
    fact = OPS[name].facts["numpy"]
    data = np.linspace(-3, 3, 24, dtype=np.float32).reshape(2, 3, 4)
    extra = [np.full(3, 0.25, np.float32)] if name == "nn.prelu" else []  # per-channel slope
    moved = data.copy()
    moved[1, 2, 1] += 0.5
    out, out_moved = (np.asarray(fact([x, *extra], {"axis": 1})) for x in (data, moved))
    return np.argwhere(out != out_moved)


@pytest.mark.parametrize("name", sorted(ops_with("activation")))
def test_activations_are_pointwise(name):
    assert _changed_by_one_element(name).tolist() == [[1, 2, 1]]


def test_softmax_shares_the_family_not_the_fact():
    assert len(_changed_by_one_element("nn.softmax")) == 3  # its whole row along axis 1
    assert "nn.softmax" in ops_in("activation") - ops_with("activation")


def test_families_and_consumer_facts_are_queried():
    assert ops_in("unary") == {n for n, d in OPS.items() if d.family == "unary"}
    assert ops_in("conv", "pool") == ops_in("conv") | ops_in("pool")
    with pytest.raises(ValidationError, match="unknown op family 'unaryy'.*did you mean unary"):
        ops_in("unaryy")
    int8 = ops_having("int8")  # loads the backend's int8 facts first
    assert {"nn.conv2d", "msc.linear_bias", "add"} <= int8
    assert all(all(isinstance(k, type) for k in OPS[n].facts["int8"]) for n in int8)


def test_unknown_traits_are_rejected():
    with pytest.raises(ValidationError, match="unknown op trait"):
        ops_with("views")
    with pytest.raises(ValidationError, match="unknown op trait"):
        register("_probe.op", [], infer=lambda ctx: None, veiw=True)
    assert "_probe.op" not in OPS
    assert set(TRAITS) <= set(OPS["add"].__dataclass_fields__)


def _one_tensor_ops():
    """Elementwise ops of one tensor argument whose attrs all have defaults (op(x) works)."""
    return sorted(n for n, d in OPS.items() if [a.kind for a in d.args] == ["tensor"]
                  and all(a.default is not REQUIRED for a in d.attrs)
                  and d.family in ("unary", "activation"))


@pytest.mark.parametrize("name", _one_tensor_ops())
def test_float_only_is_what_inference_enforces(name):
    x = relax.Var("x", relax.TensorStructInfo((2, 3), "int32"))
    call = make_call(name, x)
    if OPS[name].float_only:
        with pytest.raises(ShapeError, match="float"):
            infer_struct_info(call)
    else:
        infer_struct_info(call)


def test_stat_outputs_are_outputs_of_the_tuple():
    x = relax.Var("x", relax.TensorStructInfo((2, 3, 4, 4), "float32"))
    c = relax.Var("c", relax.TensorStructInfo((3,), "float32"))
    sinfo = infer_struct_info(make_call("nn.batch_norm", x, c, c, c, c, axis=1))
    assert max(OPS["nn.batch_norm"].stat_outputs) < len(sinfo.fields)


def test_dead_code_elimination_reads_purity():
    x = relax.Var("x", relax.TensorStructInfo((2,), "float32"))
    assert is_impure(relax.op.print(x, format="{}"))
    assert not is_impure(make_call("add", x, x))


def test_consumers_read_the_traits():
    from msc.backend.legalize.elementwise import FLOAT_MATH

    assert FLOAT_MATH == ops_with("float_only")
    assert {n for n in OPS if not relax_gen.emits(n)} == ops_with("runtime")
    assert {n for n in OPS if op_optype(n) is None} == ops_with("runtime")


def test_attrs_with_defaults_fills_the_declared_defaults():
    x = relax.Var("x", relax.TensorStructInfo((2, 3, 4, 4), "float32"))
    c = relax.Var("c", relax.TensorStructInfo((3,), "float32"))
    call = make_call("nn.batch_norm", x, c, c, c, c, axis=1, training=False)
    bare = relax.Call(call.op, call.args, relax.expr.Attrs({"axis": 1}))
    assert attrs_with_defaults(bare)["training"] is True  # the AttrDef's default, as TVM's
    assert attrs_with_defaults(call)["training"] is False
    assert attrs_with_defaults(bare)["epsilon"] == 1e-5
