"""Channel rules: the pruner's fact about each op, attached to the op table (kind ``"prune"``).

A rule says how an op's axes carry channels: which input axes pass to which output axes, which
weight axes are tied to them (read from the weight's layout letters ``O``/``I``, the data layout
attrs and the op's axis attrs), and which axes it fixes. Rules go by the op table's families and
traits (``unary``, ``binary``, ``norm``, ``pool``, ``view``...), so a new op of a known family
is covered; an op without a rule freezes every axis it touches (never a guess). A rule may also
rewrite attrs whose values count channels (conv ``groups``, ``split`` points), and estimate its
FLOPs.

    load_facts("prune"); OPS["nn.conv2d"].facts["prune"].ties(ctx)   # -> output expressions
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from msc.graph import encode_attr
from msc.relax.op.registry import OPS, attach

from .context import RuleContext, parse_ints
from .dims import Cat, Fixed, Prod

__all__ = ["ChannelRule", "rule_of"]


@dataclass(frozen=True)
class ChannelRule:
    """``ties(ctx) -> [output exprs]``; ``rewrite(node_dict, old, new)`` fixes channel-counting
    attrs from the old and new shapes; ``flops(node) -> int`` (multiply-adds count 2)."""

    ties: Callable[[RuleContext], list]
    rewrite: Callable | None = None
    flops: Callable | None = None


def _numel(shape) -> int:
    return math.prod(max(d, 1) for d in shape)


def _elementwise_flops(node) -> int:
    return sum(_numel(t.shape) for t in node.outputs)


def _weight_flops(node) -> int:
    """2 x outputs x (weight elements per output channel): conv, linear, depthwise alike."""
    weight = node.weights.get("weight")
    if weight is None or weight.ndim < 2:
        return _elementwise_flops(node)
    out_axis = weight.layout_of("O") if weight.layout else 0
    per_out = _numel(weight.shape) // max(weight.shape[max(out_axis, 0)], 1)
    return 2 * _numel(node.outputs[0].shape) * per_out


def _matmul_flops(node) -> int:
    inputs = node.get_inputs()
    return 2 * _numel(node.outputs[0].shape) * max(inputs[0].shape[-1], 1)


def _attention_flops(node) -> int:
    q, k = node.get_inputs()[:2]
    # scores (Sq x Sk x D) and the weighted sum (Sq x Sk x Dv), per batch and head
    return 4 * _numel(q.shape) * max(k.shape[-2], 1)


# --------------------------------------------------------------------------------------------
# Rules.

def same(ctx: RuleContext) -> list:
    """Every axis passes (unary math, activations, casts, softmax along any axis)."""
    for i in range(1, len(ctx.ins)):
        ctx.freeze_input(i)
    return [list(ctx.ins[0]) for _ in ctx.out_shapes]


def broadcast(ctx: RuleContext) -> list:
    """Elementwise over several inputs: axes of the same size (aligned right) are tied."""
    out_shape = ctx.out_shapes[0]
    out = []
    for k, size in enumerate(out_shape):
        found = None
        for exprs, shape in zip(ctx.ins, ctx.in_shapes):
            axis = k - (len(out_shape) - len(shape))
            if axis < 0 or shape[axis] != size:
                continue
            if found is None:
                found = exprs[axis]
            else:
                ctx.unify(found, exprs[axis])
        out.append(found if found is not None else Fixed(size))
    return [out]


def norm(ctx: RuleContext) -> list:
    """Norm params are per channel along the normalized (or channel) axes."""
    rank = len(ctx.in_shapes[0])
    channel = ctx.axis("channel_axis", rank, ctx.axis("axis", rank))
    axes = [channel] if channel is not None else [a % rank for a in ctx.ints("axes", [-1])]
    exprs = [ctx.ins[0][a] for a in axes]
    groups = ctx.int("num_groups")
    if groups and groups > 1 and len(exprs) == 1:  # group norm: groups keep equal sizes
        inner = ctx.dims.leaf(ctx.in_shapes[0][axes[0]] // groups)
        ctx.unify(exprs[0], Prod((Fixed(groups), inner)))
    for role, weight in ctx.node.weights.items():
        if weight.ndim == len(exprs):
            ctx.set_weight(role, exprs)
    for i, shape in enumerate(ctx.in_shapes[1:], 1):  # params given as inputs (PReLU alpha)
        if len(shape) == len(exprs):
            for param, expr in zip(ctx.ins[i], exprs):
                ctx.unify(param, expr)
        else:
            ctx.freeze_input(i)
    return [list(ctx.ins[0]) for _ in ctx.out_shapes]


def layout_pass(ctx: RuleContext) -> list:
    """Pools and resizes: batch and channel letters of the ``layout`` attr pass, the rest is
    spatial (fixed)."""
    layout = ctx.node.get_attr("layout") or ctx.node.get_attr("data_layout") or ""
    if len(layout) != len(ctx.in_shapes[0]):
        return ctx.freeze_all()
    keep = [k for k, letter in enumerate(layout) if letter in "NC"]
    ctx.freeze_input(0, keep)
    for i in range(1, len(ctx.ins)):
        ctx.freeze_input(i)
    out = ctx.fixed(ctx.out_shapes[0])
    for k in keep:
        out[k] = ctx.ins[0][k]
    return [out]


def reduce(ctx: RuleContext) -> list:
    """Reduced axes are fixed (an argmax over channels names channels); the rest pass. A
    ``mean`` kept as a size-1 axis is a norm's statistic (RMSNorm written as ops): its
    channels prune as a LayerNorm's do, the mean then taken over the kept ones."""
    rank = len(ctx.in_shapes[0])
    axes = ctx.ints("axis")
    axes = set(range(rank)) if axes is None else {a % rank for a in axes}
    keepdims = bool(ctx.int("keepdims", 0))
    statistic = ctx.node.optype == "mean" and keepdims
    ctx.freeze_input(0, keep=set(range(rank)) if statistic else set(range(rank)) - axes)
    out = [Fixed(1) if k in axes else e for k, e in enumerate(ctx.ins[0])
           if keepdims or k not in axes]
    return [out]


def conv(ctx: RuleContext) -> list:
    """Input C ~ weight I (x groups); weight O is a new channel space -> output C."""
    node = ctx.node
    data_c = (node.get_attr("data_layout") or "NCHW").find("C")
    out_c = (node.get_attr("out_layout") or node.get_attr("data_layout") or "NCHW").find("C")
    kernel = node.get_attr("kernel_layout") or ""
    if "weight" not in node.weights or data_c < 0 or out_c < 0 or set("OI") - set(kernel):
        return ctx.freeze_all()
    w_shape = node.weight_at("weight").shape
    o_axis, i_axis = kernel.index("O"), kernel.index("I")
    groups, cin = ctx.int("groups", 1), ctx.in_shapes[0][data_c]
    if "transpose" in node.optype and groups != 1:
        return ctx.freeze_all()
    w_in, w_out = _conv_channels(ctx, groups, cin, w_shape[i_axis], w_shape[o_axis], data_c)
    ctx.freeze_input(0, keep=(0, data_c))
    weight = ctx.fixed(w_shape)
    weight[o_axis], weight[i_axis] = w_out, w_in
    ctx.set_weight("weight", weight)
    out = ctx.fixed(ctx.out_shapes[0])
    out[0], out[out_c] = ctx.ins[0][0], w_out
    _set_bias(ctx, out, out_c)
    return [out]


def _conv_channels(ctx, groups: int, cin: int, w_in: int, w_out: int, data_c: int):
    """(weight I expr, weight O expr). Depthwise convs prune whole groups (``groups`` shrinks);
    other grouped convs prune the same channels in every group (``groups`` stays)."""
    data = ctx.ins[0][data_c]
    if groups == 1:
        return data, ctx.dims.leaf(w_out)
    if w_in == 1 and groups == cin:  # depthwise (x multiplier)
        return Fixed(1), Prod((data, Fixed(w_out // groups)))
    inner = ctx.dims.leaf(w_in)
    ctx.unify(data, Prod((Fixed(groups), inner)))
    return inner, Prod((Fixed(groups), ctx.dims.leaf(w_out // groups)))


def _set_bias(ctx: RuleContext, out: list, axis: int) -> None:
    if "bias" not in ctx.node.weights:
        return
    bias = ctx.node.weight_at("bias")
    if bias.ndim == 1:
        ctx.set_weight("bias", [out[axis]])
    elif bias.ndim == len(out):
        ctx.set_weight("bias", [out[k] if k == axis else Fixed(1) for k in range(len(out))])


def _conv_rewrite(node: dict, old: dict, new: dict) -> None:
    """``groups`` = input channels / weight in-channels, after pruning."""
    attrs = node["attrs"]
    kernel, layout = attrs.get("kernel_layout", ""), attrs.get("data_layout", "NCHW")
    weight = node["weights"].get("weight")
    if "I" not in kernel or "C" not in layout or weight is None or "transpose" in node["optype"]:
        return
    cin = new["inputs"][0][layout.index("C")]
    attrs["groups"] = encode_attr(cin // weight["shape"][kernel.index("I")])


def linear(ctx: RuleContext) -> list:
    """Weight ``OI``: I ~ the input's last axis, O is a new channel space (output last axis)."""
    if "weight" not in ctx.node.weights or ctx.node.weight_at("weight").ndim != 2:
        return ctx.freeze_all()
    w_shape = ctx.node.weight_at("weight").shape
    o_axis = ctx.weight_axis("weight", "O", 0)
    w_out = ctx.dims.leaf(w_shape[o_axis])
    weight = [None, None]
    weight[o_axis], weight[1 - o_axis] = w_out, ctx.ins[0][-1]
    ctx.set_weight("weight", weight)
    out = [*ctx.ins[0][:-1], w_out]
    _set_bias(ctx, out, len(out) - 1)
    return [out]


def embedding(ctx: RuleContext) -> list:
    if "weight" not in ctx.node.weights or ctx.node.weight_at("weight").ndim != 2:
        return ctx.freeze_all()
    vocab, width = ctx.node.weight_at("weight").shape
    dim = ctx.dims.leaf(width)
    ctx.set_weight("weight", [Fixed(vocab), dim])
    ctx.freeze_input(0, keep=range(len(ctx.ins[0])))
    return [[*ctx.ins[0], dim]]


def matmul(ctx: RuleContext) -> list:
    """[..., M, K] x [..., K, N]: K tied; batch axes broadcast; M and N pass."""
    (a, b), (sa, sb) = ctx.ins[:2], ctx.in_shapes[:2]
    if len(sa) < 2 or len(sb) < 2:
        return ctx.freeze_all()
    ctx.unify(a[-1], b[-2])
    out_shape = ctx.out_shapes[0]
    batch = []
    for k in range(len(out_shape) - 2):
        found = None
        for exprs, shape in ((a, sa), (b, sb)):
            axis = k - (len(out_shape) - len(shape))
            if not (0 <= axis < len(shape) - 2 and shape[axis] == out_shape[k]):
                continue
            if found is None:
                found = exprs[axis]
            else:
                ctx.unify(found, exprs[axis])
        batch.append(found if found is not None else Fixed(out_shape[k]))
    return [[*batch, a[-2], b[-1]]]


def attention(ctx: RuleContext) -> list:
    """q, k, v as [B, S, H, D] after each input's permute (``axes``, ``axes_1``, ``axes_2``):
    heads tied across q, k, v; D of q ~ D of k; S of k ~ S of v; a bias/mask broadcasts
    against the scores [B, H, Sq, Sk] (a relative position bias loses the pruned heads)."""
    perms = [ctx.ints(key, [0, 1, 2, 3]) for key in ("axes", "axes_1", "axes_2")]
    if any(len(s) != 4 for s in ctx.in_shapes[:3]):
        return ctx.freeze_all()
    q, k, v = ([ctx.ins[i][p] for p in perm] for i, perm in enumerate(perms))
    for x, y in ((q[0], k[0]), (k[0], v[0]), (q[2], k[2]), (k[2], v[2]), (q[3], k[3]),
                 (k[1], v[1])):
        ctx.unify(x, y)
    scores = [q[0], q[2], q[1], k[1]]  # [B, H, Sq, Sk]: a bias broadcasts against these
    sizes = [ctx.in_shapes[0][perms[0][a]] for a in (0, 2, 1)] + [ctx.in_shapes[1][perms[1][1]]]
    for i in range(3, len(ctx.ins)):
        shape = ctx.in_shapes[i]
        for axis, expr in enumerate(ctx.ins[i]):
            target = axis - len(shape) + 4
            if 0 <= target < 4 and shape[axis] == sizes[target]:
                ctx.unify(expr, scores[target])
            else:
                ctx.freeze(expr)
    out = [q[0], q[1], q[2], v[3]]
    back = ctx.ints("axes_3", [0, 1, 2, 3])
    return [[out[p] for p in back]]


def take(ctx: RuleContext) -> list:
    """Gather along ``axis``: that axis is fixed (indices name its positions), the index
    tensor's axes come in its place, the other data axes pass (q/k/v picked from a packed
    projection keep their channels)."""
    rank = len(ctx.in_shapes[0])
    axis = ctx.axis("axis", rank)
    if axis is None or len(ctx.ins) != 2:
        return ctx.freeze_all()
    data = ctx.ins[0]
    ctx.freeze(data[axis])
    ctx.freeze_input(1)
    return [[*data[:axis], *ctx.fixed(ctx.in_shapes[1]), *data[axis + 1:]]]


def permute(ctx: RuleContext) -> list:
    axes = ctx.ints("axes") or list(reversed(range(len(ctx.in_shapes[0]))))
    return [[ctx.ins[0][a] for a in axes]]


def concat(ctx: RuleContext) -> list:
    rank = len(ctx.out_shapes[0])
    axis = ctx.axis("axis", rank, 0)
    out = list(ctx.ins[0])
    for exprs in ctx.ins[1:]:
        for k in range(rank):
            if k != axis:
                ctx.unify(out[k], exprs[k])
    out[axis] = Cat(tuple(exprs[axis] for exprs in ctx.ins))
    return [out]


def split(ctx: RuleContext) -> list:
    rank = len(ctx.in_shapes[0])
    axis = ctx.axis("axis", rank, 0)
    parts = [ctx.dims.leaf(shape[axis]) for shape in ctx.out_shapes]
    ctx.unify(ctx.ins[0][axis], Cat(tuple(parts)))
    return [[p if k == axis else e for k, e in enumerate(ctx.ins[0])] for p in parts]


def _split_rewrite(node: dict, old: dict, new: dict) -> None:
    attrs = node["attrs"]
    rank = len(new["inputs"][0])
    axis = (parse_ints(attrs.get("axis")) or [0])[0] % rank
    sizes = [shape[axis] for shape in new["outputs"]]
    if "," not in attrs.get("indices_or_sections", "") and len(set(sizes)) == 1:
        return  # equal sections stay equal
    points = [sum(sizes[:i + 1]) for i in range(len(sizes) - 1)]
    attrs["indices_or_sections"] = encode_attr(points)


def view(ctx: RuleContext) -> list:
    """reshape / flatten / expand_dims / squeeze: runs of dims with equal products are the
    same positions; a merged run is a product; a split axis becomes new spaces, its outer
    factors prunable (whole heads, whole channels of C x H x W) and the innermost one marked
    ``inner`` (head dims: frozen unless ``prune_head_dims``)."""
    in_shape, out_shape = ctx.in_shapes[0], ctx.out_shapes[0]
    runs = _runs(in_shape, out_shape)
    if runs is None:
        return ctx.freeze_all()
    out = ctx.fixed(out_shape)
    for in_axes, out_axes in runs:
        source = Prod(tuple(ctx.ins[0][k] for k in in_axes))
        if len(out_axes) == 1:
            out[out_axes[0]] = ctx.dims.resolve(source)
            continue
        parts = ctx.dims.reshape(source, [out_shape[k] for k in out_axes])
        if parts is None:
            ctx.freeze(source)
            continue
        for k, part in zip(out_axes, parts):
            out[k] = part
    return [out]


def _runs(a: list, b: list) -> list | None:
    """Pairs (input axes, output axes) of non-1 dims covering equal products, or None."""
    ia = [k for k, d in enumerate(a) if d != 1]
    ib = [k for k, d in enumerate(b) if d != 1]
    runs = []
    while ia and ib:
        ra, rb = [ia.pop(0)], [ib.pop(0)]
        pa, pb = a[ra[0]], b[rb[0]]
        if -1 in (pa, pb):
            if pa != pb:
                return None
            runs.append((ra, rb))
            continue
        while pa != pb:
            if pa < pb and ia and a[ia[0]] != -1:
                ra.append(ia.pop(0))
                pa *= a[ra[-1]]
            elif pb < pa and ib and b[ib[0]] != -1:
                rb.append(ib.pop(0))
                pb *= b[rb[-1]]
            else:
                return None
        runs.append((ra, rb))
    return None if ia or ib else runs


def _view_rewrite(node: dict, old: dict, new: dict) -> None:
    """A reshape's target shape follows its output, where a dim changed."""
    shape = node["attrs"].get("shape")
    target = shape.split(",") if shape else None
    old_out, new_out = old["outputs"][0], new["outputs"][0]
    if not target or len(target) != len(new_out) or old_out == new_out:
        return
    for k, (before, after) in enumerate(zip(old_out, new_out)):
        if before != after:
            target[k] = str(after)
    node["attrs"]["shape"] = ",".join(target)


def strided_slice(ctx: RuleContext) -> list:
    """Axes not cut (or cut to their whole range) pass; an axis cut at its start or its end
    is the kept part of a concat whose rest nobody reads (GhostNet's ``cat(...)[:, :cout]``);
    a cut from the middle, a step, or bounds read at run time freeze the axis."""
    rank = len(ctx.in_shapes[0])
    axes, begin, end = ctx.ints("axes", []), ctx.ints("begin", []), ctx.ints("end", [])
    strides = ctx.ints("strides") or [1] * len(axes)
    if len(ctx.ins) > 1 or not len(axes) == len(begin) == len(end) == len(strides):
        return ctx.freeze_all()
    out = list(ctx.ins[0])
    for axis, b, e, s in zip(axes, begin, end, strides):
        axis %= rank
        size, kept = ctx.in_shapes[0][axis], ctx.out_shapes[0][axis]
        start, stop, _ = slice(b, e, s).indices(max(size, 0))
        if size >= 0 and s == 1 and start == 0 and stop == size:
            continue
        if size < 0 or s != 1 or 0 < start <= stop < size or kept < 1:
            ctx.freeze(ctx.ins[0][axis])
            out[axis] = Fixed(kept)
            continue
        inner = any(space.inner for space in ctx.dims.leaves(ctx.ins[0][axis]))
        part, rest = ctx.dims.leaf(kept, inner), ctx.dims.leaf(size - kept, inner)
        ctx.unify(ctx.ins[0][axis], Cat((part, rest) if start == 0 else (rest, part)))
        out[axis] = part
    return [out]


def _slice_rewrite(node: dict, old: dict, new: dict) -> None:
    """Bounds of a pruned axis: the kept part stays at the start (or the end) of the axis."""
    attrs = node["attrs"]
    axes = parse_ints(attrs.get("axes")) or []
    begin, end = parse_ints(attrs.get("begin")), parse_ints(attrs.get("end"))
    rank = len(old["inputs"][0])
    for k, axis in enumerate(axes):
        axis %= rank
        size, new_size = old["inputs"][0][axis], new["inputs"][0][axis]
        kept = new["outputs"][0][axis]
        if size == new_size and kept == old["outputs"][0][axis]:
            continue
        start = slice(begin[k], end[k]).indices(size)[0]
        begin[k], end[k] = (0, kept) if start == 0 else (new_size - kept, new_size)
    attrs["begin"], attrs["end"] = encode_attr(begin), encode_attr(end)


def broadcast_to(ctx: RuleContext) -> list:
    """Axes that keep their size pass; an axis grown from 1 is new and fixed (repeat_kv's
    expand of the KV heads, which the reshape after it merges with the heads: a query head
    group then goes with its KV head)."""
    in_shape, out_shape = ctx.in_shapes[0], ctx.out_shapes[0]
    lead = len(out_shape) - len(in_shape)
    for i in range(1, len(ctx.ins)):
        ctx.freeze_input(i)
    out = ctx.fixed(out_shape)
    for k, size in enumerate(in_shape):
        if lead >= 0 and size == out_shape[lead + k]:
            out[lead + k] = ctx.ins[0][k]
        else:
            ctx.freeze(ctx.ins[0][k])
    return [out]


def pad(ctx: RuleContext) -> list:
    """Axes without padding pass (batch, channels); padded ones are spatial, fixed."""
    rank = len(ctx.in_shapes[0])
    widths = ctx.ints("pad_width")
    if widths is None or len(widths) != 2 * rank or len(ctx.ins) > 1:
        return ctx.freeze_all()
    out = ctx.fixed(ctx.out_shapes[0])
    for k in range(rank):
        if widths[2 * k] == widths[2 * k + 1] == 0:
            out[k] = ctx.ins[0][k]
        else:
            ctx.freeze(ctx.ins[0][k])
    return [out]


def default_rule(ctx: RuleContext) -> list:
    return ctx.freeze_all()


# --------------------------------------------------------------------------------------------
# The table: by family and trait, then the ops whose rule is their own.

_BY_FAMILY = {
    "unary": ChannelRule(same, flops=_elementwise_flops),
    "activation": ChannelRule(same, flops=_elementwise_flops),
    "binary": ChannelRule(broadcast, flops=_elementwise_flops),
    "compare": ChannelRule(broadcast, flops=_elementwise_flops),
    "norm": ChannelRule(norm, flops=lambda n: 4 * _elementwise_flops(n)),
    "pool": ChannelRule(layout_pass, flops=lambda n: _numel(n.get_inputs()[0].shape)),
    "reduce": ChannelRule(reduce, flops=lambda n: _numel(n.get_inputs()[0].shape)),
    "conv": ChannelRule(conv, _conv_rewrite, _weight_flops),
}
_BY_OP = {
    "astype": ChannelRule(same), "clip": ChannelRule(same, flops=_elementwise_flops),
    "msc.gelu": ChannelRule(same, flops=_elementwise_flops),
    "where": ChannelRule(broadcast, flops=_elementwise_flops),
    "image.resize2d": ChannelRule(layout_pass, flops=_elementwise_flops),
    "msc.conv1d_bias": ChannelRule(conv, _conv_rewrite, _weight_flops),
    "msc.conv2d_bias": ChannelRule(conv, _conv_rewrite, _weight_flops),
    "msc.linear": ChannelRule(linear, flops=_weight_flops),
    "msc.linear_bias": ChannelRule(linear, flops=_weight_flops),
    "nn.dense": ChannelRule(linear, flops=_weight_flops),
    "msc.embedding": ChannelRule(embedding),
    "matmul": ChannelRule(matmul, flops=_matmul_flops),
    "msc.matmul": ChannelRule(matmul, flops=_matmul_flops),
    "msc.attention": ChannelRule(attention, flops=_attention_flops),
    "nn.attention": ChannelRule(attention, flops=_attention_flops),
    "nn.attention_bias": ChannelRule(attention, flops=_attention_flops),
    "permute_dims": ChannelRule(permute),
    "take": ChannelRule(take),
    "concat": ChannelRule(concat),
    "split": ChannelRule(split, _split_rewrite),
    "strided_slice": ChannelRule(strided_slice, _slice_rewrite),
    "nn.pad": ChannelRule(pad, flops=_elementwise_flops),
    "broadcast_to": ChannelRule(broadcast_to, _view_rewrite),
    "nn.prelu": ChannelRule(norm, flops=_elementwise_flops),  # alpha per channel of ``axis``
}
DEFAULT = ChannelRule(default_rule)


def _attach_all() -> None:
    for name, op_def in OPS.items():
        rule = _BY_OP.get(name) or _BY_FAMILY.get(op_def.family)
        if rule is None and op_def.view:
            rule = ChannelRule(view, _view_rewrite)
        if rule is not None:
            attach(name, "prune", rule)


def rule_of(optype: str) -> ChannelRule:
    """The channel rule of an optype (the conservative default when it has none)."""
    op_def = OPS.get(optype)
    return op_def.facts.get("prune", DEFAULT) if op_def is not None else DEFAULT


_attach_all()
