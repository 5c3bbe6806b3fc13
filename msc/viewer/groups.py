"""Collapsible groups of joints: the scope/module tree, with long flat runs cut into blocks.

A joint's scope path comes from its ``scope`` list and its name (``layer1.0.conv1`` ->
``layer1/0``; ONNX ``/layer1/layer1.0/conv1/Conv`` -> ``layer1/layer1.0/conv1``). Names without
a shared prefix (``conv2d_3``, as from_relax gives) have no scope; any level that still holds
more than ``MAX_ITEMS`` items is cut, in topological order, at the points where only one
tensor is alive (the end of a residual block, the output of a transformer layer), so each
level stays small enough to lay out quickly in a browser.

    >>> tree = group_joints(["a.x", "a.y", "b"], [(0, 1), (1, 2)])
    >>> [item.label if isinstance(item, Group) else item for item in tree.items]
    ['a', 2]
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["MAX_ITEMS", "Group", "group_joints", "joint_paths"]

MAX_ITEMS = 40  # items shown at one level; dagre lays out ~40 boxes in well under 0.5 s
MIN_BLOCK = 6  # a cut block closes at the first single-tensor point after this many items
FLATTEN_SHARE = 0.9  # a scope holding >= 90% of its parent's joints adds a level, no meaning



class Group:
    """A box of the view: ``items`` are joint indices (int) or sub-Groups, in topo order."""

    __slots__ = ("block", "first", "gid", "items", "label", "parent", "size")

    def __init__(self, label: str, items: list | None = None, block: bool = False):
        self.label = label
        self.block = block  # cut from a long level (no scope of its own)
        self.items: list = items or []
        self.gid = -1
        self.parent: Group | None = None
        self.size = 0  # joints under it
        self.first = 0  # smallest joint index under it (its topological position)

    def walk(self):
        """This group and every group under it, parents first."""
        stack = [self]
        while stack:
            group = stack.pop()
            yield group
            stack.extend(reversed([i for i in group.items if isinstance(i, Group)]))


def joint_paths(names: Sequence[str], scopes: Sequence[Sequence[str]] | None = None):
    """Scope path (list of segments, leaf excluded) of each joint."""
    scopes = scopes or [()] * len(names)
    paths = []
    for name, scope in zip(names, scopes):
        # ONNX scopes use "/" and keep module paths whole inside ("/layer1/layer1.0/Conv")
        segs = [s for s in name.split("/" if "/" in name else ".") if s]
        paths.append([*scope, *segs[:-1]])
    return paths


def _scope_tree(paths: list[list[str]]) -> Group:
    """Nested groups of the path prefixes that hold two joints or more."""
    counts: dict[tuple, int] = {}
    for path in paths:
        for k in range(1, len(path) + 1):
            key = tuple(path[:k])
            counts[key] = counts.get(key, 0) + 1
    root = Group("")
    by_key: dict[tuple, Group] = {(): root}
    for idx, path in enumerate(paths):
        k = len(path)
        while k and counts[tuple(path[:k])] < 2:
            k -= 1
        node = root
        for depth in range(1, k + 1):
            key = tuple(path[:depth])
            if key not in by_key:
                by_key[key] = Group(path[depth - 1])
                node.items.append(by_key[key])
            node = by_key[key]
        node.items.append(idx)
    return root


def _finish(group: Group) -> None:
    """Fill size/first bottom-up (iteratively: trees can be deep)."""
    for g in reversed(list(group.walk())):
        _count(g)


def _count(g: Group) -> None:
    """size/first of ``g`` from its items' (already counted)."""
    g.size = sum(i.size if isinstance(i, Group) else 1 for i in g.items)
    g.first = min(i.first if isinstance(i, Group) else i for i in g.items)


def _simplify(root: Group) -> None:
    """Merge single-child chains (``a`` holding only ``b`` -> ``a/b``) and flatten levels that
    hold nearly all of their parent (a scope every joint shares tells nothing). Top-down over
    the tree as it becomes: a dropped level is not visited again."""
    _finish(root)
    stack = [root]
    while stack:
        group = stack.pop()
        group.items = _kept_items(group)
        stack.extend(i for i in group.items if isinstance(i, Group))


def _kept_items(group: Group) -> list:
    items, stack = [], list(reversed(group.items))
    while stack:
        item = stack.pop()
        if isinstance(item, Group) and (
                len(item.items) == 1 or item.size >= FLATTEN_SHARE * group.size > 1):
            for child in item.items:  # keep the dropped level in the names
                if isinstance(child, Group):
                    child.label = f"{item.label}/{child.label}"
            stack.extend(reversed(item.items))
        else:
            items.append(item)
    return items


def _item_edges(owner: dict[int, int], parents: Sequence[Sequence[int]]) -> list:
    """Edges between item positions; ``owner`` maps each joint under the items -> position."""
    out = set()
    for joint, pos in owner.items():
        for parent in parents[joint]:
            src = owner.get(parent)
            if src is not None and src != pos:
                out.add((src, pos))
    return sorted(out)


def _clean_cuts(count: int, pairs: list[tuple[int, int]]) -> list[bool]:
    """``clean[k]``: every edge crossing the boundary after position k starts at k, so only
    one joint's outputs are alive there (a natural place to end a block)."""
    diff = [0] * (count + 1)
    for a, b in pairs:
        lo, hi = min(a, b), max(a, b)
        diff[lo + 1] += 1  # the edge makes boundaries lo+1 .. hi-1 dirty
        diff[hi] -= 1
    clean, run = [], 0
    for k in range(count):
        run += diff[k]
        clean.append(run == 0)
    return clean


def _end_label(item, names: Sequence[str], last: bool) -> str:
    """A scope group by its label (``3``), a joint or a cut block by its end joint's name."""
    while isinstance(item, Group) and item.block:
        item = item.items[-1 if last else 0]
    return item.label if isinstance(item, Group) else names[item]


def _block_label(items: list, names: Sequence[str]) -> str:
    return f"{_end_label(items[0], names, False)} .. {_end_label(items[-1], names, True)}"


def _cut_blocks(group: Group, names: Sequence[str], parents) -> None:
    """Split a level with too many items into blocks at single-tensor points (repeatedly)."""
    while len(group.items) > MAX_ITEMS:
        group.items.sort(key=lambda i: i.first if isinstance(i, Group) else i)
        clean = _clean_cuts(len(group.items), _item_edges(_owners(group.items), parents))
        limit = max(MIN_BLOCK, min(MAX_ITEMS, len(group.items) // MIN_BLOCK))
        blocks, current = [], []
        for pos, item in enumerate(group.items):
            current.append(item)
            # end where one tensor is alive, after the last joint of a chain (block ... relu)
            last_of_run = pos + 1 == len(clean) or not clean[pos + 1]
            if (clean[pos] and last_of_run and len(current) >= MIN_BLOCK) \
                    or len(current) >= limit:
                blocks.append(current)
                current = []
        if current:
            blocks.append(current)
        group.items = [_block(b, names) if len(b) > 1 else b[0] for b in blocks]
        _count(group)  # only this level changed: re-walking the tree made big graphs quadratic


def _block(items: list, names: Sequence[str]) -> Group:
    block = Group(_block_label(items, names), items, block=True)
    _count(block)
    return block


def _owners(items: list) -> dict[int, int]:
    owner = {}
    for pos, item in enumerate(items):
        if isinstance(item, Group):
            for g in item.walk():
                owner.update((i, pos) for i in g.items if not isinstance(i, Group))
        else:
            owner[item] = pos
    return owner


def group_joints(names: Sequence[str], edges: Sequence[tuple[int, int]],
                 scopes: Sequence[Sequence[str]] | None = None) -> Group:
    """The root Group of joints ``names`` (topological order) linked by ``edges`` (src, dst).

    Every group gets ``gid`` (its position in ``root.walk()``, root 0) and ``parent``.
    """
    root = _scope_tree(joint_paths(names, scopes))
    _simplify(root)
    parents: list[list[int]] = [[] for _ in names]
    for src, dst in edges:
        parents[dst].append(src)
    for group in list(root.walk()):
        _cut_blocks(group, names, parents)
    _finish(root)
    for gid, group in enumerate(root.walk()):
        group.gid = gid
        for item in group.items:
            if isinstance(item, Group):
                item.parent = group
    return root
