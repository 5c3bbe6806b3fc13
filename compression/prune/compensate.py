"""Least-squares compensation: refit the layers that read pruned channels.

Cutting input channels of a conv or linear loses their part of its output. With the layer's
unpruned inputs ``X`` on calibration data (im2col patches for a conv) and a column of ones for
the bias, the kept columns ``K`` are refit so that the pruned layer matches the unpruned one::

    min_W' || X_K W'^T - X W^T ||^2 + lam ||W'||^2
    W'^T = (G_KK + lam I)^-1 G_K: W^T        G = [X, 1]' [X, 1]

(the reconstruction step of structured-pruning methods such as ThiNet / CP, in closed form;
``lam`` is ``ridge`` times the mean of ``diag(G_KK)``). Only the Gram matrix of each layer's
input is kept, never the rows. Each layer is refit on the *unpruned* model's inputs, layer by
layer (the errors of earlier layers are not chased). Layers the refit cannot express (grouped
or transposed convs, unusual layouts, a weight shared with another kind of layer) stay as
pruned.
"""

from __future__ import annotations

import numpy as np

from .analysis import in_axis_of, out_axis_of
from .calibrate import consumer_kind

__all__ = ["compensate"]


def _targets(analysis, keep: dict) -> dict[str, list[str]]:
    """``{weight name: holders}`` of the consumer weights whose input axis lost positions."""
    graph, out = analysis.graph, {}
    for name, exprs in analysis.wexprs.items():
        if analysis.wroles[name] != "weight":
            continue
        weight = graph.find_tensor(name)
        axis = in_axis_of(weight)
        if axis < 0 or not set(analysis.dims.index_maps(exprs[axis])) & set(keep):
            continue
        holders = graph.weight_holders[name]
        if holders and all(consumer_kind(graph.find_node(h)) for h in holders):
            out[name] = list(holders)
    return out


def _bias_of(graph, holders: list[str]) -> str | None:
    """The bias weight of the holders (one shared name, else None: no refit of the bias)."""
    names = {graph.find_node(h).weights["bias"].name if "bias" in graph.find_node(h).weights
             else None for h in holders}
    return names.pop() if len(names) == 1 else None


def _solve(gram: np.ndarray, full: np.ndarray, cols: np.ndarray, ridge: float) -> np.ndarray:
    """``W'^T`` for the kept columns ``cols`` of ``[X, 1]``; ``full``: ``[W, b]^T`` over all
    columns of the Gram (rows of ``full`` line up with them)."""
    a = gram[np.ix_(cols, cols)]
    diag = np.diag(a)[:-1] if a.shape[0] > 1 else np.diag(a)
    lam = ridge * max(float(diag.mean()) if diag.size else 0.0, 1e-12)
    b = gram[cols] @ full
    return np.linalg.solve(a + lam * np.eye(a.shape[0]), b)


def _pruned_other_axes(analysis, name: str, array: np.ndarray, skip: int, keep: dict):
    """``array`` indexed down to the kept positions of every axis but ``skip``."""
    index = []
    for axis, expr in enumerate(analysis.wexprs[name]):
        touched = set(analysis.dims.index_maps(expr)) & set(keep)
        index.append(np.arange(array.shape[axis]) if axis == skip or not touched
                     else analysis.dims.kept(expr, keep))
    return np.ascontiguousarray(array[np.ix_(*index)])


def _refit(analysis, name: str, bias: str | None, gram: np.ndarray, patch: int,
           weights: dict, keep: dict, ridge: float) -> dict:
    weight = analysis.graph.find_tensor(name)
    o_axis, i_axis = out_axis_of(weight), in_axis_of(weight)
    array = np.asarray(weights[name])
    canon = np.moveaxis(array.astype(np.float64), (o_axis, i_axis), (0, 1))
    rows = canon.shape[0]
    flat = canon.reshape(rows, -1)  # [O, I * kernel], channel-major as the patches
    kept = np.asarray(analysis.dims.kept(analysis.wexprs[name][i_axis], keep), dtype=np.int64)
    cols = (kept[:, None] * patch + np.arange(patch)).reshape(-1)
    ones = gram.shape[0] - 1
    if bias is not None:
        b = np.asarray(weights[bias], dtype=np.float64).reshape(-1)
        full = np.concatenate([flat, b[:, None]], axis=1).T
        sol = _solve(gram, full, np.append(cols, ones), ridge)
        new_flat, new_b = sol[:-1].T, sol[-1]
    else:
        sol = _solve(gram[:ones, :ones], flat.T, cols, ridge)
        new_flat, new_b = sol.T, None
    new = new_flat.reshape(rows, len(kept), *canon.shape[2:])
    new = np.moveaxis(new, (0, 1), (o_axis, i_axis)).astype(array.dtype)
    out = {name: _pruned_other_axes(analysis, name, new, i_axis, keep)}
    if new_b is not None:
        shaped = new_b.reshape(np.shape(weights[bias])).astype(np.asarray(weights[bias]).dtype)
        out[bias] = _pruned_other_axes(analysis, bias, shaped, -1, keep)
    return out


def compensate(analysis, weights: dict, pruned_weights: dict, keep: dict, calibration,
               ridge: float = 1e-3) -> tuple[dict, list[str]]:
    """``(pruned weights with the refit layers, names of the refit weights)``."""
    targets = _targets(analysis, keep)
    inputs = calibration.layer_inputs(sorted({h for hs in targets.values() for h in hs}),
                                      gram=True)
    out, done = dict(pruned_weights), []
    for name, holders in targets.items():
        patches = {inputs[h].patch for h in holders}
        if len(patches) != 1:
            continue
        gram = sum(inputs[h].gram for h in holders)
        bias = _bias_of(analysis.graph, holders)
        out.update(_refit(analysis, name, bias, gram, patches.pop(), weights, keep, ridge))
        done.append(name)
    return out, done
