"""Channel spaces: what an axis of a tensor or weight is made of, for the pruner.

Every axis of every tensor and weight gets a dim expression:

- ``Fixed(n)``: n positions that are never pruned (batch, spatial, graph inputs/outputs);
- ``Leaf(space)``: one prunable channel space (a conv's output channels, say);
- ``Cat(parts)``: the parts one after the other (``concat`` along the axis);
- ``Prod(parts)``: the parts row-major (``flatten`` of C x H x W, heads x head_dim).

Ops tie axes together by *unifying* their expressions (union-find over spaces; a space may be
bound to a structure when a reshape splits it into heads or a split cuts it into pieces).
Unifying with ``Fixed`` freezes a space: it can no longer be pruned. When structures cannot be
aligned, both sides freeze: the pruner never guesses. Kept positions of an axis follow from the
kept indices of its spaces (``kept``); the position -> space index maps (``index_maps``) give the
importance scatter.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

__all__ = ["Cat", "Dims", "Fixed", "Leaf", "Prod", "Space"]


class Space:
    """A union-find node: a prunable set of ``size`` channels, maybe bound to a structure."""

    __slots__ = ("binding", "by", "id", "inner", "parent", "reason", "size")

    def __init__(self, sid: int, size: int, inner: bool):
        self.id, self.size, self.inner = sid, size, inner
        self.parent: Space | None = None
        self.binding = None  # a dim expression this space is made of, once known
        self.reason = ""  # why it was frozen
        self.by: tuple[str, str] | None = None  # (optype, joint) whose rule froze it


@dataclass(frozen=True)
class Fixed:
    n: int


@dataclass(frozen=True)
class Leaf:
    space: Space


@dataclass(frozen=True)
class Cat:
    parts: tuple


@dataclass(frozen=True)
class Prod:
    parts: tuple


def size_of(expr) -> int:
    if isinstance(expr, Fixed):
        return expr.n
    if isinstance(expr, Leaf):
        return expr.space.size
    sizes = [size_of(p) for p in expr.parts]
    if -1 in sizes:
        return -1
    return int(sum(sizes)) if isinstance(expr, Cat) else int(np.prod(sizes, dtype=np.int64))


class Dims:
    """The spaces of one graph and the operations on dim expressions."""

    def __init__(self):
        self.spaces: list[Space] = []
        self.by: tuple[str, str] | None = None  # the joint whose rule runs now (for reports)

    def leaf(self, size: int, inner: bool = False):
        """A fresh prunable space (``Fixed`` when it has fewer than 2 channels)."""
        if size < 2:
            return Fixed(size)
        space = Space(len(self.spaces), size, inner)
        self.spaces.append(space)
        return Leaf(space)

    def find(self, space: Space) -> Space:
        while space.parent is not None:
            space = space.parent
        return space

    # ---- normal form --------------------------------------------------------------------
    def resolve(self, expr):
        """The expression with bound spaces substituted, nested parts flattened."""
        if isinstance(expr, Fixed):
            return expr
        if isinstance(expr, Leaf):
            root = self.find(expr.space)
            return self.resolve(root.binding) if root.binding is not None else Leaf(root)
        kind = type(expr)
        parts = []
        for part in (self.resolve(p) for p in expr.parts):
            parts.extend(part.parts if isinstance(part, kind) else [part])
        return _simplify(kind, parts)

    def leaves(self, expr) -> list[Space]:
        expr = self.resolve(expr)
        if isinstance(expr, Leaf):
            return [expr.space]
        if isinstance(expr, Fixed):
            return []
        return [s for p in expr.parts for s in self.leaves(p)]

    # ---- ties ---------------------------------------------------------------------------
    def unify(self, a, b, why: str = "") -> None:
        """Tie two axes of the same size; what cannot be aligned is frozen."""
        a, b = self.resolve(a), self.resolve(b)
        if a == b:
            return
        if size_of(a) != size_of(b) or -1 in (size_of(a), size_of(b)):
            self.freeze(a, why or "sizes differ")
            self.freeze(b, why or "sizes differ")
        elif isinstance(a, Fixed) or isinstance(b, Fixed):
            self.freeze(b if isinstance(a, Fixed) else a, why)
        elif isinstance(a, Leaf) or isinstance(b, Leaf):
            leaf, other = (a, b) if isinstance(a, Leaf) else (b, a)
            self._bind(leaf.space, other, why)
        elif type(a) is type(b):
            self._align(a, b, why)
        else:
            self.freeze(a, why or "a concat tied to a reshape")
            self.freeze(b, why or "a concat tied to a reshape")

    def _bind(self, space: Space, other, why: str) -> None:
        if isinstance(other, Leaf):
            target = other.space
            space.parent = target
            target.inner = target.inner or space.inner
        elif space in self.leaves(other):
            self.freeze(Leaf(space), why or "an axis made of itself")
            self.freeze(other, why or "an axis made of itself")
        else:
            space.binding = other

    def _align(self, a, b, why: str) -> None:
        """Unify two Cats (or two Prods) segment by segment where their boundaries meet."""
        for seg_a, seg_b in _segments(a, b):
            if len(seg_a) > 1 and len(seg_b) > 1 and isinstance(a, Prod):
                seg_a, seg_b = self._refine(seg_a, seg_b)
            if len(seg_a) == len(seg_b) and len(seg_a) > 1:
                for x, y in zip(seg_a, seg_b):
                    self.unify(x, y, why)
            elif len(seg_a) == 1 or len(seg_b) == 1:
                self.unify(_simplify(type(a), seg_a), _simplify(type(b), seg_b), why)
            else:
                self.freeze(_simplify(type(a), seg_a), why or "parts do not line up")
                self.freeze(_simplify(type(b), seg_b), why or "parts do not line up")

    def reshape(self, source, sizes: list[int]) -> list | None:
        """The expressions of axes of ``sizes`` (product = the source's size) that view
        ``source``: a plain space splits into new spaces (outer ones prunable, the innermost
        marked ``inner``); a product is cut at the new boundaries; None when it cannot be."""
        source = self.resolve(source)
        if isinstance(source, Leaf):
            last = len(sizes) - 1
            parts = [self.leaf(n, inner=k == last) for k, n in enumerate(sizes)]
            self.unify(source, Prod(tuple(parts)))
            return parts
        if isinstance(source, Cat):
            return None
        factors = list(source.parts) if isinstance(source, Prod) else [source]
        targets = _bounds([Fixed(n) for n in sizes])
        pieces = self._cut(factors, sorted(set(_bounds(factors)) | set(targets)))
        if pieces is None:
            return None
        out, group, total = [], [], 1
        for piece in pieces:
            group.append(piece)
            total *= size_of(piece)
            if total == targets[len(out)]:
                out.append(_simplify(Prod, group))
                group = []
        return out

    def _refine(self, seg_a: list, seg_b: list) -> tuple[list, list]:
        """Split the factors of two products of the same size at each other's boundaries
        (batch x heads merged into one axis, then split back), when the boundaries divide;
        else return them as they are (they will freeze)."""
        bounds = sorted(set(_bounds(seg_a)) | set(_bounds(seg_b)))
        pieces_a, pieces_b = self._cut(seg_a, bounds), self._cut(seg_b, bounds)
        if pieces_a is None or pieces_b is None:
            return seg_a, seg_b
        return pieces_a, pieces_b

    def _cut(self, factors: list, bounds: list[int]) -> list | None:
        out, low = [], 1
        for factor in factors:
            high = low * size_of(factor)
            inside = [t for t in bounds if low < t < high]
            points = [low, *inside, high]
            if any(q % p for p, q in itertools.pairwise(points)):
                return None
            sizes = [q // p for p, q in itertools.pairwise(points)]
            out.extend(self._split(factor, sizes) if len(sizes) > 1 else [factor])
            low = high
        return out

    def _split(self, factor, sizes: list[int]) -> list:
        if isinstance(factor, Fixed):
            return [Fixed(n) for n in sizes]
        # Only the innermost piece keeps the factor's "inner" (head dim) mark: cutting
        # batch x heads at the batch leaves the heads prunable.
        inner = bool(self.leaves(factor)) and self.leaves(factor)[0].inner
        parts = [self.leaf(n, inner=inner and k == len(sizes) - 1) for k, n in enumerate(sizes)]
        self.unify(factor, Prod(tuple(parts)))
        return parts

    def freeze(self, expr, why: str = "") -> None:
        for space in self.leaves(expr):
            space.binding = Fixed(space.size)
            space.reason = why or "tied to a fixed axis"
            space.by = self.by

    # ---- positions ----------------------------------------------------------------------
    def kept(self, expr, keep: dict[int, np.ndarray]) -> np.ndarray:
        """The kept positions of an axis, given the kept indices of each (root) space."""
        expr = self.resolve(expr)
        if isinstance(expr, Fixed):
            return np.arange(max(expr.n, 0))
        if isinstance(expr, Leaf):
            return keep.get(expr.space.id, np.arange(expr.space.size))
        if isinstance(expr, Cat):
            out, offset = [], 0
            for part in expr.parts:
                out.append(self.kept(part, keep) + offset)
                offset += size_of(part)
            return np.concatenate(out)
        result = np.zeros(1, dtype=np.int64)
        for part in expr.parts:
            result = (result[:, None] * size_of(part) + self.kept(part, keep)[None, :]).ravel()
        return result

    def index_maps(self, expr) -> dict[int, np.ndarray]:
        """``{space id: array}``: for each position of the axis, the index in that space it
        belongs to (-1 elsewhere)."""
        expr = self.resolve(expr)
        n = size_of(expr)
        if isinstance(expr, Fixed):
            return {}
        if isinstance(expr, Leaf):
            return {expr.space.id: np.arange(n)}
        maps: dict[int, np.ndarray] = {}
        if isinstance(expr, Cat):
            offset = 0
            for part in expr.parts:
                for sid, sub in self.index_maps(part).items():
                    maps.setdefault(sid, np.full(n, -1, dtype=np.int64))[
                        offset:offset + len(sub)] = sub
                offset += size_of(part)
            return maps
        sizes = [size_of(p) for p in expr.parts]
        grid = np.indices(sizes).reshape(len(sizes), -1)
        for k, part in enumerate(expr.parts):
            for sid, sub in self.index_maps(part).items():
                maps[sid] = sub[grid[k]]
        return maps


def _simplify(kind, parts: list):
    if kind is Prod:
        parts = [p for p in parts if not (isinstance(p, Fixed) and p.n == 1)]
        if not parts:
            return Fixed(1)
    if len(parts) == 1:
        return parts[0]
    if all(isinstance(p, Fixed) for p in parts):
        return Fixed(size_of(kind(tuple(parts))))
    return kind(tuple(parts))


def _bounds(factors: list) -> list[int]:
    out, total = [], 1
    for factor in factors:
        total *= size_of(factor)
        out.append(total)
    return out


def _segments(a, b) -> list[tuple[list, list]]:
    """Runs of parts of ``a`` and ``b`` covering the same positions (sums for Cat, products
    for Prod); a tail that never lines up is the last run."""
    combine = (lambda x, y: x + y) if isinstance(a, Cat) else (lambda x, y: x * y)
    parts_a, parts_b, out = list(a.parts), list(b.parts), []
    while parts_a and parts_b:
        seg_a, seg_b = [parts_a.pop(0)], [parts_b.pop(0)]
        size_a, size_b = size_of(seg_a[0]), size_of(seg_b[0])
        while size_a != size_b:
            if size_a < size_b and parts_a:
                seg_a.append(parts_a.pop(0))
                size_a = combine(size_a, size_of(seg_a[-1]))
            elif size_b < size_a and parts_b:
                seg_b.append(parts_b.pop(0))
                size_b = combine(size_b, size_of(seg_b[-1]))
            else:
                seg_a, seg_b = seg_a + parts_a, seg_b + parts_b
                parts_a, parts_b = [], []
                break
        out.append((seg_a, seg_b))
    return out
