"""The VM's program form: what ``relax.build`` lowers a Relax function into.

A :class:`Program` holds numbered values and nodes in binding order, each call already resolved
to a callable. Its shape-independent analysis (positions, aliasing roots, liveness) is computed
once and read by every per-shape plan (plan.py)::

    program.value(sinfo, "x")      # a new value id
    program.analysis.order         # nodes in execution position order
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...tir import expr as tir

__all__ = ["NOVALUE", "Analysis", "Node", "Program", "Value", "analyze", "eval_dims",
           "eval_prim", "node_inputs"]

NOVALUE = object()


@dataclass(eq=False)
class Value:
    """One SSA value. ``const`` is set for compile-time values (constants, static shapes,
    strings); ``expr`` for symbolic shapes (a tuple of PrimExprs) and prim values."""

    id: int
    sinfo: Any
    name: str = ""
    const: Any = NOVALUE
    expr: Any = None
    fields: Any = None  # value ids of a tuple built by a "tuple" node


@dataclass(eq=False)
class Node:
    """One step. ``kind`` is call | tuple | getitem | if | match_cast | eval.

    call: ``fn(*ins, *buffers)``; ``dps`` holds the TensorStructInfo of each output buffer
    (empty when ``fn`` allocates its own result). ``aliases`` says the result may be a view of
    an input. if: ``branches`` is ((then_nodes, then_result), (else_nodes, else_result)).
    ``site`` is the Site (kernels/base.py) of an op call until build resolves it into ``fn``.
    """

    kind: str
    ins: tuple
    out: int
    fn: Callable | None = None
    dps: tuple = ()
    op: str = ""
    path: str = ""
    name: str = ""
    aliases: bool = False
    index: int = 0
    branches: tuple = ()
    sinfo: Any = None
    site: Any = None
    tir: Any = None  # the CompiledPrimFunc when fn is that kernel (Impl.extra "tir")
    wants_env: bool = False  # fn takes the symbolic dims' values first (Impl.extra "env")


@dataclass(eq=False)
class Program:
    """A lowered function: ``params`` and ``result`` are value ids."""

    name: str
    values: list
    params: list
    nodes: list
    result: int
    param_names: list = field(default_factory=list)
    _analysis: Any = None

    def value(self, sinfo, name: str = "", **kw) -> int:
        self.values.append(Value(len(self.values), sinfo, name, **kw))
        return len(self.values) - 1

    def walk(self, nodes=None):
        """Nodes in execution position order (branch nodes before their If)."""
        for node in self.nodes if nodes is None else nodes:
            for branch_nodes, _ in node.branches:
                yield from self.walk(branch_nodes)
            yield node

    @property
    def analysis(self) -> Analysis:
        if self._analysis is None:
            self._analysis = analyze(self)
        return self._analysis


# ---------------------------------------------------------------------------------------------
# Shape-independent analysis: positions, aliasing roots, liveness.


@dataclass
class Analysis:
    order: list            # nodes in position order
    position: dict         # id(node) -> position
    buffers: dict          # id(node) -> list of buffer ids
    buffer_sinfo: list     # buffer id -> TensorStructInfo
    fresh: set             # buffer ids reachable from the result
    buffer_last_use: list  # buffer id -> last position
    value_last_use: dict   # value id -> last position (result: never)


def node_inputs(node: Node) -> tuple:
    if node.kind == "if":
        return node.ins + tuple(result for _, result in node.branches)
    return node.ins


def analyze(program: Program, merged: frozenset = frozenset()) -> Analysis:
    """``merged``: ids of concat nodes whose result is a view of its inputs' buffers."""
    order = list(program.walk())
    position = {id(n): p for p, n in enumerate(order)}
    roots: dict[int, frozenset] = defaultdict(frozenset)
    buffers, buffer_sinfo = {}, []
    for node in order:
        ids = list(range(len(buffer_sinfo), len(buffer_sinfo) + len(node.dps)))
        buffer_sinfo.extend(node.dps)
        buffers[id(node)] = ids
        if ids:
            roots[node.out] = frozenset(ids)
        elif node.kind != "call" or node.aliases or id(node) in merged:
            roots[node.out] = frozenset().union(*(roots[i] for i in node_inputs(node)))
    last_use = [0] * len(buffer_sinfo)
    value_last_use: dict[int, int] = {}
    for node in order:
        p = position[id(node)]
        for b in buffers[id(node)]:
            last_use[b] = max(last_use[b], p)
        value_last_use.setdefault(node.out, p)
        for i in node_inputs(node):
            value_last_use[i] = p
            for b in roots[i]:
                last_use[b] = max(last_use[b], p)
    value_last_use[program.result] = len(order) + 1
    return Analysis(order, position, buffers, buffer_sinfo, set(roots[program.result]),
                     last_use, value_last_use)


# ---------------------------------------------------------------------------------------------
# Shape evaluation.


def eval_dims(values, env: dict) -> tuple | None:
    """Concrete dims of a shape (tuple of PrimExprs) under ``env``, or None if not bound."""
    if values is None:
        return None
    out = []
    for v in values:
        if v.is_const:
            out.append(int(v.value))
            continue
        if any(x.name not in env for x in tir.free_vars(v)):
            return None
        out.append(int(tir.evaluate(v, env)))
    return tuple(out)


def eval_prim(expr, env: dict):
    if expr.is_const:
        return expr.value
    if any(x.name not in env for x in tir.free_vars(expr)):
        return None
    return tir.evaluate(expr, env)
