"""MSC's layout rules: one row per op, attached to the op table as the fact ``"layout"``.

A row is a :class:`LayoutRule` with up to three functions of a call view (see ``layout.py``):

- ``forward``  MSC's own forward rule (``FMSCForwardInferLayout``): input and output layouts.
- ``backward`` MSC's backward rule (``FMSCBackwardInferLayout``); the common one when None.
- ``relax``    Relax's own ``FRelaxInferLayout``: only the output layout, seen through Relax's
  eyes (a value without a layout reads as the generic ``"ABCD…"``). None: Relax has no rule.

A rule that cannot decide raises :class:`RuleFailed`. Layouts are strings (``""`` = unknown) or
tuples of strings for tuple values::

    rule_for(get_op("nn.conv2d")).forward(view)   # Inferred(inputs=("NCHW", "OIHW"), ...)

The layout-string algebra the rules use (expand, reduce, permute, InferReshapeAxes) is in
``layout_strings.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from msc.relax.op.registry import OPS, OpDef, attach

from .layout_strings import (
    MATMUL_DEFAULTS,
    NORM_DEFAULTS,
    RuleFailed,
    as_list,
    expand_layout,
    get_index,
    infer_reshape_axes,
    initial_layout,
    permute_layout,
    reduce_layout,
)

__all__ = ["COMMON_RULE", "FAMILY_RULES", "PLUGIN_RULES", "RULES", "Inferred", "LayoutRule",
           "attach_rules", "rule_for"]


@dataclass(frozen=True)
class Inferred:
    """What a forward/backward rule decides: one layout per argument, and the output."""

    inputs: tuple
    output: str | tuple


@dataclass(frozen=True)
class LayoutRule:
    forward: Callable | None = None
    backward: Callable | None = None
    relax: Callable | None = None


# --------------------------------------------------------------------------------------------
# Common rules (ForwardInferLayoutCommon / BackwardInferLayoutCommon).

def common_forward(view) -> Inferred:
    """Output = the last input with a known layout (every field of a tuple output); a tensor
    output takes only a layout of its own rank (a bias constant's ``O`` must not become the
    layout of the 2-D sum it is added to)."""
    inputs = tuple(view.layout(i) for i in range(view.nargs))
    rank = view.out_ndim if view.out_is_tensor and view.out_ndim >= 0 else None
    hint = next((lay for lay in reversed(inputs)
                 if lay and (rank is None or len(lay) == rank)), "")
    if not hint:
        raise RuleFailed("no input has a layout")
    if view.out_fields is not None:
        return Inferred(inputs, (hint,) * view.out_fields)
    if not view.out_is_tensor:
        raise RuleFailed("output is neither a tensor nor a tuple")
    return Inferred(inputs, hint)


def common_backward(view) -> Inferred:
    """Inputs without a layout take the output's (the last known field of a tuple)."""
    out = view.out_nlayout()
    fields = (out,) if isinstance(out, str) else out
    hint = next((f for f in reversed(fields) if isinstance(f, str) and f), "")
    if not hint:
        raise RuleFailed("output has no layout")
    return Inferred(tuple(view.layout(i) or hint for i in range(view.nargs)), out)


# --------------------------------------------------------------------------------------------
# Seeds: layouts taken from attrs.

def conv_layouts(view) -> Inferred:
    data = view.attr("data_layout")
    return Inferred((data, view.attr("kernel_layout")), view.attr("out_layout") or data)


def conv_bias_layouts(view) -> Inferred:
    conv = conv_layouts(view)
    return Inferred((*conv.inputs, "O"), conv.output)


def pool_layouts(view) -> Inferred:
    layout = view.attr("layout")
    return Inferred((layout,), view.attr("out_layout") or layout)


def resize_layouts(view) -> Inferred:
    layout = view.attr("layout")
    return Inferred((layout, "O"), layout)


def _norm_data(view) -> str:
    rank = len(view.shape(0))
    if rank == 0:
        raise RuleFailed("norm input has no shape")
    return view.layout(0) or NORM_DEFAULTS.get(rank, "")


def batch_norm_forward(view) -> Inferred:
    data = _norm_data(view)
    return Inferred((data, "O", "O", "O", "O"), (data, "O", "O"))


def batch_norm_backward(view) -> Inferred:
    out = _required(view.out_first())
    return Inferred((out, "O", "O", "O", "O"), (out, "O", "O"))


def norm_forward(view) -> Inferred:
    data = _norm_data(view)
    return Inferred((data, "O", "O"), data)


def norm_backward(view) -> Inferred:
    out = _required(view.out_first())
    return Inferred((out, "O", "O"), out)


def _required(layout: str) -> str:
    if not layout:
        raise RuleFailed("layout unknown")
    return layout


# --------------------------------------------------------------------------------------------
# Binary elementwise: common, then rank-0 inputs "" and rank-1 inputs the last output letter.

def _binary_inputs(view, base: Inferred) -> Inferred:
    inputs = []
    for i, layout in enumerate(base.inputs):
        ndim = view.ndim(i)
        if not view.is_tensor(i):
            raise RuleFailed("binary input is not a tensor")
        inputs.append("" if ndim == 0 else base.output[-1] if ndim == 1 else layout)
    return Inferred(tuple(inputs), base.output)


def binary_forward(view) -> Inferred:
    return _binary_inputs(view, common_forward(view))


def binary_backward(view) -> Inferred:
    return _binary_inputs(view, common_backward(view))


# --------------------------------------------------------------------------------------------
# matmul: A known or NCHW/NCD/NC by rank; B = A's batch letters aligned to B's rank + "IO".

def _weight_layout(ref: str, b_rank: int) -> str:
    if b_rank < 2 or b_rank > len(ref):
        raise RuleFailed(f"cannot align a rank-{b_rank} B with {ref!r}")
    return ref[len(ref) - b_rank:len(ref) - 2] + "IO"


def matmul_forward(view) -> Inferred:
    rank = len(view.shape(0))
    if rank == 0:
        raise RuleFailed("matmul A has no shape")
    a = _required(view.layout(0) or MATMUL_DEFAULTS.get(rank, ""))
    if view.out_ndim != len(a):
        raise RuleFailed("output rank differs from A's")
    return Inferred((a, _weight_layout(a, view.ndim(1))), a)


def matmul_backward(view) -> Inferred:
    out = _required(view.out_layout())
    a = out if view.ndim(0) == len(out) else view.layout(0)
    return Inferred((a, _weight_layout(out, view.ndim(1))), out)


def linear_forward(view) -> Inferred:
    """msc.linear(_bias): weights are stored ``OI`` (msc-conventions 3), biases ``O``."""
    rank = len(view.shape(0))
    data = _required(view.layout(0) or MATMUL_DEFAULTS.get(rank, ""))
    return Inferred((data, "OI", "O")[:view.nargs], data)


def linear_backward(view) -> Inferred:
    out = _required(view.out_layout())
    return Inferred((out, "OI", "O")[:view.nargs], out)


def nbits_forward(view) -> Inferred:
    """matmul_nbits: data as a linear's; the packed weight, scales and zero points have no
    layout letters (groups and bytes, not tensor axes)."""
    rank = len(view.shape(0))
    data = _required(view.layout(0) or MATMUL_DEFAULTS.get(rank, ""))
    return Inferred((data, "", "", "")[:view.nargs], data)


def nbits_backward(view) -> Inferred:
    out = _required(view.out_layout())
    return Inferred((out, "", "", "")[:view.nargs], out)


# --------------------------------------------------------------------------------------------
# Axis ops: permute_dims, reductions, expand_dims, squeeze, take, reshape.

def _permute_axes(view, ndim: int) -> list[int]:
    axes = view.attr_or("axes", None)
    if axes is None:
        return list(reversed(range(ndim)))
    return [get_index(a, ndim) for a in axes]


def permute_forward(view) -> Inferred:
    data = _required(view.layout(0))
    return Inferred((data,), permute_layout(data, _permute_axes(view, len(data))))


def permute_backward(view) -> Inferred:
    out = _required(view.out_layout())
    axes = _permute_axes(view, len(out))
    inverse = [axes.index(i) if i in axes else i for i in range(len(out))]
    return Inferred((permute_layout(out, inverse),), out)


def _axes_of_input(view, axis) -> list[int]:
    """Axes normalized with the *input* rank, as MSC does (so expand_dims(x, -1) on 4-D
    reads axis 3: test_graph_build expects ``ABCE`` for unsqueeze(-1))."""
    rank = len(view.shape(0))
    if rank == 0:
        raise RuleFailed("input has no shape")
    return [get_index(a, rank) for a in as_list(axis)]


def reduce_forward(view) -> Inferred:
    """sum/mean/max/min/prod/std/argmax/argmin: keepdims keeps, no axis gives ``""``."""
    data = _required(view.layout(0))
    if view.attr_or("keepdims", False):
        return Inferred((data,), data)
    axis = view.attr_or("axis", None)
    if axis is None:
        return Inferred((data,), "")
    return Inferred((data,), reduce_layout(data, _axes_of_input(view, axis)))


def reduce_backward(view) -> Inferred:
    out = _required(view.out_layout())
    if view.attr_or("keepdims", False):
        return Inferred((out,), out)
    axis = view.attr_or("axis", None)
    if axis is None:
        raise RuleFailed("reduction over all axes")
    return Inferred((expand_layout(out, _axes_of_input(view, axis)),), out)


def expand_dims_forward(view) -> Inferred:
    data = _required(view.layout(0))
    return Inferred((data,), expand_layout(data, _axes_of_input(view, view.attr("axis"))))


def expand_dims_backward(view) -> Inferred:
    out = _required(view.out_layout())
    return Inferred((reduce_layout(out, _axes_of_input(view, view.attr("axis"))),), out)


def _squeezed_axes(view) -> list[int]:
    """The axes squeeze removes: the listed ones that are 1 (or symbolic, which Relax drops
    too), or every static 1 when no axis is given."""
    shape = view.shape(0)
    if not shape:
        raise RuleFailed("squeeze input has no shape")
    axis = view.attr_or("axis", None)
    if axis is None:
        return [i for i, d in enumerate(shape) if d.is_const and int(d) == 1]
    axes = [get_index(a, len(shape)) for a in as_list(axis)]
    return [a for a in axes if not shape[a].is_const or int(shape[a]) == 1]


def squeeze_forward(view) -> Inferred:
    data = _required(view.layout(0))
    return Inferred((data,), reduce_layout(data, _squeezed_axes(view)))


def squeeze_backward(view) -> Inferred:
    out = _required(view.out_layout())
    return Inferred((expand_layout(out, _squeezed_axes(view)),), out)


def take_forward(view) -> Inferred:
    if not view.shape(0):
        raise RuleFailed("take data has no shape")
    data, indices = view.layout(0), view.layout(1)
    out_rank = len(view.out_shape)
    if data:
        same = len(view.shape(0)) == out_rank
        return Inferred((data, indices), data if same else reduce_layout(data, [0]))
    if indices:
        out = expand_layout(indices, range(len(indices), out_rank))
        return Inferred((data, indices), out)
    raise RuleFailed("neither data nor indices has a layout")


def take_backward(view) -> Inferred:
    """Data of the output's rank takes the output layout; otherwise nothing changes."""
    out = _required(view.out_layout())
    if not view.shape(0) or len(view.shape(0)) != len(view.out_shape):
        raise RuleFailed("take backward only fills same-rank data")
    return Inferred((out, view.layout(1)), out)


def _reshaped(view, layout: str, forward: bool) -> str:
    in_shape, out_shape = view.shape(0), view.out_shape
    if not in_shape or not out_shape:
        raise RuleFailed("reshape without known shapes")
    if len(in_shape) == len(out_shape):
        return layout
    expand, reduce = infer_reshape_axes(in_shape, out_shape, layout.find("N"))
    if not expand and not reduce:
        raise RuleFailed("reshape axes do not match")
    if forward:
        return expand_layout(reduce_layout(layout, reduce), expand)
    return expand_layout(reduce_layout(layout, expand), reduce)


def reshape_forward(view) -> Inferred:
    data = _required(view.layout(0))
    return Inferred((data, "O"), _reshaped(view, data, forward=True))


def reshape_backward(view) -> Inferred:
    out = _required(view.out_layout())
    return Inferred((_reshaped(view, out, forward=False), "O"), out)


def plugin_forward(view) -> Inferred:
    """call_dps_packed: a layout function registered for the extern symbol, if any."""
    func = PLUGIN_RULES.get(getattr(view.arg(0), "global_symbol", None))
    if func is None:
        raise RuleFailed("no plugin layout rule")
    return func(view)


PLUGIN_RULES: dict[str, Callable] = {}
"""Extern symbol -> forward rule for ``call_dps_packed`` plugins (MSC's
``msc.plugin.op.InferLayout<name>``)."""


# --------------------------------------------------------------------------------------------
# Relax's own rules (output only), as seen when MSC's rule is missing or undecided.

def _relax_leaf(view, i: int = 0) -> str:
    layout = view.relax_layout(i)
    if not isinstance(layout, str):
        raise RuleFailed("Relax sees no single layout")
    return layout


def relax_concat(view) -> str:
    """The first field's layout (Relax's concat and the base of stack)."""
    layout = view.relax_layout(0)
    if not isinstance(layout, tuple) or not layout or not isinstance(layout[0], str):
        raise RuleFailed("Relax sees no tuple of layouts")
    return layout[0]


def _initial_letters(layout: str, ndim: int) -> str:
    """Relax's transposing rules only understand layouts made of the generic letters."""
    if len(layout) != ndim or any(c not in initial_layout(ndim) for c in layout):
        raise RuleFailed(f"Relax cannot transpose {layout!r}")
    return layout


def relax_same(view) -> str:
    """Unary/elementwise-like ops: the output follows the input."""
    return _relax_leaf(view)


def relax_binary(view) -> str:
    """InferLayoutBinaryEwise: the lower-rank input follows the higher-rank one."""
    (l1, n1), (l2, n2) = ((_relax_leaf(view, i), view.ndim(i)) for i in (0, 1))
    if len(l1) == len(l2):
        return l1
    if n1 <= n2:
        return l2 if n1 == 0 else _follow(l1, n2)
    return l1 if n2 == 0 else _follow(l2, n1)


def _follow(layout: str, ndim: int) -> str:
    extra = ndim - len(layout)
    if extra < 0:
        raise RuleFailed("cannot broadcast to a lower rank")
    return initial_layout(extra) + "".join(chr(ord(c) + extra) for c in layout)


def relax_statistical(view) -> str:
    """Reductions: the kept axes, renamed A, B, … in their order."""
    layout, ndim = _relax_leaf(view), view.ndim(0)
    if view.attr_or("keepdims", False):
        return layout
    axis = view.attr_or("axis", None)
    reduced = set(range(ndim)) if axis is None else {get_index(a, ndim) for a in as_list(axis)}
    return _drop_generic(layout, ndim, reduced)


def _drop_generic(layout: str, ndim: int, dropped: set) -> str:
    """Relax's view of dropping axes: the kept generic letters, renamed A, B, … in order."""
    if not layout:
        return ""
    kept = [i for i in range(ndim) if i not in dropped]
    renamed = {initial_layout(ndim)[i]: initial_layout(len(kept))[k] for k, i in enumerate(kept)}
    return "".join(renamed[c] for c in _initial_letters(layout, ndim) if c in renamed)


def relax_permute(view) -> str:
    """InferLayoutPermuteDims rewrites the axes attr so the output is always generic."""
    _initial_letters(_relax_leaf(view), view.ndim(0))
    return initial_layout(view.ndim(0))


def relax_expand_dims(view) -> str:
    layout, ndim = _relax_leaf(view), view.ndim(0)
    out_ndim = ndim + len(as_list(view.attr("axis")))
    new = {(a + out_ndim) % out_ndim for a in as_list(view.attr("axis"))}
    old = [initial_layout(out_ndim)[i] for i in range(out_ndim) if i not in new]
    moved = iter(old[ord(c) - ord("A")] for c in _initial_letters(layout, ndim))
    return "".join(initial_layout(out_ndim)[i] if i in new else next(moved)
                   for i in range(out_ndim))


def relax_squeeze(view) -> str:
    return _drop_generic(_relax_leaf(view), len(view.shape(0)), set(_squeezed_axes(view)))


def relax_stack(view) -> str:
    layout = relax_concat(view)
    axis = view.attr_or("axis", 0) or 0
    axis = axis + len(layout) + 1 if axis < 0 else axis
    if "S" in layout:  # a stack of stacks (RNN outputs): a letter may appear once
        return initial_layout(len(layout) + 1)
    return layout[:axis] + "S" + layout[axis:]


def relax_split(view) -> tuple:
    if view.out_fields is None:
        raise RuleFailed("split into one tensor")
    return (_relax_leaf(view),) * view.out_fields


# --------------------------------------------------------------------------------------------
# The table.

CONV = LayoutRule(conv_layouts, conv_layouts, relax_same)
POOL = LayoutRule(pool_layouts, pool_layouts, relax_same)
REDUCE = LayoutRule(reduce_forward, reduce_backward, relax_statistical)
ARG_REDUCE = LayoutRule(reduce_forward, reduce_backward)
BINARY = LayoutRule(binary_forward, binary_backward, relax_binary)
SAME = LayoutRule(relax=relax_same)
COMMON_RULE = LayoutRule()

RULES: dict[str, LayoutRule] = {
    **dict.fromkeys(("nn.conv1d", "nn.conv2d", "nn.conv2d_transpose"), CONV),
    **dict.fromkeys(("msc.conv1d_bias", "msc.conv2d_bias"),
                    LayoutRule(conv_bias_layouts, conv_bias_layouts)),
    **dict.fromkeys(("nn.max_pool2d", "nn.avg_pool2d", "nn.adaptive_avg_pool2d"), POOL),
    "image.resize2d": LayoutRule(resize_layouts, resize_layouts, relax_same),
    "nn.batch_norm": LayoutRule(batch_norm_forward, batch_norm_backward, relax_same),
    **dict.fromkeys(("nn.layer_norm", "nn.group_norm"),
                    LayoutRule(norm_forward, norm_backward, relax_same)),
    "nn.dropout": LayoutRule(common_forward, relax=relax_same),
    **dict.fromkeys(("sum", "mean", "max", "min", "prod", "std"), REDUCE),
    "variance": LayoutRule(relax=relax_statistical),
    **dict.fromkeys(("argmax", "argmin"), ARG_REDUCE),
    "matmul": LayoutRule(matmul_forward, matmul_backward),
    **dict.fromkeys(("msc.linear", "msc.linear_bias"),
                    LayoutRule(linear_forward, linear_backward)),
    "matmul_nbits": LayoutRule(nbits_forward, nbits_backward),
    "permute_dims": LayoutRule(permute_forward, permute_backward, relax_permute),
    "expand_dims": LayoutRule(expand_dims_forward, expand_dims_backward, relax_expand_dims),
    "squeeze": LayoutRule(squeeze_forward, squeeze_backward, relax_squeeze),
    "take": LayoutRule(take_forward, take_backward),
    "reshape": LayoutRule(reshape_forward, reshape_backward),
    # concat's inputs are a tuple, which no backward rule fills: they stay "" (test_cat).
    "concat": LayoutRule(relax=relax_concat),
    "stack": LayoutRule(relax=relax_stack),
    "split": LayoutRule(relax=relax_split),
    "call_dps_packed": LayoutRule(plugin_forward),
    # Relax rules that keep the input's layout. (Relax's rules for flip, repeat, tile,
    # scatter_*, gather_elements arrived weeks before MSC's removal; MSC's tests expect ""
    # for scatter, so those ops stay on the common rule.)
    **dict.fromkeys(("astype", "reinterpret", "strided_slice", "dynamic_strided_slice", "nn.softmax",
                     "nn.relu", "nn.gelu", "nn.gelu_tanh", "nn.silu", "nn.selu", "nn.prelu",
                     "nn.instance_norm", "nn.rms_norm", "image.resize3d", "nn.conv3d",
                     "nn.conv1d_transpose", "nn.conv3d_transpose", "nn.max_pool1d",
                     "nn.max_pool3d", "nn.avg_pool1d", "nn.avg_pool3d",
                     "nn.adaptive_avg_pool1d", "nn.adaptive_avg_pool3d"), SAME),
}
"""Rows by op name (Relax names without ``relax.``); every other op: family, then common.
Attached as the op fact "layout" on import (``load_facts("layout")``)."""

# Binary elementwise ops all take MSC's binary rule, including the few (floor_mod, shifts…)
# MSC forgot: the rule is the same, and rank-1 inputs then get one letter, not the whole
# output layout.
FAMILY_RULES: dict[str, LayoutRule] = {"unary": SAME, "binary": BINARY, "compare": BINARY}


def rule_for(op_def: OpDef) -> LayoutRule:
    """The op's attached rule, else its table row, family row or the common rule (so ops
    registered after this module was imported still work)."""
    attached = op_def.facts.get("layout")
    if attached is not None:
        return attached
    return RULES.get(op_def.name) or FAMILY_RULES.get(op_def.family) or COMMON_RULE


def attach_rules() -> None:
    """Attach a row to every op registered so far (idempotent)."""
    for name, op_def in OPS.items():
        row = RULES.get(name) or FAMILY_RULES.get(op_def.family)
        if row is not None and op_def.facts.get("layout") is None:
            attach(name, "layout", row)


attach_rules()
