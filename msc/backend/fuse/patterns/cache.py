"""KV caches updated in place: ``index_copy`` into a parameter that nothing else reads.

A decode step takes each layer's past keys and values as a preallocated ``[batch, heads,
max_len, head_dim]`` array and returns the present one, ``index_copy(past, positions, new)``
along the sequence axis. Computed as written, every step copies the whole cache (its
legalization and numpy fact make a new array). When ``past`` is a parameter of the function
and the copy is its only reader, nothing can observe the old contents afterwards, so the call
writes the new rows into the caller's array and returns that very array: appending a token
costs the token's bytes, not the cache's. The caller sees its array changed, which is the
point (``msc.generation`` hands the returned arrays to the next step).

The first rewritten call checks, on every run, that no two of these caches share memory: one
array passed for two layers would otherwise mix their rows silently.
"""

from __future__ import annotations

import itertools

from ....errors import RuntimeCallError
from ...runtime.program import Node
from .views import Graph

__all__ = ["write_caches_in_place"]

_OP = "index_copy"


def write_caches_in_place(graph: Graph) -> int:
    """Rewrite each in-place-able ``index_copy`` of ``graph.program``; returns how many."""
    params = set(graph.program.params)
    found = [n for n in graph.program.nodes if n.kind == "call" and n.site is not None
             and n.op == _OP and n.ins[0] in params and graph.single_use(n.ins[0])]
    caches = tuple(n.ins[0] for n in found)
    names = [graph.values[v].name for v in caches]
    for i, node in enumerate(found):
        axis = int(node.site.attr("axis", 0))
        ndim = len(graph.values[node.ins[0]].sinfo.values or ()) or None
        write = _writer(axis, ndim, names if i == 0 else None)
        ins = node.ins + (caches if i == 0 else ())
        graph.rewriter.replace_node(node, [Node("call", ins, node.out, fn=write, op=_OP,
                                                path="numpy", aliases=True, name=node.name)])
    return len(found)


def _writer(axis: int, ndim: int | None, names: list | None):
    """``fn(data, index, source[, *caches])``: source's rows written into data at index."""
    def write(data, index, source, *caches):
        if caches:
            _check_distinct(caches, names)
        at = (slice(None),) * (axis % (ndim or data.ndim)) + (index,)
        data[at] = source
        return data
    return write


def _check_distinct(caches: tuple, names: list) -> None:
    spans = sorted((a.ctypes.data, a.ctypes.data + a.nbytes, n) for a, n in zip(caches, names))
    for (_, end, first), (start, _, second) in itertools.pairwise(spans):
        if start < end:
            raise RuntimeCallError(
                f"the KV caches {first!r} and {second!r} share memory", op=_OP,
                hint="pass each layer's keys and values as its own array: the step writes "
                     "the new rows into them in place")
