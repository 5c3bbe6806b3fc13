"""Structural diff of two MSCGraphs: joints added, removed and changed.

    >>> d = diff_graphs(before, after)                     # doctest: +SKIP
    >>> d.identical, d.summary()                           # doctest: +SKIP
    (False, {'matched': 66, 'added': 0, 'removed': 0, 'changed': 26, 'renamed': 0})
    >>> print(d.format())                                  # doctest: +SKIP
    ~ conv2d_1 (msc.conv2d_bias)
        output 0 shape: [1, 64, 55, 55] -> [1, 32, 55, 55]

**Matching.** Names alone cannot pair joints: the same model imported from ONNX and from torch
gets different names (``x`` / ``inp_0``), and an edited graph can carry a name to another place.
So joints are paired by their place in the graph first, with the name as a tie-breaker:

1. The graph inputs pair by position (the i-th input of A with the i-th of B).
2. Walking A in topological order, a joint's candidates are the unmatched B joints just below
   the B partners of its nearest matched ancestors (down to ``DEPTH`` joints deep through
   unmatched B joints, so an inserted or removed joint does not cut the walk); parentless
   joints (constants) are candidates of each other. Only candidates of the same optype pair
   here, the best by: same inputs (mapped through the pairs so far), same name, same output
   shapes, fewest joints between, earliest in B.
3. Joints left over pair when they have the same name, else when they take the same mapped
   inputs (the same place in both graphs: the optype changed, e.g. ONNX's ``mean`` where torch
   has ``nn.adaptive_avg_pool2d``).
4. What is still unpaired was removed (in A only) or added (in B only).

A pair is *changed* when its optype, mapped inputs, outputs (count, shape with symbolic dims,
dtype, layout), weights (roles, shape, dtype, layout) or attrs differ; the graph changes when
its outputs (mapped) differ. Names and aliases are not structure: a pair with different names
is *renamed*, which does not make graphs differ. Weight values are not compared.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

__all__ = ["DEPTH", "GraphDiff", "JointChange", "diff_graphs"]

DEPTH = 4  # how many unmatched B joints the candidate walk may pass through
_MAX_ANCHORS = 16  # nearest matched ancestors kept per joint (bounds the walk on wide graphs)


@dataclass
class JointChange:
    """A paired joint whose structure differs: ``changes`` are ``(what, in A, in B)``."""

    a: str
    b: str
    optype: str
    changes: list[tuple[str, object, object]]


@dataclass
class GraphDiff:
    a_name: str
    b_name: str
    pairs: list[tuple[str, str]] = field(default_factory=list)
    added: list[tuple[str, str]] = field(default_factory=list)    # (name, optype), in B only
    removed: list[tuple[str, str]] = field(default_factory=list)  # (name, optype), in A only
    changed: list[JointChange] = field(default_factory=list)
    graph_changes: list[tuple[str, object, object]] = field(default_factory=list)

    @property
    def renamed(self) -> list[tuple[str, str]]:
        return [(a, b) for a, b in self.pairs if a != b]

    @property
    def identical(self) -> bool:
        """Structurally equal: nothing added, removed or changed (renames aside)."""
        return not (self.added or self.removed or self.changed or self.graph_changes)

    def summary(self) -> dict:
        return {"matched": len(self.pairs), "added": len(self.added),
                "removed": len(self.removed), "changed": len(self.changed),
                "renamed": len(self.renamed)}

    def to_dict(self) -> dict:
        return {"a": self.a_name, "b": self.b_name, "identical": self.identical,
                "summary": self.summary(),
                "added": [{"name": n, "optype": o} for n, o in self.added],
                "removed": [{"name": n, "optype": o} for n, o in self.removed],
                "changed": [{"a": c.a, "b": c.b, "optype": c.optype,
                             "changes": [{"what": w, "a": x, "b": y} for w, x, y in c.changes]}
                            for c in self.changed],
                "graph": [{"what": w, "a": x, "b": y} for w, x, y in self.graph_changes],
                "renamed": [{"a": a, "b": b} for a, b in self.renamed]}

    def format(self, max_renamed: int = 10) -> str:
        lines = [f"- {n} ({o})" for n, o in self.removed]
        lines += [f"+ {n} ({o})" for n, o in self.added]
        for c in self.changed:
            name = c.a if c.a == c.b else f"{c.a} / {c.b}"
            lines.append(f"~ {name} ({c.optype})")
            lines += [f"    {w}: {_show(x)} -> {_show(y)}" for w, x, y in c.changes]
        lines += [f"~ graph {w}: {_show(x)} -> {_show(y)}" for w, x, y in self.graph_changes]
        renamed = self.renamed
        if renamed:
            shown = ", ".join(f"{a} -> {b}" for a, b in renamed[:max_renamed])
            more = f" (+{len(renamed) - max_renamed} more)" if len(renamed) > max_renamed else ""
            lines.append(f"renamed: {shown}{more}")
        s = self.summary()
        verdict = "identical structure" if self.identical else "graphs differ"
        lines.append(f"{verdict}: {s['added']} added, {s['removed']} removed, {s['changed']} "
                     f"changed, {s['renamed']} renamed ({s['matched']} joints paired)")
        return "\n".join(lines)


def _show(value) -> str:
    if value is None:
        return "(absent)"
    return '""' if value == "" else str(value)


def diff_graphs(a, b) -> GraphDiff:
    """Pair the joints of MSCGraphs ``a`` and ``b`` (see the module docstring) and list what
    differs."""
    matcher = _Matcher(a, b)
    matcher.run()
    result = GraphDiff(a.name, b.name)
    for x in a.get_nodes():
        y = matcher.match.get(x.name)
        if y is None:
            result.removed.append((x.name, x.optype))
            continue
        result.pairs.append((x.name, y.name))
        changes = _joint_changes(x, y, matcher)
        if changes:
            result.changed.append(JointChange(x.name, y.name, x.optype, changes))
    result.added = [(y.name, y.optype) for y in b.get_nodes() if y.name not in matcher.taken]
    outputs = [matcher.tensor_in_b(t.name) for t in a.get_outputs()]
    b_outputs = [t.name for t in b.get_outputs()]
    if outputs != b_outputs:
        result.graph_changes.append(("outputs", outputs, b_outputs))
    return result


class _Matcher:
    """Pairs A joints with B joints: ``match`` maps A names to B joints."""

    def __init__(self, a, b):
        self.a, self.b = a, b
        self.match: dict = {}
        self.taken: set[str] = set()
        self._anchors: dict[str, list] = {}
        self._producers = {t.name: (node.name, i) for node in a.get_nodes()
                           for i, t in enumerate(node.outputs)}

    def pair(self, x, y) -> None:
        self.match[x.name] = y
        self.taken.add(y.name)

    def run(self) -> None:
        for ta, tb in zip(self.a.get_inputs(), self.b.get_inputs()):
            self.pair(self.a.find_producer(ta.name), self.b.find_producer(tb.name))
        roots = [y for y in self.b.get_nodes() if not y.parents]
        for x in self.a.get_nodes():
            if x.name not in self.match:
                y = self._best(x) if x.parents else self._root(x, roots)
                if y is not None:
                    self.pair(x, y)
        self._loose()

    def _best(self, x):
        """Step 2: the best same-optype candidate near ``x``'s place, or None."""
        mapped, shapes = self.mapped_inputs(x), _shapes(x)
        # Candidates with the very same inputs are children of the anchors: a cheap first look
        # that settles most joints (the full walk below would rank them first anyway).
        direct = [y for anchor in self.anchors(x) for y in anchor.children
                  if y.optype == x.optype and y.name not in self.taken and _inputs(y) == mapped]
        near = [(y, 1) for y in direct] or [(y, d) for y, d in self._near(x)
                                            if y.optype == x.optype]
        scored = [((_inputs(y) == mapped, x.name == y.name, _shapes(y) == shapes, -d, -y.index),
                   y) for y, d in near]
        return max(scored, key=lambda item: item[0])[1] if scored else None

    def _root(self, x, roots: list):
        same = [y for y in roots if y.optype == x.optype and y.name not in self.taken]
        named = [y for y in same if y.name == x.name]
        return (named or same or [None])[0]

    def _loose(self) -> None:
        """Step 3: leftovers pair by name, else by the same mapped inputs."""
        free = {y.name: y for y in self.b.get_nodes() if y.name not in self.taken}
        by_inputs: dict[tuple, list] = {}
        for y in free.values():
            by_inputs.setdefault(tuple(_inputs(y)), []).append(y)
        for x in self.a.get_nodes():
            if x.name in self.match:
                continue
            y = free.get(x.name)
            if y is None and x.parents:
                y = next((c for c in by_inputs.get(tuple(self.mapped_inputs(x)), [])
                          if c.name not in self.taken), None)
            if y is not None and y.name not in self.taken:
                self.pair(x, y)

    def anchors(self, x) -> list:
        """B partners of ``x``'s nearest matched ancestors (at most _MAX_ANCHORS)."""
        if x.name in self._anchors:
            return self._anchors[x.name]
        found: dict[str, object] = {}
        for p in x.parents:
            partner = self.match.get(p.name)
            for y in [partner] if partner is not None else self.anchors(p):
                found.setdefault(y.name, y)
        result = sorted(found.values(), key=lambda y: -y.index)[:_MAX_ANCHORS]
        self._anchors[x.name] = result
        return result

    def _near(self, x) -> list:
        """``(B joint, depth)`` below the anchors, walking through unmatched B joints."""
        seen, out = set(), []
        queue = deque((c, 1) for y in self.anchors(x) for c in y.children)
        while queue:
            y, depth = queue.popleft()
            if y.name in seen or depth > DEPTH:
                continue
            seen.add(y.name)
            if y.name not in self.taken:
                out.append((y, depth))
                queue.extend((c, depth + 1) for c in y.children)
        return out

    def mapped_inputs(self, x) -> list:
        """``x``'s inputs as B tensor names through the pairs (A-only ones keep a marker)."""
        return [self.tensor_in_b(t.name) for t in x.get_inputs()]

    def tensor_in_b(self, tensor_name: str) -> str:
        """The B tensor standing for A's tensor ``tensor_name``."""
        node, idx = self._producers[tensor_name]
        partner = self.match.get(node)
        if partner is None or idx >= len(partner.outputs):
            return f"(A only) {tensor_name}"
        return partner.outputs[idx].name


def _inputs(y) -> list[str]:
    return [t.name for t in y.get_inputs()]


def _shapes(y) -> list:
    return [t.get_shape(True) for t in y.outputs]


def _tensor_changes(what: str, x, y) -> list[tuple]:
    changes = []
    for key, get in (("shape", lambda t: t.get_shape(True)), ("dtype", lambda t: t.dtype),
                     ("layout", lambda t: t.layout.name)):
        if get(x) != get(y):
            changes.append((f"{what} {key}", get(x), get(y)))
    return changes


def _joint_changes(x, y, matcher: _Matcher) -> list[tuple]:
    changes = [("optype", x.optype, y.optype)] if x.optype != y.optype else []
    mapped, actual = matcher.mapped_inputs(x), _inputs(y)
    if mapped != actual:
        changes.append(("inputs", [t.name for t in x.get_inputs()], actual))
    if len(x.outputs) != len(y.outputs):
        changes.append(("outputs", len(x.outputs), len(y.outputs)))
    for i, (tx, ty) in enumerate(zip(x.outputs, y.outputs)):
        changes += _tensor_changes(f"output {i}", tx, ty)
    wx, wy = x.get_weights(), y.get_weights()
    for role in [*wx, *(r for r in wy if r not in wx)]:
        if role not in wx or role not in wy:
            changes.append((f"weight {role}", _weight_text(wx.get(role)),
                            _weight_text(wy.get(role))))
        else:
            changes += _tensor_changes(f"weight {role}", wx[role], wy[role])
    ax, ay = x.get_attrs(), y.get_attrs()
    changes += [(f"attr {k}", ax.get(k), ay.get(k)) for k in sorted(set(ax) | set(ay))
                if ax.get(k) != ay.get(k)]
    return changes


def _weight_text(t) -> str | None:
    return None if t is None else f"{t.get_shape(True)} {t.dtype} {t.layout.name}"
