"""The torch codegen's rows: one per op of the table, attached as the op fact ``"torch"``.

A row names the torch callable and renames attrs (``Row("F.softmax", {"axis": "dim"})`` writes
``F.softmax(x, dim=-1)``); rows whose arguments need more than renames (padding pairs, layouts,
modules with weights) have a small ``convert(ctx)`` (ctx: ``torch.gen.TorchContext``)::

    load_facts("torch")                    # imports this module, which attaches the rows
    OPS["nn.relu"].facts["torch"]          # Row(func='F.relu', ...)

Runtime ops (``OpDef.runtime``: calls into other functions, effects) have no row; the known
gaps are listed in tests/relax/op/test_op_facts.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from msc.relax.op.registry import OPS, attach, ops_in

from ..naming import identifier, literal
from .indexing import (
    convert_gather_nd,
    convert_index_copy,
    convert_index_put,
    convert_index_tensor,
    convert_layout_transform,
    convert_one_hot,
    convert_reverse_sequence,
    convert_scatter_elements,
    convert_scatter_nd,
    convert_slice_scatter,
    convert_strided_slice,
    convert_take,
)
from .nn import (
    arg_value,
    axes_of,
    axis_of,
    call,
    convert_adaptive_pool,
    convert_affine_grid,
    convert_attention,
    convert_attention_var_len,
    convert_batch_norm,
    convert_conv,
    convert_cross_entropy,
    convert_dropout,
    convert_grid_sample,
    convert_group_norm,
    convert_instance_norm,
    convert_layer_norm,
    convert_msc_attention,
    convert_nll_loss,
    convert_pad,
    convert_pool,
    convert_prelu,
    convert_resize,
    convert_rms_norm,
    tuple_of,
)

__all__ = ["ROWS", "Row", "attach_rows"]


@dataclass(frozen=True)
class Row:
    """How one op is written in torch: ``func(<op args>, <renamed attrs>)`` or ``convert``."""

    func: str = ""
    attrs: dict = field(default_factory=dict)  # relax attr -> torch keyword
    convert: Callable | None = None  # ctx -> source, when renames are not enough
    cast: bool = False  # append .to(<output dtype>) (torch promotes where Relax does not)

    def render(self, ctx) -> str:
        source = self.convert(ctx) if self.convert is not None else self._plain(ctx)
        return f"{source}.to({ctx.dtype()})" if self.cast else source

    def _plain(self, ctx) -> str:
        kwargs = [f"{kw}={literal(ctx.attr(name))}" for name, kw in self.attrs.items()]
        return f"{self.func}({', '.join(ctx.args() + kwargs)})"


# --------------------------------------------------------------------------------------------
# Manipulation, reductions, creation.

def _to(dtype: str | None, ctx=None) -> str:
    """``.to(<dtype>)``, unless there is no dtype or it is the input's (a no-op)."""
    if not dtype or (ctx is not None and ctx.in_tensor(0).dtype == dtype):
        return ""
    return f".to(torch.{identifier(dtype)})"


def _expand_dims(ctx) -> str:
    source = ctx.input(0)
    for axis in sorted(axes_of(ctx.attr("axis"), ctx.out.ndim)):
        source = f"{source}.unsqueeze({axis})"
    return source


def _squeeze(ctx) -> str:
    axes = axes_of(ctx.attr("axis"), ctx.in_tensor(0).ndim)
    if axes is None:
        return call("torch.squeeze", ctx.input(0))
    return call("torch.squeeze", ctx.input(0), tuple_of(axes))


def _permute_dims(ctx) -> str:
    ndim = ctx.in_tensor(0).ndim
    axes = axes_of(ctx.attr("axes"), ndim)
    return f"{ctx.input(0)}.permute({tuple_of(axes if axes is not None else range(ndim)[::-1])})"


def _repeat(ctx) -> str:
    axis = ctx.attr("axis")
    kw = {"dim": axis} if axis is not None else {}
    return call("torch.repeat_interleave", ctx.input(0), ctx.attr("repeats"), **kw)


def _split(ctx) -> str:
    axis = axis_of(ctx.attr("axis"), ctx.in_tensor(0).ndim)
    sizes = "[" + ", ".join(str(ctx.dim(t, axis)) for t in ctx.node.outputs) + "]"
    return call("torch.split", ctx.input(0), sizes, dim=axis)


def _reduce(func: str, **extra) -> Callable:
    def convert(ctx) -> str:
        ndim, keep = ctx.in_tensor(0).ndim, ctx.attr("keepdims")
        axes = axes_of(ctx.attr("axis"), ndim)
        dims = tuple_of(axes if axes is not None else range(ndim))
        kw = {k: v for k, v in extra.items()}
        return call(func, ctx.input(0), dim=dims, **kw, keepdim=literal(keep))
    return convert


def _prod(ctx) -> str:
    ndim = ctx.in_tensor(0).ndim
    axes = axes_of(ctx.attr("axis"), ndim)
    source = ctx.input(0)
    for axis in sorted(axes if axes is not None else range(ndim), reverse=True):
        source = call("torch.prod", source, dim=axis, keepdim="True")
    return f"{source}.reshape({ctx.dims(ctx.out)})"


def _arg_reduce(func: str) -> Callable:
    def convert(ctx) -> str:
        axis = ctx.attr("axis")
        if axis is None:
            return f"{call(func, ctx.input(0))}.reshape({ctx.dims(ctx.out)})"
        return call(func, ctx.input(0), dim=axis, keepdim=literal(ctx.attr("keepdims")))
    return convert


def _median(ctx) -> str:
    axes = axes_of(ctx.attr("axis"), ctx.in_tensor(0).ndim)
    if axes is None:
        return f"torch.median({ctx.input(0)}).reshape({ctx.dims(ctx.out)})"
    if len(axes) != 1:
        raise ctx.fail("torch's median takes one axis")
    out = call("torch.median", ctx.input(0), dim=axes[0],
                keepdim=literal(ctx.attr("keepdims")))
    return f"tuple({out})" if len(ctx.node.outputs) > 1 else f"{out}[0]"


def _cumulative(func: str, identity: str) -> Callable:
    def convert(ctx) -> str:
        source, axis = ctx.input(0), ctx.attr("axis")
        if axis is None:
            source, axis = f"{source}.flatten()", 0
        axis = axis_of(axis, ctx.out.ndim)
        # torch accumulates small ints and bool in int64; TVM in the output dtype (wrapping)
        out = call(func, source, dim=axis, dtype=f"torch.{identifier(ctx.out.dtype)}")
        if not ctx.attr("exclusive"):
            return out
        head = f"torch.{identity}_like({out}.narrow({axis}, 0, 1))"
        return f"torch.cat([{head}, {out}.narrow({axis}, 0, {out}.shape[{axis}] - 1)], {axis})"
    return convert


def _sort(ctx) -> str:
    return call("torch.sort", ctx.input(0), dim=ctx.attr("axis"),
                 descending=literal(ctx.attr("descending")), stable="True") + ".values"


def _argsort(ctx) -> str:
    return call("torch.argsort", ctx.input(0), dim=ctx.attr("axis"),
                 descending=literal(ctx.attr("descending")), stable="True") + \
        _to(ctx.attr("dtype"))


def _topk(ctx) -> str:
    top = call("torch.topk", ctx.input(0), ctx.attr("k"), dim=ctx.attr("axis"),
                largest=literal(ctx.attr("largest")))
    indices = f"{top}.indices{_to(ctx.attr('dtype'))}"
    kind = ctx.attr("ret_type")
    if kind == "both":
        top = ctx.writer.temp(ctx.node, top)
        return f"({top}.values, {top}.indices{_to(ctx.attr('dtype'))})"
    return f"{top}.values" if kind == "values" else indices


def _unique(ctx) -> str:
    flags = {n: bool(arg_value(ctx, n)) for n in ("sorted", "return_index",
                                                   "return_inverse", "return_counts")}
    if flags["return_index"] or not flags["sorted"]:
        raise ctx.fail("torch's unique gives no first indices and always sorts")
    axis = arg_value(ctx, "axis")
    kw = {"dim": axis} if axis is not None else {}
    out = call("torch.unique", ctx.input(0), return_inverse=literal(flags["return_inverse"]),
                return_counts=literal(flags["return_counts"]), **kw)
    if flags["return_inverse"] and axis is None:  # TVM's inverse is flat
        out = ctx.writer.temp(ctx.node, out)
        return f"({out}[0], {out}[1].flatten(), *{out}[2:])"
    return out


def _quant_param(ctx, i: int) -> str:
    source, tensor = ctx.input(i), ctx.in_tensor(i)
    if tensor.ndim == 1 and tensor.shape[0] != 1:
        shape = [1] * ctx.in_tensor(0).ndim
        shape[axis_of(ctx.attr("axis"), len(shape))] = -1
        return f"{source}.reshape({literal(shape)})"
    return source


def _quantize(ctx) -> str:
    info = np.iinfo(ctx.out.dtype)
    scale, zero = _quant_param(ctx, 1), _quant_param(ctx, 2)
    value = f"torch.round({ctx.input(0)} / {scale}) + {zero}"
    return f"torch.clamp({value}, {int(info.min)}, {int(info.max)}).to({ctx.dtype()})"


def _dequantize(ctx) -> str:
    scale, zero = _quant_param(ctx, 1), _quant_param(ctx, 2)
    value = f"({ctx.input(0)}.to(torch.float32) - {zero}.to(torch.float32)) * {scale}"
    return f"({value}).to({ctx.dtype()})"


def _matmul_nbits(ctx) -> str:
    """The packed weight dequantized in the forward: ``(code - zero) * scale`` per group."""
    w, scales, zeros = (ctx.tensor_arg(n) for n in ("weight", "scales", "zero_points"))
    codes = w if ctx.attr("bits") == 8 else f"torch.stack(({w} & 15, {w} >> 4), -1).flatten(-2)"
    value = (f"(({codes}.float() - {zeros}.float()[..., None]) * {scales}[..., None])"
             f".flatten(1)[:, :{int(ctx.attr('in_features'))}]")
    return call("F.linear", ctx.input(0), f"{value}.to({ctx.dtype()})")


def _full(ctx) -> str:
    return call("torch.full", ctx.dims(ctx.out), f"{ctx.tensor_arg('fill_value')}.item()",
                 dtype=ctx.dtype())


def _eye(ctx, shape: str) -> str:
    k = arg_value(ctx, "k") or 0
    return f"torch.ones({shape}, dtype={ctx.dtype()}).triu({k}).tril({k})"


def _arange(ctx) -> str:
    values = [arg_value(ctx, n) for n in ("start", "end", "step")]
    return call("torch.arange", *(literal(v) for v in values), dtype=ctx.dtype())


def _hamming(ctx) -> str:
    size, periodic, alpha, beta = (arg_value(ctx, n) for n in (
        "window_size", "periodic", "alpha", "beta"))
    return call("torch.hamming_window", literal(size), periodic=literal(bool(periodic)),
                 alpha=literal(float(alpha)), beta=literal(float(beta)), dtype=ctx.dtype())


def _bias_add(ctx) -> str:
    ndim = ctx.in_tensor(0).ndim
    shape = [1] * ndim
    shape[axis_of(ctx.attr("axis"), ndim)] = -1
    return f"{ctx.input(0)} + {ctx.tensor_arg('bias')}.reshape({literal(shape)})"


def _batch_matmul(ctx) -> str:
    x, y = ctx.inputs
    x = f"{x}.transpose(-1, -2)" if ctx.attr("transpose_a") else x
    y = f"{y}.transpose(-1, -2)" if ctx.attr("transpose_b") else y
    return call("torch.matmul", x, y) + _to(ctx.attr("out_dtype"), ctx)


def _linear(ctx) -> str:
    weight = ctx.node.weights.get("weight")
    bias = ctx.has_weight("bias")
    if weight is not None and (bias or ctx.node.optype != "msc.linear_bias"):
        ctor = call("nn.Linear", weight.shape[1], weight.shape[0], bias=literal(bias))
        params = {"weight": "weight", **({"bias": "bias"} if bias else {})}
        out = call(ctx.layer(ctor, params), ctx.input(0))
    else:
        extra = [ctx.tensor_arg("bias")] if ctx.node.optype == "msc.linear_bias" else []
        out = call("F.linear", ctx.input(0), ctx.tensor_arg("weight"), *extra)
    return out + _to(ctx.attr("out_dtype"), ctx)


def _embedding(ctx) -> str:
    weight = ctx.node.weights.get("weight")
    if weight is not None:
        layer = ctx.layer(call("nn.Embedding", *weight.shape), {"weight": "weight"})
        out = call(layer, f"{ctx.input(0)}.long()")
    else:
        out = call("F.embedding", f"{ctx.input(0)}.long()", ctx.tensor_arg("weight"))
    return out if ctx.out.ndim == ctx.in_tensor(0).ndim + 1 else \
        f"{out}.reshape({ctx.dims(ctx.out)})"


# --------------------------------------------------------------------------------------------
# The table.

_UNARY = {n: f"torch.{n}" for n in sorted(ops_in("unary"))}  # torch spells them the same
_UNARY["negative"] = "torch.neg"  # but one
_BINARY = {
    "add": "torch.add", "subtract": "torch.sub", "multiply": "torch.mul",
    "floor_divide": "torch.floor_divide", "floor_mod": "torch.remainder", "mod": "torch.fmod",
    "power": "torch.pow", "maximum": "torch.maximum", "minimum": "torch.minimum",
    "bitwise_and": "torch.bitwise_and", "bitwise_or": "torch.bitwise_or",
    "bitwise_xor": "torch.bitwise_xor", "left_shift": "torch.bitwise_left_shift",
    "right_shift": "torch.bitwise_right_shift", "log_add_exp": "torch.logaddexp",
    "equal": "torch.eq", "not_equal": "torch.ne", "less": "torch.lt", "less_equal": "torch.le",
    "greater": "torch.gt", "greater_equal": "torch.ge", "logical_and": "torch.logical_and",
    "logical_or": "torch.logical_or", "logical_xor": "torch.logical_xor",
    "det": "torch.linalg.det", "outer": "torch.outer", "where": "torch.where", "matmul": "torch.matmul",
    "msc.matmul": "torch.matmul", "gather_elements": "torch.gather",
}


def _divide(ctx) -> str:
    if ctx.out.dtype.startswith(("int", "uint")):  # TVM's integer division truncates
        return call("torch.div", *ctx.inputs, rounding_mode='"trunc"')
    return call("torch.div", *ctx.inputs)


def _gather(ctx) -> str:
    return call("torch.gather", ctx.input(0), ctx.attr("axis"), f"{ctx.input(1)}.long()")


ROWS: dict[str, Row] = {
    **{op: Row(func) for op, func in _UNARY.items()},
    **{op: Row(func) for op, func in _BINARY.items()},
    "divide": Row(convert=_divide),
    "gather_elements": Row(convert=_gather),
    "matmul": Row("torch.matmul", convert=lambda c: call("torch.matmul", *c.inputs)
                  + _to(c.attr("out_dtype"), c)),
    # nn
    **{f"nn.conv{d}d": Row(convert=convert_conv) for d in (1, 2, 3)},
    **{f"nn.conv{d}d_transpose": Row(convert=convert_conv) for d in (1, 2, 3)},
    **{f"nn.{k}_pool{d}d": Row(convert=convert_pool(k, d)) for k in ("max", "avg") for d in (1, 2, 3)},
    **{f"nn.adaptive_avg_pool{d}d": Row(convert=convert_adaptive_pool(d)) for d in (1, 2, 3)},
    "nn.batch_norm": Row(convert=convert_batch_norm), "nn.layer_norm": Row(convert=convert_layer_norm),
    "nn.group_norm": Row(convert=convert_group_norm), "nn.instance_norm": Row(convert=convert_instance_norm),
    "nn.rms_norm": Row(convert=convert_rms_norm),
    "nn.relu": Row("F.relu"), "nn.gelu": Row("F.gelu"), "nn.silu": Row("F.silu"),
    "nn.gelu_tanh": Row(convert=lambda c: call("F.gelu", c.input(0), approximate='"tanh"')),
    "nn.selu": Row("F.selu"), "nn.softplus": Row("F.softplus", {"beta": "beta",
                                                                 "threshold": "threshold"}),
    "nn.leakyrelu": Row("F.leaky_relu", {"alpha": "negative_slope"}),
    "nn.prelu": Row(convert=convert_prelu),
    "nn.softmax": Row("F.softmax", {"axis": "dim"}),
    "nn.log_softmax": Row("F.log_softmax", {"axis": "dim"}),
    "nn.dropout": Row(convert=convert_dropout), "nn.pad": Row(convert=convert_pad),
    "nn.batch_flatten": Row(convert=lambda c: call("torch.flatten", c.input(0), 1)),
    "nn.pixel_shuffle": Row("F.pixel_shuffle", {"upscale_factor": "upscale_factor"}),
    "nn.attention": Row(convert=convert_attention), "nn.attention_bias": Row(convert=convert_attention),
    "nn.attention_var_len": Row(convert=convert_attention_var_len),
    "nn.cross_entropy_with_logits": Row(convert=convert_cross_entropy),
    "nn.nll_loss": Row(convert=convert_nll_loss),
    "image.resize2d": Row(convert=convert_resize(2)), "image.resize3d": Row(convert=convert_resize(3)),
    "image.grid_sample": Row(convert=convert_grid_sample),
    "image.affine_grid": Row(convert=convert_affine_grid),
    # indexing
    "strided_slice": Row(convert=convert_strided_slice),
    "dynamic_strided_slice": Row(convert=lambda c: (
        f"{c.input(0)}[tuple(slice(*v) for v in zip({c.input(1)}.tolist(), "
        f"{c.input(2)}.tolist(), {c.input(3)}.tolist()))]")),
    "take": Row(convert=convert_take), "gather_nd": Row(convert=convert_gather_nd),
    "scatter_elements": Row(convert=convert_scatter_elements), "scatter_nd": Row(convert=convert_scatter_nd),
    "one_hot": Row(convert=convert_one_hot), "index_tensor": Row(convert=convert_index_tensor),
    "index_put": Row(convert=convert_index_put), "slice_scatter": Row(convert=convert_slice_scatter),
    "index_copy": Row(convert=convert_index_copy),
    "reverse_sequence": Row(convert=convert_reverse_sequence),
    "bucketize": Row("torch.bucketize", {"out_int32": "out_int32", "right": "right"}),
    # linalg, manipulation
    "einsum": Row(convert=lambda c: call("torch.einsum", literal(c.attr("subscripts")),
                                          *c.inputs)),
    "astype": Row(convert=lambda c: f"{c.input(0)}.to({c.dtype()})"),
    "reinterpret": Row(convert=lambda c: f"{c.input(0)}.view({c.dtype()})"),
    "broadcast_to": Row("torch.broadcast_to"),
    "clip": Row("torch.clamp"), "reshape": Row("torch.reshape"),
    "flatten": Row("torch.flatten"), "expand_dims": Row(convert=_expand_dims),
    "squeeze": Row(convert=_squeeze),
    "collapse_sum_like": Row(convert=lambda c: f"{c.input(0)}.sum_to_size({c.input(1)}.shape)"),
    "collapse_sum_to": Row(convert=lambda c: f"{c.input(0)}.sum_to_size({c.dims(c.out)})"),
    "permute_dims": Row(convert=_permute_dims),
    "flip": Row(convert=lambda c: call("torch.flip", c.input(0), f"[{c.attr('axis')}]")),
    "repeat": Row(convert=_repeat),
    "tile": Row(convert=lambda c: f"{c.input(0)}.tile({tuple_of(c.attr('repeats'))})"),
    "concat": Row("torch.cat", {"axis": "dim"}), "stack": Row("torch.stack", {"axis": "dim"}),
    "split": Row(convert=_split), "layout_transform": Row(convert=convert_layout_transform),
    "meshgrid": Row(convert=lambda c: call("torch.meshgrid", *c.inputs,
                                            indexing=literal(c.attr("indexing")))),
    "shape_of": Row(convert=lambda c: f"tuple({c.input(0)}.shape)"),
    "tensor_to_shape": Row(convert=lambda c: f"tuple({c.input(0)}.tolist())"),
    "shape_to_tensor": Row(convert=lambda c: call("torch.tensor", c.args()[0],
                                                   dtype="torch.int64")),
    "size": Row(convert=lambda c: call("torch.tensor", f"{c.input(0)}.numel()",
                                        dtype=c.dtype())),
    # relay
    "nn.dense": Row(convert=lambda c: call("F.linear", *c.inputs[:2]) +
                    _to(c.attr("out_dtype"), c)),
    "nn.batch_matmul": Row(convert=_batch_matmul), "nn.bias_add": Row(convert=_bias_add),
    # msc
    "msc.conv1d_bias": Row(convert=convert_conv), "msc.conv2d_bias": Row(convert=convert_conv),
    "msc.linear": Row(convert=_linear), "msc.linear_bias": Row(convert=_linear),
    "msc.embedding": Row(convert=_embedding), "msc.attention": Row(convert=convert_msc_attention),
    "msc.gelu": Row(convert=lambda c: call("F.gelu", c.input(0))),
    # quantization
    "quantize": Row(convert=_quantize), "dequantize": Row(convert=_dequantize),
    "matmul_nbits": Row(convert=_matmul_nbits),
    # reductions, scans, sorting
    "sum": Row(convert=_reduce("torch.sum"), cast=True),
    "mean": Row(convert=_reduce("torch.mean")), "max": Row(convert=_reduce("torch.amax")),
    "min": Row(convert=_reduce("torch.amin")), "prod": Row(convert=_prod, cast=True),
    "std": Row(convert=_reduce("torch.std", correction=0)),
    "variance": Row(convert=_reduce("torch.var", correction=0)),
    "median": Row(convert=_median),
    "argmax": Row(convert=_arg_reduce("torch.argmax"), cast=True),
    "argmin": Row(convert=_arg_reduce("torch.argmin"), cast=True),
    "cumsum": Row(convert=_cumulative("torch.cumsum", "zeros")),
    "cumprod": Row(convert=_cumulative("torch.cumprod", "ones")),
    "sort": Row(convert=_sort), "argsort": Row(convert=_argsort), "topk": Row(convert=_topk),
    "nonzero": Row(convert=lambda c: f"torch.nonzero({c.input(0)}).T", cast=True),
    "unique": Row(convert=_unique),
    # creation
    "full": Row(convert=_full),
    "full_like": Row(convert=lambda c: call("torch.full_like", c.input(0),
                                             f"{c.tensor_arg('fill_value')}.item()",
                                             dtype=c.dtype())),
    "ones": Row(convert=lambda c: call("torch.ones", c.dims(c.out), dtype=c.dtype())),
    "zeros": Row(convert=lambda c: call("torch.zeros", c.dims(c.out), dtype=c.dtype())),
    "ones_like": Row(convert=lambda c: call("torch.ones_like", c.input(0), dtype=c.dtype())),
    "zeros_like": Row(convert=lambda c: call("torch.zeros_like", c.input(0), dtype=c.dtype())),
    "tril": Row(convert=lambda c: call("torch.tril", c.input(0), arg_value(c, "k"))),
    "triu": Row(convert=lambda c: call("torch.triu", c.input(0), arg_value(c, "k"))),
    "arange": Row(convert=_arange),
    "eye": Row(convert=lambda c: _eye(c, c.dims(c.out))),
    "eye_like": Row(convert=lambda c: _eye(c, f"{c.input(0)}.shape")),
    "hamming_window": Row(convert=_hamming),
}


def attach_rows() -> None:
    """Attach every row to its op record (the op fact ``"torch"``)."""
    for name, row in ROWS.items():
        if name in OPS:
            attach(name, "torch", row)


attach_rows()  # the op fact "torch" is attached on import (see msc/relax/op/facts.py)
