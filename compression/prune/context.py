"""What a channel rule sees of one node: its inputs' dim expressions, shapes, attrs, weights.

A rule (``rules.py``) reads the node through a ``RuleContext``, ties axes with ``unify``, sets
the dim expressions of the node's weights (``set_weight``) and returns those of its outputs.
Every input axis a rule does not pass on or tie must be frozen by the rule; every weight axis it
leaves unset is frozen by the analysis.
"""

from __future__ import annotations

from .dims import Dims, Fixed


def parse_ints(text: str | None) -> list[int] | None:
    """``"2,3"`` -> [2, 3], ``"8,"`` -> [8], ``"1"`` -> [1], ``""`` / None -> None."""
    if text is None or text.strip() in ("", "None"):
        return None
    return [int(v) for v in text.split(",") if v.strip()]


class RuleContext:
    """One node's view for its channel rule."""

    def __init__(self, node, dims: Dims, ins: list[list]):
        self.node = node
        self.dims = dims
        self.ins = ins  # per input, one dim expression per axis
        self.in_shapes = [t.shape for t in node.get_inputs()]
        self.out_shapes = [t.shape for t in node.outputs]
        self.weights: dict[str, list] = {}

    # ---- attrs and layouts --------------------------------------------------------------
    def ints(self, key: str, default=None) -> list[int] | None:
        value = parse_ints(self.node.get_attr(key))
        return default if value is None else value

    def int(self, key: str, default: int | None = None) -> int | None:
        value = self.ints(key)
        return default if value is None else value[0]

    def axis(self, key: str, rank: int, default: int | None = None) -> int | None:
        value = self.int(key, default)
        return None if value is None else value % max(rank, 1)

    def weight_axis(self, role: str, letter: str, default: int) -> int:
        """The axis of weight ``role`` named ``letter`` in its layout (``"O"`` of OIHW)."""
        weight = self.node.weight_at(role)
        index = weight.layout_of(letter) if weight.layout else -1
        return index if index >= 0 else default

    # ---- expressions --------------------------------------------------------------------
    @staticmethod
    def fixed(shape) -> list:
        return [Fixed(n) for n in shape]

    def unify(self, a, b) -> None:
        self.dims.unify(a, b, f"tied by {self.node.optype} {self.node.name!r}")

    def freeze(self, expr) -> None:
        self.dims.freeze(expr, f"fixed by {self.node.optype} {self.node.name!r}")

    def freeze_input(self, i: int, keep=()) -> None:
        """Freeze every axis of input ``i`` except those in ``keep``."""
        for k, expr in enumerate(self.ins[i]):
            if k not in keep:
                self.freeze(expr)

    def freeze_all(self) -> list[list]:
        """The conservative rule: nothing passes, every output axis is fixed."""
        for i in range(len(self.ins)):
            self.freeze_input(i)
        return [self.fixed(s) for s in self.out_shapes]

    def set_weight(self, role: str, exprs: list) -> None:
        if role in self.node.weights:
            self.weights[role] = list(exprs)
