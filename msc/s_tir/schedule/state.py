"""TVM's object model of a schedule: ``ScheduleState``, stable ``StmtSRef`` handles, the block
scopes' dependencies and each block's cached flags.

A :class:`StmtSRef` names a block (by its name) or a loop (by its loop var) of one function,
so it stays the same object while primitives rebuild the (immutable) statements around it;
``sref.stmt`` is the statement as it is now (None once a primitive removed it). The state
computes, per block, TVM's three cached flags from the current function::

    s = ScheduleState(func)
    sref = s.get_sref(block)                    # a block (or loop) statement of s.mod
    s._get_cached_flags(sref)                   # CachedFlags(affine_binding=True, ...)
    s.get_sblock_scope(s.get_sref(root)).get_deps_by_src(sref)   # [Dependency(RAW ...)]

- ``affine_binding``: the block's iter var bindings are quasi-affine in the loops between it
  and its scope block (``+``, ``-``, ``*`` / ``//`` / ``%`` by constants).
- ``region_cover``: what the block reads of buffers its scope's earlier blocks write is
  covered by what they write (the flags' regions, ``flags.py``).
- ``stage_pipeline`` (of a scope block): no write-after-read among its child blocks and every
  child covers its reads.
"""

from __future__ import annotations

import enum
from dataclasses import replace
from typing import NamedTuple

from ...errors import ScheduleError
from ...tir.function import For, PrimFunc, SBlock
from .flags import cached_flags, scope_deps
from .region import block_reads, block_writes
from .tree import child_blocks, find_path, kids, replace_at

__all__ = ["CachedFlags", "DepKind", "Dependency", "SBlockScope", "ScheduleState", "StmtSRef",
           "tree_index"]


class CachedFlags(NamedTuple):
    affine_binding: bool
    region_cover: bool
    stage_pipeline: bool


class DepKind(enum.IntEnum):
    """The kind of a dependency between two blocks of a scope (TVM's ``DepKind``)."""

    RAW = 0
    WAW = 1
    WAR = 2
    OPAQUE = 3


class StmtSRef:
    """A stable handle to a block or loop of a schedule's function (TVM's ``StmtSRef``)."""

    __slots__ = ("_key", "_state")

    def __init__(self, state: ScheduleState, key: tuple):
        self._state, self._key = state, key

    @property
    def stmt(self):
        """The block or loop now (None when a primitive removed it)."""
        entry = self._state.index_of(self._key[1]).get(self._key)
        return None if entry is None else entry[0]

    @property
    def parent(self) -> StmtSRef | None:
        entry = self._state.index_of(self._key[1]).get(self._key)
        if entry is None or entry[1] is None:
            return None
        return self._state.sref_of_key(entry[1])

    def same_as(self, other) -> bool:
        return self is other

    def __repr__(self) -> str:
        return f"StmtSRef({self._key[0]} {self._key[2]!r})"


class Dependency(NamedTuple):
    src: StmtSRef
    dst: StmtSRef
    kind: DepKind


class SBlockScope:
    """The dependencies among the child blocks of one scope block, in program order."""

    def __init__(self, deps: list):
        self.deps = deps

    def get_deps_by_src(self, block: StmtSRef) -> list:
        return [d for d in self.deps if d.src is block]

    def get_deps_by_dst(self, block: StmtSRef) -> list:
        return [d for d in self.deps if d.dst is block]


class ScheduleState:
    """The functions a schedule works on and the handles to their blocks and loops.

    ``mod`` is a PrimFunc or IRModule (TVM's constructor); a Schedule makes its state with
    ``funcs=`` a callable giving its current functions, so the state follows the schedule."""

    def __init__(self, mod=None, *, debug_mask="none", enable_check: bool = True,
                 funcs=None):
        if funcs is None:
            table = _functions(mod)
            funcs = lambda: table  # a standalone state owns its functions
        self._funcs = funcs
        self._srefs: dict = {}
        self._indexes: dict = {}  # func name -> (func, {key: (stmt, parent key)})
        self._mod = None  # ([(name, id(func))], the IRModule of those functions)
        self.debug_mask, self.enable_check = debug_mask, enable_check

    @property
    def mod(self):
        """The functions as an IRModule: the same object while no function changes (TVM's
        state holds one module; its tests compare its hash before and after a replace)."""
        from ...relax.module import IRModule

        funcs = dict(self._funcs())
        cached = self._mod
        if cached is None or cached[0] != [(k, id(f)) for k, f in funcs.items()]:
            cached = self._mod = ([(k, id(f)) for k, f in funcs.items()], IRModule(funcs))
        return cached[1]

    # ------------------------------------------------------------------ handles
    def get_sref(self, stmt) -> StmtSRef | None:
        """The handle of a block or loop statement of the current functions (None for any
        other statement, as TVM keeps srefs of blocks and loops only)."""
        if not isinstance(stmt, (SBlock, For)):
            return None
        for name in self._funcs():
            for key, (node, _) in self.index_of(name).items():
                if node is stmt:
                    return self.sref_of_key(key)
        raise ScheduleError(f"the {type(stmt).__name__} is not a statement of the schedule's "
                            "functions", hint="pass a statement taken from state.mod")

    def sref_of_key(self, key: tuple) -> StmtSRef:
        sref = self._srefs.get(key)
        if sref is None:
            sref = self._srefs[key] = StmtSRef(self, key)
        return sref

    def block_sref(self, func_name: str, block_name: str) -> StmtSRef:
        return self.sref_of_key(("block", func_name, block_name))

    def loop_sref(self, func_name: str, var) -> StmtSRef:
        return self.sref_of_key(("loop", func_name, id(var)))

    def index_of(self, func_name: str) -> dict:
        func = self._funcs().get(func_name)
        if not isinstance(func, PrimFunc):
            return {}
        cached = self._indexes.get(func_name)
        if cached is None or cached[0] is not func:
            cached = self._indexes[func_name] = (func, tree_index(func, func_name))
        return cached[1]

    # ------------------------------------------------------------------ analyses
    def get_sblock_scope(self, scope: StmtSRef) -> SBlockScope:
        """The dependencies among the blocks whose nearest enclosing block is ``scope``."""
        block = _block_of(scope)
        children = child_blocks(block.body)
        return SBlockScope([Dependency(self.block_sref(scope._key[1], a.name),
                                       self.block_sref(scope._key[1], b.name), DepKind[kind])
                            for a, b, kind in scope_deps(children)])

    def _get_cached_flags(self, block: StmtSRef) -> CachedFlags:
        _block_of(block)
        func = self._funcs()[block._key[1]]
        return CachedFlags(*cached_flags(func, block._key[2]))

    def replace(self, src_sref: StmtSRef, tgt_stmt, block_sref_reuse=None) -> None:
        """TVM's ``ScheduleState.replace``: the block or loop of ``src_sref`` becomes
        ``tgt_stmt``. msc's statements are immutable, so the function is always rebuilt along
        the path (TVM writes in place what nobody else holds): a caller's old function stays
        as it was. ``block_sref_reuse`` ({old block: new block}) moves the old block's sref to
        the new block; a loop keeps its sref while its loop var stays."""
        old = src_sref.stmt if isinstance(src_sref, StmtSRef) else None
        if old is None:
            raise ScheduleError(f"replace: {src_sref!r} is not a block or loop of the schedule "
                                "(any more)", hint="take the sref from state.get_sref(stmt)")
        if not isinstance(tgt_stmt, (SBlock, For)):
            raise ScheduleError(f"replace: the target is a {type(tgt_stmt).__name__}; a block "
                                "or loop replaces a block or loop")
        name = src_sref._key[1]
        funcs = self._funcs()
        func = funcs[name]
        path = find_path(func.body, lambda node: node is old)
        funcs[name] = replace(func, body=replace_at(path, tgt_stmt))
        for before, after in (block_sref_reuse or {}).items():
            self._move_block_sref(name, before, after)

    def _move_block_sref(self, func_name: str, before: SBlock, after: SBlock) -> None:
        sref = self._srefs.pop(("block", func_name, before.name), None)
        if sref is not None:
            sref._key = ("block", func_name, after.name)
            self._srefs[sref._key] = sref


def _block_of(sref: StmtSRef) -> SBlock:
    stmt = sref.stmt
    if not isinstance(stmt, SBlock):
        raise ScheduleError(f"{sref!r} is not a block of the schedule (any more)")
    return stmt


def tree_index(func: PrimFunc, func_name: str) -> dict:
    """{key: (statement, parent key)} of every block and loop of ``func``."""
    out: dict = {}

    def walk(s, parent):
        key = None
        if isinstance(s, SBlock):
            key = ("block", func_name, s.name)
        elif isinstance(s, For):
            key = ("loop", func_name, id(s.var))
        if key is not None:
            out[key] = (s, parent)
            parent = key
        for child in kids(s):
            walk(child, parent)

    walk(func.body, None)
    return out


def block_buffers(block: SBlock) -> tuple:
    """(names read, names written) of a block."""
    return {b.name for b in block_reads(block)}, {b.name for b in block_writes(block)}


def _functions(mod) -> dict:
    if isinstance(mod, PrimFunc):
        return {"main": mod}
    if hasattr(mod, "get_global_vars"):
        return {gv.name_hint: mod[gv] for gv in mod.get_global_vars()}
    raise ScheduleError(f"a ScheduleState takes an IRModule or a PrimFunc, got "
                        f"{type(mod).__name__}")
