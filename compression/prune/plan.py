"""The pruning plan: ``{weight: {"in_indices": [...], "out_indices": [...]}}`` (MSC's format).

``out_indices`` are the kept positions of the weight's output-channel axis (layout letter ``O``,
else axis 0) and ``in_indices`` those of its input-channel axis (``I``, else axis 1); an empty
list keeps the axis whole. A weight with another pruned axis (a constant) also has ``"axes":
{axis: [...]}``. Weights are named by their graph name; an alias (``"l2.c1.weight"``) is
accepted when loading. A plan can be edited by hand: tied weights must keep the same channels,
and the checks say which weights disagree.
"""

from __future__ import annotations

import json
import os

import numpy as np

from msc.errors import SerializationError, ValidationError

from .analysis import Analysis, in_axis_of, out_axis_of

__all__ = ["keep_from_plan", "load_plan", "make_plan", "save_plan"]


def make_plan(analysis: Analysis, keep: dict) -> dict:
    """The plan of the kept channels ``keep`` (``{space id: indices}``)."""
    plan = {}
    for name, exprs in analysis.wexprs.items():
        weight = analysis.graph.find_tensor(name)
        axes = {}
        for axis, expr in enumerate(exprs):
            if set(analysis.dims.index_maps(expr)) & set(keep):
                axes[axis] = [int(i) for i in analysis.dims.kept(expr, keep)]
        if not axes:
            continue
        out_axis, in_axis = out_axis_of(weight), in_axis_of(weight)
        entry = {"in_indices": axes.pop(in_axis, []), "out_indices": axes.pop(out_axis, [])}
        if axes:
            entry["axes"] = {str(k): v for k, v in axes.items()}
        plan[name] = entry
    return plan


def _plan_axes(weight, entry, name: str) -> dict[int, list]:
    if not isinstance(entry, dict):
        raise ValidationError("a plan entry must be a dict with in_indices / out_indices",
                              tensor=name)
    axes = {int(k): v for k, v in (entry.get("axes") or {}).items()}
    if entry.get("out_indices"):
        axes[out_axis_of(weight)] = entry["out_indices"]
    if entry.get("in_indices"):
        in_axis = in_axis_of(weight)
        if in_axis < 0:
            raise ValidationError("a 1-D weight has no in_indices", tensor=name)
        axes[in_axis] = entry["in_indices"]
    for axis, positions in axes.items():
        if not 0 <= axis < weight.ndim or not isinstance(positions, list) or not all(
                isinstance(p, int) and 0 <= p < weight.shape[axis] for p in positions):
            raise ValidationError(f"axis {axis}: indices must be ints in [0, "
                                  f"{weight.shape[axis] if 0 <= axis < weight.ndim else '?'})",
                                  tensor=name)
    return axes


def keep_from_plan(analysis: Analysis, plan: dict) -> dict[int, np.ndarray]:
    """The kept channels of every space, read back from a plan; raises when the plan prunes a
    fixed axis, or when tied weights disagree."""
    keep: dict[int, np.ndarray] = {}
    source: dict[int, str] = {}
    wanted = []
    for key, entry in plan.items():
        weight = analysis.graph.find_tensor(key) if analysis.graph.has_tensor(key) else None
        if weight is None or weight.name not in analysis.wexprs:
            raise ValidationError("the plan names no weight of this graph", tensor=key,
                                  hint="plans are keyed by weight names (or aliases)")
        for axis, positions in _plan_axes(weight, entry, key).items():
            expr = analysis.wexprs[weight.name][axis]
            wanted.append((key, axis, positions, expr))
            _read_axis(analysis, key, axis, positions, expr, keep, source)
    for key, axis, positions, expr in wanted:  # the kept set must be what the plan says
        got = [int(i) for i in analysis.dims.kept(expr, keep)]
        if got != sorted(set(positions)):
            raise ValidationError(f"axis {axis} cannot keep exactly these positions; the tied "
                                  f"channels give {got[:8]}{'...' if len(got) > 8 else ''}",
                                  tensor=key, hint="keep whole channels (heads, C x H x W "
                                                   "blocks) and the same channels as the "
                                                   "weights tied to this one")
    return keep


def _read_axis(analysis, key, axis, positions, expr, keep, source) -> None:
    maps = analysis.dims.index_maps(expr)
    if not maps:
        raise ValidationError(f"axis {axis} cannot be pruned (it is fixed: a graph input or "
                              f"output, or tied to one)", tensor=key,
                              hint="remove this axis from the plan")
    for sid, index in maps.items():
        chosen = np.unique(index[np.asarray(positions, dtype=np.int64)])
        chosen = chosen[chosen >= 0]
        if sid in keep and not np.array_equal(keep[sid], chosen):
            raise ValidationError(f"axis {axis} keeps other channels than {source[sid]!r}, "
                                  f"which is tied to it", tensor=key,
                                  hint="tied weights must keep the same channels")
        keep[sid], source[sid] = chosen, key


def save_plan(plan: dict, path: str) -> str:
    """Write the plan as JSON (one weight per line block); returns the path."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(plan, f, indent=1)
    return path


def load_plan(plan) -> dict:
    """A plan from a dict, JSON text or a file path."""
    if isinstance(plan, dict):
        return plan
    if isinstance(plan, str) and not plan.lstrip().startswith("{"):
        if not os.path.exists(plan):
            raise SerializationError("no such plan file", file=plan)
        with open(plan, encoding="utf-8") as f:
            text, file = f.read(), plan
    else:
        text, file = plan, None
    try:
        data = json.loads(text)
    except (TypeError, json.JSONDecodeError) as err:
        raise SerializationError(f"not a JSON plan: {err}", file=file) from None
    if not isinstance(data, dict):
        raise SerializationError("a plan is a JSON object {weight: {...}}", file=file)
    return data
