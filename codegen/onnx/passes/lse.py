"""``ReduceLogSumExp`` from the importer's stable spelling of it, on the pipeline's graph:

    m = ReduceMax(x, axes, keepdims=1);  g = Where(IsInf(m), 0, m)
    y = Add(ReduceLogSum(Exp(Sub(x, g)), axes, keepdims=k), [Squeeze(g, axes) when k = 0])

Both guards ``g`` (the importer writes two) must read the same max, both reductions the same
axes; the result is ``ReduceLogSumExp(x, axes, keepdims=k)`` (equal for every input: an
infinite max is replaced by 0, as log(sum(exp(x))) reads it). Over axes given at run time the
importer reduces the odd axes of a reshape to interleaved (kept, reduced) dims; the shape
arithmetic is then checked for every valid axes value (``onnx.passes.axes``), and a trailing
reshape to the kept dims becomes keepdims=0.
"""

from __future__ import annotations

from ..node import OnnxNode
from .axes import axes_input, computes, domain_of, interleaved, odd_axes
from .walk import Walk

__all__ = ["fold_log_sum_exp"]


def fold_log_sum_exp(w: Walk) -> None:
    for node in w.nodes():
        if node.op_type == "Add" and not node.domain and len(node.inputs) == 2:
            _lse_at(w, node)


def _guarded_max(w: Walk, value: str, uses: int = 1) -> OnnxNode | None:
    """The ReduceMax m of ``Where(IsInf(m), 0, m)`` making ``value``."""
    where = w.back(value, "Where", uses)
    if where is None or len(where.inputs) != 3 or w.scalar(where.inputs[1]) != 0.0:
        return None
    test = w.back(where.inputs[0], "IsInf")
    if test is None or test.inputs[0] != where.inputs[2] or \
            any(test.attrs.get(k, 1) != 1 for k in ("detect_negative", "detect_positive")):
        return None
    node = w.made.get(where.inputs[2])
    return node if node is not None and node.op_type == "ReduceMax" and \
        not node.domain else None


def _axes(w: Walk, node: OnnxNode) -> tuple | None:
    """(axes or None for all, noop_with_empty_axes) of a reduction, else None when unknown."""
    axes = odd_axes(w, node)
    if axes is None and len(node.inputs) > 1 and node.inputs[1]:
        return None  # axes computed at run time
    return (tuple(axes) if axes else None, node.attrs.get("noop_with_empty_axes", 0))


def _parts(w: Walk, add: OnnxNode):
    """(x, the reduction's axes node, keepdims, nodes folded) of the spelling at ``add``."""
    log = w.back(add.inputs[0], "ReduceLogSum")
    exp = log and w.back(log.inputs[0], "Exp")
    sub = exp and w.back(exp.inputs[0], "Sub")
    peak = sub and _guarded_max(w, sub.inputs[1])
    if peak is None:
        return None
    keepdims = log.attrs.get("keepdims", 1)
    squeeze = w.back(add.inputs[1], "Squeeze")
    other = _guarded_max(w, squeeze.inputs[0] if squeeze else add.inputs[1])
    spec = _axes(w, log)
    max_out = peak.outputs[0]
    if other is not peak or spec is None or _axes(w, peak) != spec or \
            peak.inputs[0] != sub.inputs[0] or peak.attrs.get("keepdims", 1) != 1 or \
            max_out in w.keep or len(w.users.get(max_out, [])) != 4 or \
            (squeeze is not None) != (keepdims == 0):
        return None
    if squeeze is not None and (len(squeeze.inputs) < 2 or
                                _squeeze_axes(w, squeeze) != spec[0]):
        return None
    guards = [w.made[v] for v in (sub.inputs[1], squeeze.inputs[0] if squeeze else
                                  add.inputs[1])]
    tests = [w.made[g.inputs[0]] for g in guards]
    parts = [log, exp, sub, peak, *guards, *tests] + ([squeeze] if squeeze else [])
    return sub.inputs[0], log, keepdims, parts


def _squeeze_axes(w: Walk, node: OnnxNode) -> tuple | None:
    data = w.const(node.inputs[1])
    return None if data is None else tuple(data.reshape(-1).tolist())


def _lse_at(w: Walk, add: OnnxNode) -> None:
    found = _parts(w, add)
    if found is None:
        return
    x, log, keepdims, parts = found
    runtime = _runtime_axes(w, x, log, keepdims)
    if runtime is not None:
        x, axes, end, keepdims, more = runtime
        w.rewrite(end, [*parts, *more], op_type="ReduceLogSumExp", inputs=[x, axes],
                  domain="", attrs={"keepdims": keepdims})
        return
    w.rewrite(add, parts, op_type="ReduceLogSumExp", inputs=[x, *log.inputs[1:]], domain="",
              attrs={**log.attrs, "keepdims": keepdims})


def _runtime_axes(w: Walk, x: str, log: OnnxNode, keepdims: int):
    """(data, axes input, end node, keepdims, more nodes folded) when ``x`` is the reshape of
    ``data`` to interleaved dims over run-time axes (checked for every axes value)."""
    view = w.made.get(x)
    data = view and view.op_type == "Reshape" and not view.domain and view.inputs[0]
    shape = data and w.shape(data)
    if not shape or any(d < 0 for d in shape) or keepdims or x in w.keep or \
            odd_axes(w, log) != list(range(1, 2 * len(shape), 2)) or w.opset < 18:
        return None
    axes = axes_input(w, view.inputs[1])
    rank = len(shape)
    domain = axes and domain_of(rank, w.shape(axes)[0])
    if not domain or not computes(w, view.inputs[1], axes, domain, rank,
                                   lambda a: interleaved(shape, a)):
        return None
    add = w.users[log.outputs[0]][0]
    readers = w.users.get(add.outputs[0], [])
    tail = readers[0] if len(readers) == 1 and add.outputs[0] not in w.keep and \
        readers[0].op_type == "Reshape" and not readers[0].domain else None
    if tail is not None and computes(w, tail.inputs[1], axes, domain, rank,
                                      lambda a: [d for i, d in enumerate(shape) if i not in a]):
        return data, axes, tail, 0, [view, add]
    return data, axes, add, 1, [view]
