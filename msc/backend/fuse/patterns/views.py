"""Which values are strided views of another, found by moving element numbers through ops.

A chain of layout ops (reshape, permute_dims, split, strided_slice, squeeze, ...) only moves
elements. Running the ops' own numpy facts on ``arange(size)`` shaped like the chain's base
gives, for every element of the result, its position in the base; when those positions are
``offset + sum(i_d * stride_d)`` the result is a strided view of the base, and a kernel can
read it in place (heads of a ``[seq, heads * dim]`` projection as ``[heads, seq, dim]``). The
same works forward: where each element of a value ends up after a chain, so a kernel can
write its result directly in the layout the chain produces::

    graph = Graph(program)               # or Graph(program, rewriter): the build's
    base, view = graph.view_of(vid)      # view.offset, view.strides (elements), view.shape
    end, place = graph.placed(vid)       # the chain's end value; where vid's elements go
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ....relax.op.registry import OPS, ops_with
from ....relax.struct_info import TensorStructInfo
from ...runtime.program import NOVALUE, Node, Program
from ..rewrite import Rewriter

__all__ = ["LAYOUT_OPS", "Graph", "Strided", "static_shape"]

# The ones a result can be written through: every input element lands in the output once.
_BIJECTIVE = ops_with("movement")
# Ops that move elements without computing: numpy facts on index arrays give their effect.
# A result is read through these and through the two that pick a part of their input.
LAYOUT_OPS = _BIJECTIVE | {"split", "strided_slice"}
_MAX_ELEMENTS = 1 << 24  # index arrays beyond this cost more build time than they save


@dataclass(frozen=True)
class Strided:
    """Element ``i`` of a view of ``shape`` is at ``offset + sum(i_d * strides_d)``."""

    shape: tuple
    offset: int
    strides: tuple


def static_shape(sinfo) -> tuple | None:
    if not isinstance(sinfo, TensorStructInfo) or sinfo.values is None:
        return None
    if not all(d.is_const for d in sinfo.values):
        return None
    return tuple(int(d.value) for d in sinfo.values)


def strided(positions: np.ndarray) -> Strided | None:
    """The strides of an array of positions, or None when it is not affine in the index."""
    if positions.size == 0:
        return None
    offset = int(positions.flat[0])
    strides = []
    for d, n in enumerate(positions.shape):
        if n == 1:
            strides.append(0)
            continue
        unit = [0] * positions.ndim
        unit[d] = 1
        strides.append(int(positions[tuple(unit)]) - offset)
    expect = np.full(positions.shape, offset, np.int64)
    for d, (n, s) in enumerate(zip(positions.shape, strides)):
        shape = [1] * positions.ndim
        shape[d] = n
        expect = expect + (np.arange(n, dtype=np.int64) * s).reshape(shape)
    if not np.array_equal(expect, positions):
        return None
    return Strided(positions.shape, offset, tuple(strides))


class Graph:
    """Producers and uses of a program's values, for pattern matching: read from a rewriter
    (fuse/rewrite.py), which keeps them current while the passes replace nodes, and erases
    what a replacement leaves unread (the pieces of a fused region) at once."""

    def __init__(self, program: Program, rewriter: Rewriter | None = None):
        self.program = program
        self.values = program.values
        self.rewriter = rewriter if rewriter is not None else Rewriter(program)
        self.producer = self.rewriter.producers
        self.users = self.rewriter.user_lists
        self.uses = _UseCounts(self.rewriter)

    def nodes(self, reverse: bool = False):
        """The top-level nodes as they are now, for a pass's loop (erased ones skipped)."""
        return self.rewriter.each(reverse=reverse)

    def replace(self, out: int, ins: tuple, kernel, op: str, name: str, dps=None) -> Node:
        """Put a native call of ``kernel`` where the producer of ``out`` stands; the nodes it
        absorbs, now unread, are erased."""
        fused = Node("call", tuple(ins), out, fn=kernel,
                     dps=dps or (self.values[out].sinfo,), op=op, path="native", name=name)
        self.rewriter.replace_node(self.producer[out], [fused])
        self.rewriter.erase_dead()
        return fused

    def call(self, vid: int, *ops: str) -> Node | None:
        """The op call producing ``vid`` when its op is one of ``ops`` (any op if none)."""
        node = self.producer.get(vid)
        if node is None or node.kind != "call" or node.site is None:
            return None
        return node if not ops or node.op in ops else None

    def const(self, vid: int):
        value = self.values[vid].const
        return None if value is NOVALUE else value

    def shape(self, vid: int) -> tuple | None:
        return static_shape(self.values[vid].sinfo)

    def single_use(self, vid: int) -> bool:
        return self.uses.get(vid, 0) == 1 and vid != self.program.result

    # -- backwards: a value as a view of its base -------------------------------------------
    def view_of(self, vid: int) -> tuple[int, Strided] | None:
        """(base value, the strided view) of ``vid`` through layout ops (possibly none)."""
        chain, base = [], vid
        while (step := self._layout_step(base)) is not None:
            chain.append(step)
            base = step[1]
        base_shape, shape = self.shape(base), self.shape(vid)
        if base_shape is None or shape is None or math.prod(base_shape) > _MAX_ELEMENTS:
            return None
        positions = np.arange(math.prod(base_shape), dtype=np.int64).reshape(base_shape)
        for node, _ in reversed(chain):
            positions = self._apply(node, positions)
            if positions is None:
                return None
        if positions.shape != shape:
            return None
        view = strided(positions)
        return None if view is None else (base, view)

    def _layout_step(self, vid: int) -> tuple[Node, int] | None:
        """(node, its tensor input) when ``vid`` comes out of a layout op (getitem of split
        included: the node is then the getitem, applied after the split)."""
        node = self.producer.get(vid)
        if node is None:
            return None
        if node.kind == "getitem":
            split = self.call(node.ins[0], "split")
            return (node, split.ins[0]) if split is not None else None
        if node.kind != "call" or node.site is None or node.op not in LAYOUT_OPS:
            return None
        if node.op == "split":
            return None  # reached only through its getitem
        if any(self.const(i) is None for i in node.ins[1:]):
            return None
        return node, node.ins[0]

    def _apply(self, node: Node, positions: np.ndarray) -> np.ndarray | None:
        if node.kind == "getitem":
            split = self.producer[node.ins[0]]
            parts = _numpy(split, [positions])
            return None if parts is None else np.asarray(parts[node.index])
        return _numpy(node, [positions] + [self.const(i) for i in node.ins[1:]])

    # -- forwards: where a value's elements end up ------------------------------------------
    def placed(self, vid: int) -> tuple[int, Strided, list] | None:
        """(end value, where each element of ``vid`` is in it, the chain's nodes) following
        single-use bijective layout ops; the chain may be empty."""
        shape = self.shape(vid)
        if shape is None or math.prod(shape) > _MAX_ELEMENTS:
            return None
        numbers = np.arange(math.prod(shape), dtype=np.int64).reshape(shape)
        end, chain = vid, []
        while self.single_use(end):
            node = self.users[end][0]
            if (node.kind != "call" or node.site is None or node.op not in _BIJECTIVE
                    or node.ins[0] != end or any(self.const(i) is None for i in node.ins[1:])):
                break
            moved = _numpy(node, [numbers] + [self.const(i) for i in node.ins[1:]])
            if moved is None or moved.shape != self.shape(node.out):
                break
            numbers, end = moved, node.out
            chain.append(node)
        where = np.empty(numbers.size, np.int64)
        where[numbers.reshape(-1)] = np.arange(numbers.size, dtype=np.int64)
        view = strided(where.reshape(shape))
        return None if view is None else (end, view, chain)


class _UseCounts(Mapping):
    """value -> how often it is read (the program's result counting once), always current."""

    def __init__(self, rewriter: Rewriter):
        self.rewriter = rewriter

    def __getitem__(self, vid: int) -> int:
        return self.rewriter.uses(vid)

    def __iter__(self):
        return iter(self.rewriter.user_lists)

    def __len__(self) -> int:
        return len(self.rewriter.user_lists)


def _numpy(node: Node, args: list):
    """The node's numpy fact on index arrays (None when it does not give integers back)."""
    fn = OPS[node.op].facts.get("numpy") if node.op in OPS else None
    if fn is None:
        return None
    try:
        result = fn(args, node.site.attrs)
    except Exception:  # noqa: BLE001  (a fact that cannot run on indices: no view)
        return None
    if isinstance(result, (tuple, list)):
        return result if all(np.asarray(r).dtype == np.int64 for r in result) else None
    result = np.asarray(result)
    return result if result.dtype == np.int64 else None
