"""Channel importance of a group: magnitude, or from calibration data (Taylor, Fisher, Wanda).

Every criterion gives one score per channel of a group; the strategy keeps the highest.

- ``"l1"`` / ``"l2"``: each voting member's ``sum |w|^p`` over the rest of the weight,
  averaged over members (Torch-Pruning's ``GroupMagnitudeImportance``).
- ``"taylor"``: first order, ``|w * dL/dw|`` summed the same way, ``L = 0.5 ||y||^2`` of the
  model's own float outputs (no labels), the gradient summed over the calibration items (as
  Torch-Pruning's ``TaylorImportance`` after a backward over its batches).
- ``"fisher"``: second order without a Hessian. Cutting channel ``c`` changes the output by
  about ``J d_c`` (``d_c``: minus the channel's weights in the layers that *read* it); its
  expected square ``d_c' J'J d_c`` is the mean over draws of ``(sum_{p in c} w_p g_p)^2``
  with ``g = J' r``, ``r ~ N(0, 1)`` (the Fisher of a unit Gaussian around the model's own
  output, the group-Fisher of Liu et al. 2021). Summed over the consumer members.
- ``"wanda"``: ``|W| * ||x||`` (Sun et al. 2023) made structural: for each layer reading the
  channel, ``||x_c||_2`` (its input over the calibration data) times ``sum |W[:, c]|``,
  summed over those layers. Heads and MLP neurons of a transformer are ranked by what the
  output projection reads.

The data-driven criteria use a group's *consumer* members (the input axes of the convs and
linears that read its channels). A group with none (its channels only feed ops without
weights) falls back to ``"l2"``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from msc.errors import ValidationError

from .analysis import Group, in_axis_of
from .calibrate import consumer_kind

__all__ = ["CRITERIA", "DATA_CRITERIA", "Scorer"]

NORMS = {"l1": 1, "l2": 2}
DATA_CRITERIA = ("taylor", "fisher", "wanda")
CRITERIA = (*NORMS, *DATA_CRITERIA)
FISHER_DRAWS = 2  # random output projections per calibration item


def _magnitude(p: int) -> Callable:
    def score(array: np.ndarray, axis: int) -> np.ndarray:
        other = tuple(k for k in range(array.ndim) if k != axis)
        return (np.abs(array.astype(np.float64)) ** p).sum(axis=other)
    return score


def _sum_other(array: np.ndarray, axis: int) -> np.ndarray:
    return array.sum(axis=tuple(k for k in range(array.ndim) if k != axis))


class Scorer:
    """``scorer(group) -> channel scores`` for one criterion; data criteria read
    ``calibration`` (a ``Calibration``) once, for all groups."""

    def __init__(self, analysis, weights: dict, importance, calibration=None):
        self.analysis, self.weights, self.importance = analysis, weights, importance
        self.graph = analysis.graph if analysis is not None else None
        self.grads: list[dict] = []
        self.inputs: dict = {}
        if importance in DATA_CRITERIA:
            if calibration is None:
                raise ValidationError(f"importance {importance!r} needs calibration data",
                                      key="importance", hint="pass calib_data to prune (or "
                                      "--calib to msc prune), or use 'l1' / 'l2'")
            if importance == "wanda":
                nodes = {n for g in analysis.groups for m in self.consumers(g)
                         for n in self.graph.weight_holders[m.weight]}
                self.inputs = calibration.input_norms(sorted(nodes))
            elif importance == "fisher":
                self.grads = calibration.gradients("fisher", FISHER_DRAWS)
            else:
                draws = calibration.gradients("l2")
                self.grads = [{k: sum(d[k] for d in draws) for k in draws[0]}] if draws else []

    def consumers(self, group: Group) -> list:
        """The group's members that are the input-channel axis of a conv / linear weight
        (every holder of the weight such a layer)."""
        out = []
        for member in group.members:
            if member.role != "weight":
                continue
            weight = self.graph.find_tensor(member.weight)
            holders = [self.graph.find_node(h) for h in self.graph.weight_holders[member.weight]]
            if member.axis == in_axis_of(weight) and holders and \
                    all(consumer_kind(h) for h in holders):
                out.append(member)
        return out

    def __call__(self, group: Group) -> np.ndarray:
        if callable(self.importance):
            return self._per_member(group, self.importance, voting=True)
        if self.importance in NORMS:
            return self._per_member(group, _magnitude(NORMS[self.importance]), voting=True)
        if self.importance == "taylor":
            grad = self.grads[0] if self.grads else {}
            return self._per_member(group, None, voting=True, grad=grad)
        consumers = self.consumers(group)
        if not consumers:
            return self._per_member(group, _magnitude(2), voting=True)
        if self.importance == "fisher":
            return self._fisher(group, consumers)
        return self._wanda(group, consumers)

    # ---- the criteria -------------------------------------------------------------------
    def _per_member(self, group: Group, score, voting: bool, grad=None) -> np.ndarray:
        """Mean over voting members of a per-position score scattered onto channels."""
        total, count = np.zeros(group.size), 0
        for member in group.members:
            if (voting and not member.votes) or member.weight not in self.weights:
                continue
            array = np.asarray(self.weights[member.weight])
            if grad is not None:
                if member.weight not in grad:
                    continue
                values = _sum_other(np.abs(array.astype(np.float64) * grad[member.weight]),
                                    member.axis)
            else:
                values = np.asarray(score(array, member.axis), dtype=np.float64).reshape(-1)
            if values.shape != (array.shape[member.axis],):
                raise ValidationError(f"importance gave shape {values.shape} for axis "
                                      f"{member.axis} of {array.shape}", tensor=member.weight,
                                      hint="return one score per position along the axis")
            _scatter(total, member, values)
            count += 1
        return total / max(count, 1)

    def _fisher(self, group: Group, consumers: list) -> np.ndarray:
        total = np.zeros(group.size)
        for grads in self.grads:
            change = np.zeros(group.size)
            for member in consumers:
                if member.weight in grads:
                    array = np.asarray(self.weights[member.weight], dtype=np.float64)
                    _scatter(change, member, _sum_other(array * grads[member.weight],
                                                        member.axis))
            total += change ** 2
        return total / max(len(self.grads), 1)

    def _wanda(self, group: Group, consumers: list) -> np.ndarray:
        total = np.zeros(group.size)
        for member in consumers:
            array = np.abs(np.asarray(self.weights[member.weight], dtype=np.float64))
            sumsq = sum(self.inputs[h] for h in self.graph.weight_holders[member.weight])
            _scatter(total, member, _sum_other(array, member.axis) * np.sqrt(sumsq))
        return total


def _scatter(total: np.ndarray, member, values: np.ndarray) -> None:
    ok = member.index >= 0
    np.add.at(total, member.index[ok], values[ok])
