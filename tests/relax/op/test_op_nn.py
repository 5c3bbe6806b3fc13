"""relax.op.nn.* / relax.op.image.* records: inferred struct info per op (static, symbolic,
layouts, dtypes, unknown shapes), the errors, and the same calls through TVM 0.27 (when it is
installed): same op, same attrs in the same order with the same values, same struct info.

A case is written once as specs (``T`` tensors, ``S`` symbolic scalars over n, h, w, c) and
materialized for msc and for TVM. Expected dims are Python expressions over n, h, w, c and are
compared by value at a few bindings, so equivalent symbolic forms compare equal.
"""

from __future__ import annotations

import functools
import inspect
import re

import pytest

from msc import relax
from msc.errors import MSCError, ShapeError, ValidationError
from msc.relax.op import OPS
from tests.helpers.op_specs import (
    Out,
    S,
    T,
    expected_summary,
    msc_call,
    msc_summary,
    msc_tensor,
    tvm_call,
    tvm_summary,
)


def case(op, args, kwargs=None, out=None, *, tvm=True, id=None):
    return pytest.param(op, args, kwargs or {}, out, tvm, id=id)


F16, I32, I64 = "float16", "int32", "int64"
X4 = T((1, 3, 8, 8))
W4 = T((16, 3, 3, 3))
Q, K, V = T((2, 16, 4, 8)), T((2, 10, 4, 8)), T((2, 10, 4, 6))

CASES = [
    # ---- convolutions (dims read by layout letter)
    case("nn.conv1d", [T((1, 4, 8)), T((8, 4, 3))], {}, Out((1, 8, 6)), id="conv1d"),
    case("nn.conv1d", [T((1, 8, 3)), T((3, 3, 6))], {"data_layout": "NWC", "kernel_layout": "WIO"},
         Out((1, 6, 6)), id="conv1d-NWC-WIO"),
    case("nn.conv1d", [T(("n", 4, "w")), T((8, 4, 3))], {"strides": 2, "padding": 1},
         Out(("n", 8, "(w - 1) // 2 + 1")), id="conv1d-symbolic"),
    case("nn.conv2d", [X4, W4], {}, Out((1, 16, 6, 6)), id="conv2d"),
    case("nn.conv2d", [T(("n", 3, "h", "w")), W4], {"strides": 2, "padding": 1, "dilation": 2},
         Out(("n", 16, "(h - 3) // 2 + 1", "(w - 3) // 2 + 1")), id="conv2d-symbolic"),
    case("nn.conv2d", [T((1, 8, 8, 4)), T((3, 3, 4, 16))],
         {"data_layout": "NHWC", "kernel_layout": "HWIO"}, Out((1, 6, 6, 16)), id="conv2d-NHWC"),
    case("nn.conv2d", [T((1, 8, 8, 4)), T((16, 3, 3, 4))],
         {"data_layout": "NHWC", "kernel_layout": "OHWI", "out_layout": "NCHW"}, Out((1, 16, 6, 6)),
         id="conv2d-OHWI-to-NCHW"),
    case("nn.conv2d", [T((1, 8, 8, 8)), T((16, 4, 3, 3))], {"padding": (1, 2), "groups": 2},
         Out((1, 16, 8, 10)), id="conv2d-groups"),
    case("nn.conv2d", [T((1, 8, 8, 8)), T((8, 1, 3, 3))], {"padding": 1, "groups": 8},
         Out((1, 8, 8, 8)), id="conv2d-depthwise"),
    case("nn.conv2d", [X4, W4], {"padding": (1, 2, 3, 4)}, Out((1, 16, 10, 12)),
         id="conv2d-asymmetric-pad"),
    case("nn.conv2d", [T((1, 3, 8, 8), "int8"), T((16, 3, 3, 3), "int8")],
         {"out_dtype": "int32"}, Out((1, 16, 6, 6), I32), id="conv2d-int8-out-int32"),
    case("nn.conv2d", [X4, T((16, 3, 3, 3), F16)], {"out_dtype": "float32"},
         Out((1, 16, 6, 6)), id="conv2d-mixed-with-out-dtype"),
    case("nn.conv2d", [T(None, ndim=4), W4], {}, Out(None, ndim=4), id="conv2d-unknown-shape"),
    case("nn.conv2d", [T(None), W4], {}, Out(None, ndim=4), id="conv2d-unknown-rank"),
    case("nn.conv3d", [T((1, 4, 4, 8, 8)), T((8, 4, 3, 3, 3))], {}, Out((1, 8, 2, 6, 6)),
         id="conv3d"),
    case("nn.conv3d", [T((1, 4, 8, 8, 4)), T((3, 3, 3, 4, 8))],
         {"data_layout": "NDHWC", "kernel_layout": "DHWIO"}, Out((1, 2, 6, 6, 8)),
         id="conv3d-NDHWC"),
    case("nn.conv1d_transpose", [T((1, 4, 8)), T((4, 8, 3))], {}, Out((1, 8, 10)),
         id="conv1d_transpose"),
    case("nn.conv2d_transpose", [T((1, 8, 5, 5)), T((8, 4, 3, 3))],
         {"strides": 2, "padding": 1, "output_padding": 1, "groups": 2}, Out((1, 8, 10, 10)),
         id="conv2d_transpose-groups"),
    case("nn.conv2d_transpose", [T(("n", 8, "h", 5)), T((8, 4, 3, 3))],
         {"strides": 2, "padding": 1, "output_padding": 1}, Out(("n", 4, "h * 2", 10)),
         id="conv2d_transpose-symbolic"),
    case("nn.conv2d_transpose", [T((1, 5, 5, 8)), T((8, 4, 3, 3))],
         {"strides": 2, "data_layout": "NHWC"}, Out((1, 11, 11, 4)), id="conv2d_transpose-NHWC"),
    case("nn.conv3d_transpose", [T((1, 4, 4, 8, 8)), T((4, 8, 3, 3, 3))], {},
         Out((1, 8, 6, 10, 10)), id="conv3d_transpose"),
    # ---- pooling (TVM's positional order: pool_size, strides, padding, dilation)
    case("nn.max_pool2d", [T((1, 4, "h", "w")), 3, 2, 1], {},
         Out((1, 4, "(h - 1) // 2 + 1", "(w - 1) // 2 + 1")), id="max_pool2d-symbolic"),
    case("nn.max_pool2d", [T((1, 4, "h", "w")), 2, 2, 1], {"ceil_mode": True},
         Out((1, 4, "(h + 1) // 2 if (h + 1) % 2 == 0 else (h + 1) // 2 + 1",
              "(w + 1) // 2 if (w + 1) % 2 == 0 else (w + 1) // 2 + 1")),
         id="max_pool2d-ceil-symbolic"),
    case("nn.max_pool2d", [T((1, 4, "h", "w")), 3, 2, 1], {"ceil_mode": True},
         Out((1, 4, "h // 2 + 1", "w // 2 + 1")), id="max_pool2d-ceil-never-in-pad"),
    case("nn.max_pool2d", [T((1, 4, 7, 7)), 2, 2, 1], {"ceil_mode": True}, Out((1, 4, 4, 4)),
         id="max_pool2d-ceil-drops-pad-window"),
    case("nn.max_pool2d", [T((1, 7, 7, 4)), (3, 2), (2, 1), (1, 0)],
         {"layout": "NHWC", "out_layout": "NCHW"}, Out((1, 4, 4, 6)), id="max_pool2d-NHWC"),
    case("nn.max_pool2d", [T((1, 4, 7, 7), I32), 3], {}, Out((1, 4, 5, 5), I32),
         id="max_pool2d-int"),
    case("nn.max_pool2d", [T(None), 2], {}, Out(None, ndim=4), id="max_pool2d-unknown"),
    case("nn.max_pool1d", [T((1, 4, 8))], {}, Out((1, 4, 8)), id="max_pool1d"),
    case("nn.max_pool3d", [T((1, 4, 9, 9, 9)), 3, 1, 0, 2], {}, Out((1, 4, 5, 5, 5)),
         id="max_pool3d-dilation"),
    case("nn.avg_pool1d", [T((1, 4, 7)), 3, 2, 1], {}, Out((1, 4, 4)), id="avg_pool1d"),
    case("nn.avg_pool2d", [T((1, 4, 7, 7)), 3, 2, (1, 2, 0, 1)], {}, Out((1, 4, 3, 4)),
         id="avg_pool2d-asymmetric-pad"),
    case("nn.avg_pool3d", [T((1, 4, 7, 7, 7)), 3, 2, 1], {}, Out((1, 4, 4, 4, 4)),
         id="avg_pool3d"),
    case("nn.adaptive_avg_pool1d", [T(("n", 4, 7)), 2], {}, Out(("n", 4, 2)),
         id="adaptive_avg_pool1d"),
    case("nn.adaptive_avg_pool2d", [T((1, 4, 7, 7))], {}, Out((1, 4, 7, 7)),
         id="adaptive_avg_pool2d-identity"),
    case("nn.adaptive_avg_pool2d", [T(("n", 7, 7, 4)), (3, 2)],
         {"layout": "NHWC", "out_layout": "NCHW"}, Out(("n", 4, 3, 2)),
         id="adaptive_avg_pool2d-NHWC"),
    case("nn.adaptive_avg_pool3d", [T(("n", 4, 7, 7, 7)), (2, 3, 4)], {},
         Out(("n", 4, 2, 3, 4)), id="adaptive_avg_pool3d"),
    # ---- normalization
    case("nn.batch_norm", [T((2, 3, 4, 4))] + [T((3,))] * 4, {"axis": 1},
         (Out((2, 3, 4, 4)), Out((3,)), Out((3,))), id="batch_norm"),
    case("nn.batch_norm", [T(("n", "h"))] + [T(("h",))] * 4, {"axis": -1},
         (Out(("n", "h")), Out(("h",)), Out(("h",))), id="batch_norm-symbolic"),
    case("nn.layer_norm", [T((2, 3, 4)), T((3, 4)), T((3, 4))], {"axes": [-2, -1]},
         Out((2, 3, 4)), id="layer_norm"),
    case("nn.layer_norm", [T(None), T((4,)), T((4,))], {"axes": -1}, Out(None),
         id="layer_norm-unknown"),
    case("nn.group_norm", [T((2, 6, 4)), T((6,)), T((6,))],
         {"num_groups": 3, "channel_axis": 1, "axes": [2]}, Out((2, 6, 4)), id="group_norm"),
    case("nn.instance_norm", [T((2, 6, "w")), T((6,)), T((6,))],
         {"channel_axis": 1, "axes": [2]}, Out((2, 6, "w")), id="instance_norm"),
    case("nn.rms_norm", [T(("n", 6, 4)), T((4,))], {}, Out(("n", 6, 4)), id="rms_norm"),
    case("nn.rms_norm", [T((2, 6, 4)), T((6, 4))], {"axes": [1, 2]}, Out((2, 6, 4)),
         id="rms_norm-axes"),
    # ---- activations and shape-preserving ops
    case("nn.relu", [T(("n", 3), I32)], {}, Out(("n", 3), I32), id="relu-int"),
    *[case(f"nn.{name}", [T(("n", 3))], {}, Out(("n", 3)), id=name)
      for name in ("gelu", "gelu_tanh", "silu", "selu")],
    case("nn.softplus", [T((2, 3))], {"beta": 2.0}, Out((2, 3)), id="softplus"),
    case("nn.leakyrelu", [T((2, 3))], {"alpha": 0.2}, Out((2, 3)), id="leakyrelu"),
    case("nn.prelu", [T((2, 6, 4)), T((4,))], {"axis": 2}, Out((2, 6, 4)), id="prelu"),
    case("nn.softmax", [T((2, 3))], {"axis": 0}, Out((2, 3)), id="softmax"),
    case("nn.log_softmax", [T((2, "w"), F16)], {}, Out((2, "w"), F16), id="log_softmax"),
    case("nn.dropout", [T(("n", 3))], {"rate": 0.1}, (Out(("n", 3)), Out(("n", 3))),
         id="dropout"),
    case("nn.pad", [T(("n", 3)), [1, 2, 3, 4]], {}, Out(("n + 3", 10)), id="pad"),
    case("nn.pad", [T((2, 3)), [1, 2, 3, 4], "reflect", 1.0], {}, Out((5, 10)),
         id="pad-positional"),
    case("nn.batch_flatten", [T(("n", 3, "h"))], {}, Out(("n", "3 * h")), id="batch_flatten"),
    case("nn.pixel_shuffle", [T(("n", 8, "h", "w")), 2], {}, Out(("n", 2, "h * 2", "w * 2")),
         id="pixel_shuffle"),
    case("nn.pixel_shuffle", [T((1, 2, 8, 4, 4)), 2], {}, Out((1, 2, 2, 8, 8)),
         id="pixel_shuffle-5d"),
    # ---- attention ([batch, seq, heads, dim])
    case("nn.attention", [Q, K, V], {}, Out((2, 16, 4, 6)), id="attention"),
    case("nn.attention", [T(("n", "h", 4, 8)), T(("n", "w", 4, 8)), T(("n", "w", 4, 6))], {},
         Out(("n", "h", 4, 6)), id="attention-symbolic"),
    case("nn.attention", [Q, T((2, 10, 2, 8)), T((2, 10, 2, 6))],
         {"scale": 0.5, "causal_mask": "TopLeft", "window_size": 3}, Out((2, 16, 4, 6)),
         id="attention-gqa-attrs"),
    case("nn.attention", [Q, K, V, T((2, 4, 16, 10))], {}, Out((2, 16, 4, 6)),
         id="attention-bias-routes"),
    case("nn.attention_bias", [Q, K, V, T((2, 1, 16, 10))], {}, Out((2, 16, 4, 6)),
         id="attention_bias-broadcast"),
    case("nn.attention_var_len", [T((1, 20, 4, 8)), T((1, 30, 4, 8)), T((1, 30, 4, 6)),
                                  T((3,), I32), T((), I32)], {}, Out((1, 20, 4, 6)),
         id="attention_var_len"),
    # ---- losses
    case("nn.cross_entropy_with_logits", [T(("n", 5)), T(("n", 5))], {}, Out(()),
         id="cross_entropy"),
    case("nn.nll_loss", [T((3, 5)), T((3,), I64)], {}, Out(()), id="nll_loss-mean"),
    case("nn.nll_loss", [T((3, 5, 6, "w")), T((3, 6, "w"), I64)], {"reduction": "none"},
         Out((3, 6, "w")), id="nll_loss-none-4d"),
    case("nn.nll_loss", [T((5,)), T((), I64), T((5,))], {"reduction": "none"}, Out(()),
         id="nll_loss-single"),
    case("nn.nll_loss", [T(("n", 5)), T(None, I64)], {"reduction": "none"}, Out(("n",)),
         id="nll_loss-unknown-targets"),
    # ---- image
    case("image.resize2d", [T(("n", 3, "h", "w")), (S("h * 2"), 5)], {},
         Out(("n", 3, "h * 2", 5)), id="resize2d-symbolic"),
    case("image.resize2d", [T(("n", 3, "h", "w")), 5],
         {"roi": 0.5, "method": "nearest_neighbor"}, Out(("n", 3, 5, 5)), id="resize2d-int-size"),
    case("image.resize2d", [T((1, 6, 6, 3)), [7]], {"layout": "NHWC", "out_dtype": "float16"},
         Out((1, 7, 7, 3), F16), id="resize2d-NHWC"),
    case("image.resize2d", [T((1, 6, 6, 3), I32), (2, 4)], {}, Out((1, 6, 2, 4), I32),
         id="resize2d-int"),
    case("image.resize2d", [T(None), (3, 4)], {}, Out(None, ndim=4), id="resize2d-unknown"),
    case("image.resize3d", [T((1, 6, 6, 3, 3)), (2, 4, 5)], {"layout": "NDHWC"},
         Out((1, 2, 4, 5, 3)), id="resize3d-NDHWC"),
    case("image.deform_conv2d", [T((2, 4, 7, 6)), T((6, 2, 3, 2)), T((2, 24, 4, 5)), T((6,)),
                                 T((2, 12, 4, 5))], {"groups": 2, "offset_groups": 2},
         Out((2, 6, 4, 5)), tvm=False, id="deform_conv2d"),
    case("image.grid_sample", [T(("n", 3, "h", "w")), T(("n", 2, 5, 7))], {},
         Out(("n", 3, 5, 7)), id="grid_sample"),
    case("image.grid_sample", [T(("n", "h", "w", 3)), T(("n", 2, 5, 7))], {"layout": "NHWC"},
         Out(("n", 5, 7, 3)), id="grid_sample-NHWC"),
    case("image.grid_sample", [T((1, 3, 4, 5, 6)), T((1, 3, 2, 3, 4))],
         {"layout": "NCDHW", "method": "nearest"}, Out((1, 3, 2, 3, 4)), id="grid_sample-3d"),
    case("image.affine_grid", [T(("n", 2, 3)), (S("h"), 5)], {}, Out(("n", 2, "h", 5)),
         id="affine_grid"),
    case("image.affine_grid", [T((1, 2, 3)), 6], {"align_corners": False}, Out((1, 2, 6, 6)),
         id="affine_grid-int-size"),
    # ---- Relay optypes msc still lists (not TVM Relax ops)
    case("nn.dense", [T(("n", 8)), T((16, 8))], {"units": 16}, Out(("n", 16)), tvm=False,
         id="dense"),
    case("nn.dense", [T((2, "h", 8), F16), T((4, 8), F16)], {}, Out((2, "h", 4), F16),
         tvm=False, id="dense-3d"),
    case("nn.batch_matmul", [T((2, 3, 4)), T((1, 5, 4))], {}, Out((2, 3, 5)), tvm=False,
         id="batch_matmul-broadcast"),
    case("nn.batch_matmul", [T(("n", 4, 3)), T(("n", 4, 5))],
         {"transpose_a": True, "transpose_b": False}, Out(("n", 3, 5)), tvm=False,
         id="batch_matmul-transposes"),
    case("nn.bias_add", [T((2, "c", 5)), T(("c",))], {}, Out((2, "c", 5)), tvm=False,
         id="bias_add"),
    case("nn.bias_add", [T((2, 3, 5)), T((5,))], {"axis": -1}, Out((2, 3, 5)), tvm=False,
         id="bias_add-last-axis"),
]


@pytest.mark.parametrize("op,args,kwargs,out,with_tvm", CASES)
def test_inferred_struct_info(op, args, kwargs, out, with_tvm):
    call = msc_call(op, args, kwargs)
    assert msc_summary(call.struct_info) == expected_summary(out)


# --------------------------------------------------------------------------------------------
# The same calls through TVM 0.27.

@pytest.fixture(scope="module")
def tvm():
    return pytest.importorskip("tvm")


def _py(value):
    """A TVM attr value as plain Python (Arrays -> lists, Imms -> numbers, dtypes -> str)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "value"):
        return value.value
    if isinstance(value, (list, tuple)) or type(value).__name__ == "Array":
        return [_py(v) for v in value]
    return str(value)


def _msc_attr(value):
    return [_msc_attr(v) for v in value] if isinstance(value, tuple) else value


def tvm_attrs(call) -> dict:
    """Attr names in TVM's print (declaration) order, with their values."""
    text = str(call)
    names = re.findall(r"[(,] (\w+)=", text[text.index("("):])
    return {name: _py(getattr(call.attrs, name)) for name in names}


TVM_CASES = [c for c in CASES if c.values[4]]


@pytest.mark.parametrize("op,args,kwargs,out,with_tvm", TVM_CASES)
def test_matches_tvm(tvm, op, args, kwargs, out, with_tvm):
    ours = msc_call(op, args, kwargs)
    theirs, syms = tvm_call(tvm, op, args, kwargs)
    assert ours.op.name == theirs.op.name
    attrs = tvm_attrs(theirs) if theirs.attrs is not None else {}
    assert {k: _msc_attr(v) for k, v in (ours.attrs or {}).items()} == attrs
    assert list(ours.attrs or {}) == list(attrs)  # same declaration (print) order
    assert msc_summary(ours.struct_info) == tvm_summary(tvm, theirs.ty, syms)


# --------------------------------------------------------------------------------------------
# Errors: typed, naming the op and the argument, saying what is wrong.

def err(op, args, kwargs, error, fragment, *, param=None, tvm=True, id=None):
    return pytest.param(op, args, kwargs, error, fragment, param, tvm, id=id)


ERRORS = [
    err("nn.conv2d", [T((1, 3, 8)), W4], {}, ShapeError, "rank 3", param="data",
        id="conv2d-rank"),
    err("nn.conv2d", [X4, W4], {"data_layout": "NCHX"}, ShapeError, "not a layout",
        param="data", id="conv2d-bad-layout"),
    err("nn.conv2d", [X4, W4], {"data_layout": "NCHW4c"}, ShapeError, "packed layouts",
        param="data", id="conv2d-packed-layout"),
    err("nn.conv2d", [X4, W4], {"kernel_layout": "OIHX"}, ShapeError, "kernel_layout",
        param="weight", id="conv2d-bad-kernel-layout"),
    err("nn.conv2d", [T((1, 8, 8, 8)), W4], {"groups": 2}, ShapeError, "8 channels",
        param="weight", id="conv2d-channels-vs-groups"),
    err("nn.conv2d", [T((1, 8, 8, 8)), T((15, 4, 3, 3))], {"groups": 2}, ShapeError,
        "not divisible by groups", param="weight", id="conv2d-out-channels-vs-groups"),
    err("nn.conv2d", [X4, T((16, 3, 3, 3), F16)], {}, ShapeError, "different dtypes",
        id="conv2d-dtypes"),
    err("nn.conv2d", [T((1, 3, 2, 2)), T((16, 3, 5, 5))], {}, ShapeError, "smaller than",
        param="data", tvm=False, id="conv2d-input-smaller-than-kernel"),
    err("nn.conv2d", [X4, W4], {"padding": (1, 2, 3)}, ValidationError, "1, 2 or 4 values",
        param="padding", id="conv2d-padding-length"),
    err("nn.conv1d", [T((1, 3, 8)), T((4, 3, 3))], {"strides": (1, 1)}, ValidationError,
        "1 or 1 values", param="strides", id="conv1d-strides-length"),
    err("nn.conv2d_transpose", [T((1, 8, 5, 5)), T((8, 4, 3, 3))],
        {"strides": 2, "output_padding": 2}, ShapeError, "output_padding", id="conv2d_t-outpad"),
    err("nn.conv2d_transpose", [T((1, 8, 5, 5)), T((4, 8, 3, 3))], {}, ShapeError,
        "weight's I", param="weight", id="conv2d_t-channels"),
    err("nn.max_pool2d", [T((1, 4, 7))], {}, ShapeError, "rank 3", param="data",
        id="max_pool2d-rank"),
    err("nn.avg_pool2d", [X4], {"layout": "NCDHW"}, ShapeError, "not a layout",
        param="data", id="avg_pool2d-layout"),
    err("nn.adaptive_avg_pool2d", [X4, (1, 2, 3)], {}, ValidationError, "output_size",
        param="output_size", id="adaptive_pool-output-size"),
    err("nn.softmax", [T((2, 3), I32)], {}, ShapeError, "float", param="data", id="softmax-int"),
    err("nn.softmax", [T((2, 3))], {"axis": 2}, ShapeError, "out of range",
        param="data", id="softmax-axis"),
    err("nn.gelu", [T((2, 3), I32)], {}, ShapeError, "float", param="data", id="gelu-int"),
    err("nn.prelu", [T((2, 3)), T((3,))], {"axis": 3}, ShapeError, "out of range",
        param="data", id="prelu-axis"),
    err("nn.batch_norm", [X4, T((4,))] + [T((3,))] * 3, {"axis": 1}, ShapeError, "[4]",
        param="gamma", id="batch_norm-gamma-size"),
    err("nn.batch_norm", [X4] + [T((3,))] * 4, {"axis": 4}, ShapeError, "out of range",
        param="data", id="batch_norm-axis"),
    err("nn.batch_norm", [X4, T((3,), F16)] + [T((3,))] * 3, {"axis": 1}, ShapeError,
        "dtype float16", param="gamma", id="batch_norm-gamma-dtype"),
    err("nn.batch_norm", [T((1, 3, 8, 8), I32)] + [T((3,), I32)] * 4, {"axis": 1},
        ShapeError, "float", param="data", id="batch_norm-int"),
    err("nn.layer_norm", [T((2, 3, 4)), T((4, 3)), T((3, 4))], {"axes": [-2, -1]},
        ShapeError, "[4, 3]", param="gamma", id="layer_norm-gamma-shape"),
    err("nn.layer_norm", [T((2, 3, 4)), T((4,)), T((4,))], {"axes": [-2, -1]}, ShapeError,
        "rank 1", param="gamma", id="layer_norm-gamma-rank"),
    err("nn.layer_norm", [T((2, 3, 4)), T((4,)), T((4,))], {"axes": [-1, 2]}, ShapeError,
        "repeat", param="data", id="layer_norm-repeated-axes"),
    err("nn.group_norm", [T((2, 6, 4)), T((6,)), T((6,))],
        {"num_groups": 4, "channel_axis": 1, "axes": [2]}, ShapeError, "num_groups=4",
        param="data", id="group_norm-groups"),
    err("nn.instance_norm", [T((2, 6, 4)), T((4,)), T((6,))], {"channel_axis": 1, "axes": [2]},
        ShapeError, "[4]", param="gamma", id="instance_norm-gamma"),
    err("nn.rms_norm", [T((2, 6, 4)), T((6,))], {}, ShapeError, "[6]", param="weight",
        id="rms_norm-weight"),
    err("nn.pad", [T((2, 3)), [1, 2, 3]], {}, ShapeError, "pad_width has 3", param="data",
        id="pad-width"),
    err("nn.batch_flatten", [T((2,))], {}, ShapeError, "rank >= 2", param="data",
        id="batch_flatten-rank"),
    err("nn.pixel_shuffle", [T((1, 7, 4, 4)), 2], {}, ShapeError, "not divisible",
        param="data", id="pixel_shuffle-channels"),
    err("nn.attention_bias", [Q, K, V, T((4, 16, 10))], {}, ShapeError, "rank 3", param="bias",
        id="attention-bias-rank"),
    err("nn.attention_bias", [Q, K, V, T((2, 3, 16, 10))], {}, ShapeError, "heads", param="bias",
        id="attention-bias-heads"),
    err("nn.attention_bias", [Q, K, V, T((2, 4, 16, 9))], {}, ShapeError, "key sequence length",
        param="bias", id="attention-bias-kv-len"),
    err("nn.attention", [Q, T((2, 10, 4, 7)), V], {}, ShapeError, "head dim", param="key",
        id="attention-head-dim"),
    err("nn.attention", [Q, T((2, 10, 3, 8)), T((2, 10, 3, 6))], {}, ShapeError,
        "multiple", param="key", id="attention-heads"),
    err("nn.attention", [Q, K, T((2, 9, 4, 6))], {}, ShapeError, "sequence length",
        param="value", id="attention-kv-len"),
    err("nn.attention", [Q, K, T((3, 10, 4, 6))], {}, ShapeError, "batch size",
        param="value", id="attention-batch"),
    err("nn.attention", [T((16, 4, 8)), T((10, 4, 8)), T((10, 4, 6))], {}, ShapeError,
        "rank 3", param="query", id="attention-rank"),
    err("nn.cross_entropy_with_logits", [T((3, 5)), T((3, 4))], {}, ShapeError, "[3, 4]",
        param="labels", id="cross_entropy-shape"),
    err("nn.cross_entropy_with_logits", [T((3, 5)), T((5,))], {}, ShapeError, "rank 1",
        param="labels", id="cross_entropy-rank"),
    err("nn.cross_entropy_with_logits", [T((3, 5)), T((3, 5), F16)], {}, ShapeError,
        "dtypes", id="cross_entropy-dtype"),
    err("nn.nll_loss", [T((3, 5)), T((3,))], {}, ShapeError, "integer", param="targets",
        id="nll_loss-float-targets"),
    err("nn.nll_loss", [T((3, 5)), T((3,), I64), T((4,))], {}, ShapeError, "classes",
        param="weights", id="nll_loss-weights"),
    err("nn.nll_loss", [T((3, 5)), T((3, 2), I64)], {}, ShapeError, "rank 2",
        param="targets", id="nll_loss-targets-rank"),
    err("nn.nll_loss", [T((3, 5)), T((3,), I64)], {"reduction": "avg"}, ValidationError,
        "none, mean or sum", param="reduction", id="nll_loss-reduction"),
    err("image.resize2d", [X4, (2, 4, 5)], {}, ShapeError, "3 values", param="size",
        id="resize2d-size"),
    err("image.resize2d", [X4, (2, 4)], {"layout": "NCDHW"}, ShapeError, "not a layout",
        param="data", id="resize2d-layout"),
    err("image.affine_grid", [T((1, 2, 4)), (5, 6)], {}, ShapeError, "dim 2", param="data",
        id="affine_grid-matrix"),
    err("image.grid_sample", [X4, T((1, 2, 5, 7, 2))], {}, ShapeError, "rank 5",
        param="grid", tvm=False, id="grid_sample-grid-rank"),
    err("nn.dense", [T((2, 8)), T((16, 4))], {}, ShapeError, "in_features", param="weight",
        tvm=False, id="dense-in-features"),
    err("nn.dense", [T((2, 8)), T((16, 8))], {"units": 8}, ShapeError, "units",
        param="weight", tvm=False, id="dense-units"),
    err("nn.batch_matmul", [T((2, 3, 4)), T((2, 5, 3))], {}, ShapeError, "reduction dim",
        param="y", tvm=False, id="batch_matmul-k"),
    err("nn.bias_add", [T((2, 3, 5)), T((5,))], {}, ShapeError, "bias length", param="bias",
        tvm=False, id="bias_add-length"),
]


@pytest.mark.parametrize("op,args,kwargs,error,fragment,param,with_tvm", ERRORS)
def test_errors(op, args, kwargs, error, fragment, param, with_tvm):
    with pytest.raises(error) as info:
        msc_call(op, args, kwargs)
    assert info.value.context["op"] == op
    assert fragment in str(info.value)
    assert info.value.context.get("param") == param


@pytest.mark.parametrize("op,args,kwargs,error,fragment,param,with_tvm",
                         [e for e in ERRORS if e.values[6]])
def test_tvm_rejects_too(tvm, op, args, kwargs, error, fragment, param, with_tvm):
    with pytest.raises(Exception):  # noqa: B017 - TVM raises ValueError/TypeError/TVMError
        tvm_call(tvm, op, args, kwargs)


# --------------------------------------------------------------------------------------------
# The table itself: signatures as TVM's Python API, every op covered here.

NN_OPS = sorted(n for n in OPS if n.startswith(("nn.", "image.")))
RELAY_ONLY = {"nn.dense", "nn.batch_matmul", "nn.bias_add"}
MSC_ONLY = {"image.deform_conv2d"}  # ONNX DeformConv; TVM 0.27's relax has no such op


def _default(value):
    if isinstance(value, (list, tuple)):
        return [_default(v) for v in value]
    return value


@pytest.mark.parametrize("name", [n for n in NN_OPS if n not in RELAY_ONLY | MSC_ONLY])
def test_signature_matches_tvm(tvm, name):
    theirs = inspect.signature(functools.reduce(getattr, name.split("."), tvm.relax.op))
    ours = inspect.signature(functools.reduce(getattr, name.split("."), relax.op))
    assert list(ours.parameters) == list(theirs.parameters)
    for p in theirs.parameters.values():
        assert _default(ours.parameters[p.name].default) == _default(p.default), p.name


def test_every_nn_and_image_op_has_cases():
    covered = {c.values[0] for c in CASES}
    assert [n for n in NN_OPS if n not in covered] == []
    assert len(NN_OPS) == 47


def test_relu6_is_not_an_op():
    # TVM 0.27's relax.op.nn.relu6 is a Python helper emitting R.clip(x, 0, 6); no record.
    assert "nn.relu6" not in OPS


def test_window_attrs_are_expanded_and_out_layout_filled():
    call = msc_call("nn.conv2d", [X4, W4], {"strides": 2, "padding": (1, 2), "data_layout": "NCHW"})
    assert call.attrs.strides == (2, 2) and call.attrs.padding == (1, 2, 1, 2)
    assert call.attrs.out_layout == "NCHW" and call.attrs.out_dtype is None


def test_pool_positional_order_is_tvms_python_order():
    call = msc_call("nn.avg_pool2d", [T((1, 4, 9, 9)), 3, 2, 1, 2, True, True, "NCHW"], {})
    attrs = call.attrs
    assert (attrs.pool_size, attrs.strides, attrs.padding, attrs.dilation) == (
        (3, 3), (2, 2), (1, 1, 1, 1), (2, 2))
    assert attrs.ceil_mode and attrs.count_include_pad
    assert list(attrs) == ["pool_size", "strides", "dilation", "padding", "ceil_mode",
                           "count_include_pad", "layout", "out_layout"]


def test_attention_routes_by_bias():
    assert msc_call("nn.attention", [Q, K, V], {}).op.name == "relax.nn.attention"
    biased = msc_call("nn.attention_bias", [Q, K, V, T((2, 4, 16, 10))], {})
    assert biased.op.name == "relax.nn.attention_bias" and len(biased.args) == 4
    assert msc_call("nn.attention_bias", [Q, K, V], {}).op.name == "relax.nn.attention"


def test_attention_var_len_defaults_key_lengths_to_query_lengths():
    call = msc_call("nn.attention_var_len", [T((1, 20, 4, 8)), T((1, 30, 4, 8)),
                                             T((1, 30, 4, 6)), T((3,), I32), T((), I32)], {})
    seqstart_q, seqstart_k, max_q, max_k = call.args[3:]
    assert seqstart_k is seqstart_q and max_k is max_q


def test_resize_size_shape_var():
    size = relax.Var("s", relax.ShapeStructInfo(ndim=2))
    call = relax.BlockBuilder().normalize(relax.op.image.resize2d(msc_tensor("x", (1, 3, 4, 5),
                                                                              "float32", -1), size))
    assert msc_summary(call.struct_info) == ("float32", 4, None)


def test_error_messages_say_what_to_do():
    with pytest.raises(MSCError) as info:
        msc_call("nn.conv2d", [X4, W4], {"data_layout": "NCHW4c"})
    assert "use a primal layout such as 'NCHW'" in str(info.value)
