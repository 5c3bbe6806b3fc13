"""Least-squares compensation: refit the layers that read pruned channels.

Cutting input channels of a conv or linear loses their part of its output. With the layer's
unpruned inputs ``X`` on calibration data (im2col patches for a conv) and a column of ones for
the bias, the kept columns ``K`` are refit so that the pruned layer matches the unpruned one::

    min_W' || X_K W'^T - X W^T ||^2 + lam ||W'||^2
    W'^T = (G_KK + lam I)^-1 G_K: W^T        G = [X, 1]' [X, 1]

(the reconstruction step of structured-pruning methods such as ThiNet / CP, in closed form;
``lam`` is ``ridge`` times the mean of ``diag(G_KK)``, times columns / rows when there are
fewer rows, and pulls toward the plainly pruned weights). Layers are refit one after the
other in graph order, each on what the pruned model with the earlier refits feeds it
(``X'``: ``min ||X'_K W'^T - X W^T||``). By default the ridge is chosen per
layer by 2-fold validation over the calibration items (fit on the even items, score on the
odd ones and back), plain pruning being one of the choices: with few calibration rows for
the columns (ConvNeXt's 4x MLP on a 4 x 4 map) a refit would fit the calibration data and
lose on new inputs. Layers the refit cannot express (grouped or transposed convs, unusual
layouts, a weight shared with another kind of layer) stay as pruned.
"""

from __future__ import annotations

import numpy as np

from .analysis import in_axis_of, out_axis_of
from .calibrate import consumer_kind, layer_rows

__all__ = ["RIDGES", "compensate"]

# The ridges (of the mean Gram diagonal) the automatic choice tries, and plain pruning.
RIDGES = (1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0)


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


def _solve(a: np.ndarray, c: np.ndarray, full: np.ndarray, cols: np.ndarray, ridge: float,
           rows: float) -> np.ndarray:
    """``W'^T`` from the normal equations ``a W'^T = c W^T`` (``a``: kept x kept, ``c``: kept
    x all columns), ``full`` = ``[W, b]^T`` over all columns. The ridge pulls toward the
    pruned weights ``full[cols]`` (not toward 0), so a large one is plain pruning."""
    diag = np.diag(a)
    lam = ridge * max(float(diag.mean()) if diag.size else 0.0, 1e-12) * \
        max(1.0, len(cols) / max(rows, 1.0))
    return np.linalg.solve(a + lam * np.eye(a.shape[0]), c @ full + lam * full[cols])


def _error(sol: np.ndarray, a: np.ndarray, c: np.ndarray, full: np.ndarray) -> float:
    """``||X'_K sol - X full||^2`` up to a constant, from the Grams."""
    return float(np.sum(sol * (a @ sol)) - 2 * np.sum(sol * (c @ full)))


def _fit(folds: list, full: np.ndarray, cols: np.ndarray, ridge, rows: list) -> np.ndarray:
    """The refit over all items: with ``ridge`` None, the ridge of ``RIDGES`` (or none at
    all: plain pruning) whose fit on one half of the items best predicts the other half."""
    a = folds[0][0] + folds[1][0]
    c = folds[0][1] + folds[1][1]
    if ridge is not None or min(rows) < 1:
        return _solve(a, c, full, cols, 1e-3 if ridge is None else ridge, sum(rows))
    scores = {}
    for candidate in (*RIDGES, None):
        total = 0.0
        for k in (0, 1):
            (a_t, c_t), (a_v, c_v) = folds[k], folds[1 - k]
            sol = full[cols] if candidate is None else \
                _solve(a_t, c_t, full, cols, candidate, rows[k])
            total += _error(sol, a_v, c_v, full)
        scores[candidate] = total
    best = min(scores, key=scores.get)
    return full[cols] if best is None else _solve(a, c, full, cols, best, sum(rows))


def _pruned_other_axes(analysis, name: str, array: np.ndarray, skip: int, keep: dict):
    """``array`` indexed down to the kept positions of every axis but ``skip``."""
    index = []
    for axis, expr in enumerate(analysis.wexprs[name]):
        touched = set(analysis.dims.index_maps(expr)) & set(keep)
        index.append(np.arange(array.shape[axis]) if axis == skip or not touched
                     else analysis.dims.kept(expr, keep))
    return np.ascontiguousarray(array[np.ix_(*index)])


def _refit(analysis, name: str, bias: str | None, folds: list, patch: int,
           weights: dict, keep: dict, ridge) -> dict:
    """The refit weight (and bias) of one layer, pruned to the kept positions; ``folds``:
    ``(a, c)`` of the even and the odd items, the ones column last in both (``a`` over the
    kept columns, ``c`` kept x all)."""
    weight = analysis.graph.find_tensor(name)
    o_axis, i_axis = out_axis_of(weight), in_axis_of(weight)
    array = np.asarray(weights[name])
    canon = np.moveaxis(array.astype(np.float64), (o_axis, i_axis), (0, 1))
    rows = canon.shape[0]
    flat = canon.reshape(rows, -1)  # [O, I * kernel], channel-major as the patches
    kept = np.asarray(analysis.dims.kept(analysis.wexprs[name][i_axis], keep), dtype=np.int64)
    cols = (kept[:, None] * patch + np.arange(patch)).reshape(-1)
    ones = folds[0][1].shape[1] - 1
    counts = [float(a[-1, -1]) for a, _ in folds]  # the ones column's square: the rows
    if bias is not None:
        b = np.asarray(weights[bias], dtype=np.float64).reshape(-1)
        full = np.concatenate([flat, b[:, None]], axis=1).T
        sol = _fit(folds, full, np.append(cols, ones), ridge, counts)
        new_flat, new_b = sol[:-1].T, sol[-1]
    else:
        sol = _fit([(a[:-1, :-1], c[:-1, :-1]) for a, c in folds], flat.T, cols, ridge,
                   counts)
        new_flat, new_b = sol.T, None
    new = new_flat.reshape(rows, len(kept), *canon.shape[2:])
    new = np.moveaxis(new, (0, 1), (o_axis, i_axis)).astype(array.dtype)
    out = {name: _pruned_other_axes(analysis, name, new, i_axis, keep)}
    if new_b is not None:
        shaped = new_b.reshape(np.shape(weights[bias])).astype(np.asarray(weights[bias]).dtype)
        out[bias] = _pruned_other_axes(analysis, bias, shaped, -1, keep)
    return out


def _kept_cols(analysis, name: str, patch: int, keep: dict) -> np.ndarray:
    """The kept columns of ``[X, 1]`` (channel-major patches, the ones column last)."""
    weight = analysis.graph.find_tensor(name)
    kept = np.asarray(analysis.dims.kept(analysis.wexprs[name][in_axis_of(weight)], keep),
                      dtype=np.int64)
    return kept[:, None] * patch + np.arange(patch)


def _folds(runner, raw: dict, items: list, holders: list[str], node_rows) -> list:
    """``[(A, C) of the even items, of the odd items]``: the layer's input in the pruned
    model now (``X'``) against the unpruned one (``X``), each with a ones column."""
    folds = [(0.0, 0.0), (0.0, 0.0)]
    for i, arrays in enumerate(items):
        got = runner(arrays)
        for h in holders:
            x, x2 = (np.concatenate([r, np.ones((r.shape[0], 1))], axis=1)
                     for r in (node_rows(h, raw[h][i]), node_rows(h, got[h])))
            a, c = folds[i % 2]
            folds[i % 2] = (a + x2.T @ x2, c + x2.T @ x)
    return folds


def compensate(analysis, weights: dict, pruned, pruned_weights: dict, keep: dict,
               calibration, ridge=None) -> tuple[dict, list[str]]:
    """``(pruned weights with the refit layers, names of the refit weights)``.

    Layer by layer in graph order, each on the inputs the pruned model *with the layers
    before it already refit* feeds it (``X'``), against the unpruned model's (``X``): a
    layer norm or ConvNeXt's GRN over pruned channels, whose statistics change, and what the
    earlier refits left over are both in ``X'``. Refitting all layers at once on stale
    inputs diverged (a ResNet's output SQNR fell to -36 dB)."""
    graph = analysis.graph
    targets = _targets(analysis, keep)
    order = sorted(targets, key=lambda n: min(graph.find_node(h).index for h in targets[n]))
    holders = sorted({h for hs in targets.values() for h in hs})
    raw = calibration.raw_inputs(holders)
    runner = calibration.pruned_runner(pruned, pruned_weights, holders)

    def node_rows(node: str, x) -> np.ndarray:
        joint = graph.find_node(node)
        return layer_rows(joint, np.asarray(x, dtype=np.float64))

    out, done = dict(pruned_weights), []
    for name in order:
        names = targets[name]
        joint = graph.find_node(names[0])
        patch = int(np.prod(joint.weight_at("weight").shape[2:])) \
            if consumer_kind(joint) == "conv" else 1
        folds = _folds(runner, raw, calibration.items, names, node_rows)
        new = _refit(analysis, name, _bias_of(graph, names), folds, patch, weights, keep,
                     ridge)
        out.update(new)
        runner.update(new)
        done.append(name)
    return out, done
