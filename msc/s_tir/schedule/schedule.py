"""``Schedule``: TensorIR's loop transformations over msc prim funcs, with a replayable trace.

    sch = Schedule(mod)                            # an IRModule or a PrimFunc ("main")
    block = sch.get_block("Y", func_name="mm_relu")
    i, j, k = sch.get_loops(block)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    sch.decompose_reduction(block, k)
    print(sch.mod.script())                        # the scheduled module as TVMScript
    print(sch.trace)                               # b0 = sch.get_sblock(name="Y", ...)
Every primitive applies whole or raises :class:`msc.errors.ScheduleError` naming the block or
loop, leaving the schedule as it was (an unexpected failure inside one is a ScheduleError too).
"""

from __future__ import annotations

import copy as _copy
import random

from ...errors import MSCError, ScheduleError
from ...tir import expr as E
from ...tir.function import PrimFunc
from ..tensor_intrin import TensorIntrin
from . import axes as AX
from . import blockize as BZ
from . import blocks as B
from . import buffers as BF
from . import cache as CH
from . import compute_at as CA
from . import dtype as DT
from . import epilogue as EP
from . import inline as I
from . import layout as LT
from . import loops as L
from . import partition as PT
from . import reindex as RX
from . import rfactor as RF
from . import tensorize as TZ
from .cache_prims import CacheMixin
from .queries import QueryMixin
from .rvs import RV, BlockRV, ExprRV, LoopRV, RVNotFoundError, SBlockRV
from .state import StmtSRef
from .trace import Instruction, Trace
from .tree import block_loops
from .window_prims import WindowMixin

__all__ = ["BlockRV", "ExprRV", "LoopRV", "SBlockRV", "Schedule"]


class Schedule(QueryMixin, WindowMixin, CacheMixin):
    """A schedule over the prim funcs of ``mod`` (TVM's ``tir.Schedule`` / ``s_tir``)."""

    _BLOCK_RV, _LOOP_RV = BlockRV, LoopRV

    def __init__(self, mod, *, seed: int | None = None, debug_mask="none",
                 error_render_level: str = "detail", enable_check: bool = True):
        self._funcs = _functions(mod)
        prims = [n for n, f in self._funcs.items() if isinstance(f, PrimFunc)]
        if not prims:
            raise ScheduleError("a Schedule needs a module with at least one T.prim_func")
        self.func_working_on = FuncName(prims[0]) if len(prims) == 1 else None
        self.error_render_level = error_render_level  # how get_block's refusal reads
        self._rng = random.Random(seed)
        self.trace = Trace()
        self._rvs: dict = {}      # key -> (kind, payload)
        self._forced: list = []   # decisions for the next sampling calls (force_decisions)

    # ------------------------------------------------------------------ state
    @property
    def mod(self):
        from ...relax.module import IRModule

        return IRModule(dict(self._funcs))

    def copy(self) -> Schedule:
        other = _copy.copy(self)
        other._funcs, other._rvs = dict(self._funcs), dict(self._rvs)
        other.trace = Trace(list(self.trace.insts), dict(self.trace.decisions))
        other._rng = random.Random(self._rng.random())
        return other

    def force_decisions(self, decisions: list) -> None:
        """The next sampling calls take these decisions in order (a search's candidate is the
        decisions of one run of a sketch); afterwards sampling is random again."""
        self._forced = list(decisions)

    def _next_decision(self, decision):
        if decision is None and self._forced:
            return self._forced.pop(0)
        return decision

    def seed(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def work_on(self, func_name: str) -> None:
        self._func(func_name)
        self.func_working_on = FuncName(func_name)

    def show(self) -> None:
        print(self.mod.script())

    def get(self, rv):
        """The SBlock, For, or int an RV (or a StmtSRef) stands for."""
        if isinstance(rv, StmtSRef):
            return rv.stmt
        kind, payload = self._lookup(rv)
        if kind == "block":
            func_name, name = payload
            return _block_node(self._funcs[func_name], name)
        if kind == "loop":
            func_name, var = payload
            return L.find_loop(self._funcs[func_name], var)[-1]
        return payload

    # ------------------------------------------------------------------ blocks and loops
    def get_block(self, name: str, func_name: str | None = None) -> BlockRV:
        func_name = func_name or self.func_working_on
        try:
            _block_node(self._func(func_name), name)
        except ScheduleError as exc:
            raise _block_not_found(name, exc, self.error_render_level) from None
        rv = self._new(BlockRV, "block", (func_name, name))
        self._record("GetSBlock", [], [name, func_name], [rv])
        return rv

    get_sblock = get_block

    def get_loops(self, block: BlockRV | str) -> list:
        block = self._as_block(block)
        func_name, name = self._block(block)
        path = B.find_block(self._funcs[func_name], name, "get_loops")
        rvs = [self._new(LoopRV, "loop", (func_name, lp.var)) for lp in block_loops(path)]
        self._record("GetLoops", [block], [], rvs)
        return rvs

    def split(self, loop: LoopRV, factors, preserve_unit_iters: bool = True,
              disable_predication: bool = False) -> list:
        """``disable_predication``: no ``T.where`` guard when the factors overshoot the
        extent (the caller promises the extra iterations are harmless)."""
        func_name, var = self._loop(loop)
        values = [None if f is None else self._int(f) for f in factors]
        func, new_vars = self._apply("split", L.split, self._funcs[func_name], var, values,
                                     not disable_predication)
        self._funcs[func_name] = func
        rvs = [self._new(LoopRV, "loop", (func_name, v)) for v in new_vars]
        self._record("Split", [loop, *factors], [preserve_unit_iters, disable_predication],
                     rvs)
        return rvs

    def loop_partition(self, loop: LoopRV, factors, preserve_unit_iters: bool = True) -> list:
        """Cut ``loop`` into consecutive loops of the ``factors``' sizes (one may be None,
        and a last loop takes the rest), each in an opaque block of its own."""
        func_name, var = self._loop(loop)
        values = [None if f is None else self._factor(f) for f in factors]
        func, new_vars = self._apply("loop_partition", PT.loop_partition,
                                     self._funcs[func_name], var, values)
        self._funcs[func_name] = func
        rvs = [self._new(LoopRV, "loop", (func_name, v)) for v in new_vars]
        self._record("LoopPartition", [loop, *factors], [preserve_unit_iters], rvs)
        return rvs

    def _factor(self, value) -> int:
        if isinstance(value, ExprRV):
            return int(self.get(value))
        if E.as_int(E.convert(value)) is None:
            raise ScheduleError(f"a factor must be an integer, got {value!r}")
        return E.as_int(E.convert(value))

    def fuse(self, *loops: LoopRV, preserve_unit_iters: bool = True) -> LoopRV:
        func_name, variables = self._same_func(loops, "fuse")
        func, var = self._apply("fuse", L.fuse, self._funcs[func_name], variables)
        self._funcs[func_name] = func
        rv = self._new(LoopRV, "loop", (func_name, var))
        self._record("Fuse", list(loops), [preserve_unit_iters], [rv])
        return rv

    def merge(self, *loops: LoopRV) -> LoopRV:
        """Merge sibling loop nests of equal extents into one (TVM's ``merge``): their
        bodies run in turn under the merged loops; returns the innermost merged loop."""
        func_name, variables = self._same_func(loops, "merge")
        func, var = self._apply("merge", L.merge, self._funcs[func_name], variables)
        self._funcs[func_name] = func
        rv = self._new(LoopRV, "loop", (func_name, var))
        self._record("Merge", list(loops), [], [rv])
        return rv

    def reorder(self, *ordered_loops: LoopRV) -> None:
        func_name, variables = self._same_func(ordered_loops, "reorder")
        self._funcs[func_name] = self._apply("reorder", L.reorder, self._funcs[func_name],
                                             variables)
        self._record("Reorder", list(ordered_loops), [], [])

    def parallel(self, loop: LoopRV) -> None:
        self._kind(loop, "parallel", "Parallel")

    def vectorize(self, loop: LoopRV) -> None:
        self._kind(loop, "vectorize", "Vectorize")

    def unroll(self, loop: LoopRV) -> None:
        self._kind(loop, "unroll", "Unroll")

    def bind(self, loop: LoopRV, thread_axis: str) -> None:
        """Refused: thread bindings are GPU threads, and msc compiles for the CPU."""
        _, var = self._loop(loop)
        raise ScheduleError(f"cannot bind loop {var.name!r} to {thread_axis!r}: thread bindings "
                            "are for GPU targets, and msc compiles for the CPU (target llvm)",
                            key=var.name, hint="run the loop on CPU threads with "
                                               "sch.parallel(loop)")

    def _kind(self, loop: LoopRV, what: str, kind: str) -> None:
        func_name, var = self._loop(loop)
        self._funcs[func_name] = self._apply(what, L.set_kind, self._funcs[func_name], var, what)
        self._record(kind, [loop], [], [])

    # ------------------------------------------------------------------ block primitives
    def cache_read(self, block: BlockRV, read_buffer_index, storage_scope: str,
                   consumer_blocks=None) -> BlockRV:
        """A copy of read ``read_buffer_index`` (a position or a name) that the readers (or
        ``consumer_blocks``) read instead, placed as TVM places it (``cache.py``)."""
        return self._cache("cache_read", CH.cache_read, "CacheRead", block, read_buffer_index,
                           storage_scope, consumer_blocks)

    def cache_write(self, block: BlockRV, write_buffer_index, storage_scope: str,
                    consumer_blocks=None) -> BlockRV:
        """``block`` writes into a cache, copied back to the buffer before its readers (or
        after ``consumer_blocks``, which read the cache)."""
        return self._cache("cache_write", CH.cache_write, "CacheWrite", block,
                           write_buffer_index, storage_scope, consumer_blocks)

    def _cache(self, what, fn, kind, block, index, scope, consumers) -> BlockRV:
        block = self._as_block(block)
        func_name, name = self._block(block)
        node = B.find_block(self._funcs[func_name], name, what)[-1]
        index = self._apply(what, CH.resolve_index, node, index,
                            "read" if kind == "CacheRead" else "write", what)
        rvs = [self._as_block(c) for c in consumers or ()]
        names = tuple(self._block(c)[1] for c in rvs)
        func, new = self._apply(what, fn, self._funcs[func_name], name, index, str(scope),
                                names)
        self._funcs[func_name] = func
        rv = self._new(BlockRV, "block", (func_name, new))
        self._record(kind, [block, *rvs], [index, str(scope)], [rv])
        return rv

    def compute_at(self, block: BlockRV, loop: LoopRV, preserve_unit_loops: bool = False,
                   index: int = -1) -> None:
        self._at("compute_at", CA.compute_at, "ComputeAt", block, loop, preserve_unit_loops,
                 index)

    def reverse_compute_at(self, block: BlockRV, loop: LoopRV,
                           preserve_unit_loops: bool = False, index: int = -1) -> None:
        self._at("reverse_compute_at", CA.reverse_compute_at, "ReverseComputeAt", block, loop,
                 preserve_unit_loops, index)

    def _at(self, what, fn, kind, block, loop, preserve, index) -> None:
        block = self._as_block(block)
        func_name, name = self._block(block)
        loop_func, var = self._loop(loop)
        if loop_func != func_name:
            raise ScheduleError(f"{what}: the block and the loop are in different functions")
        self._funcs[func_name] = self._apply(what, fn, self._funcs[func_name], name, var,
                                             bool(preserve), int(index))
        self._record(kind, [block, loop], [bool(preserve), int(index)], [])

    def set_scope(self, block: BlockRV | str, buffer_index: int | str,
                  storage_scope: str) -> None:
        """Move the buffer ``block`` writes (index or name) to ``storage_scope``."""
        block = self._as_block(block)
        func_name, name = self._block(block)
        index = buffer_index if isinstance(buffer_index, str) else int(buffer_index)
        self._funcs[func_name] = self._apply("set_scope", BF.set_scope,
                                             self._funcs[func_name], name, index,
                                             str(storage_scope))
        self._record("SetScope", [block], [index, str(storage_scope)], [])

    def rfactor(self, loop: LoopRV, factor_axis: int) -> BlockRV:
        """Factor the reduction under ``loop`` into partial results (a new block over a new
        buffer with the loop as an axis at ``factor_axis``) and a write-back block."""
        func_name, var = self._loop(loop)
        func, name = self._apply("rfactor", RF.rfactor, self._funcs[func_name], var,
                                 int(factor_axis))
        self._funcs[func_name] = func
        rv = self._new(BlockRV, "block", (func_name, name))
        self._record("RFactor", [loop], [int(factor_axis)], [rv])
        return rv

    def unsafe_set_dtype(self, block: BlockRV | str, buffer_index: int, dtype: str) -> None:
        """Store the buffer ``block`` writes as ``dtype`` (casts at every access round)."""
        block = self._as_block(block)
        func_name, name = self._block(block)
        self._funcs[func_name] = self._apply("unsafe_set_dtype", DT.unsafe_set_dtype,
                                             self._funcs[func_name], name, int(buffer_index),
                                             str(dtype))
        self._record("UnsafeSetDType", [block], [int(buffer_index), str(dtype)], [])

    def storage_align(self, block: BlockRV | str, buffer_index: int, axis: int, factor: int,
                      offset: int) -> None:
        """Pad dim ``axis`` of the buffer ``block`` writes for its allocation (TVM's
        ``buffer_dim_align`` annotation)."""
        block = self._as_block(block)
        func_name, name = self._block(block)
        args = [int(buffer_index), int(axis), int(factor), int(offset)]
        self._funcs[func_name] = self._apply("storage_align", BF.storage_align,
                                             self._funcs[func_name], name, *args)
        self._record("StorageAlign", [block], args, [])

    def reorder_block_iter_var(self, block: BlockRV | str, new_order: list) -> None:
        """Declare the block's iter vars in ``new_order`` (positions, a permutation)."""
        block = self._as_block(block)
        func_name, name = self._block(block)
        order = [int(k) for k in new_order]
        self._funcs[func_name] = self._apply("reorder_block_iter_var",
                                             AX.reorder_block_iter_var,
                                             self._funcs[func_name], name, order)
        self._record("ReorderBlockIterVar", [block], [order], [])

    def reindex(self, block: BlockRV | str, buffer) -> BlockRV:
        """Route the block's access to ``buffer`` (``("read", k)``, ``("write", k)`` or a
        name) through a new buffer indexed by the block's iter vars; returns the copy block."""
        block = self._as_block(block)
        func_name, name = self._block(block)
        func = self._funcs[func_name]
        kind, index = self._apply("reindex", RX.resolve_buffer,
                                  B.find_block(func, name, "reindex")[-1], buffer, "reindex")
        func, new = self._apply("reindex", RX.reindex, func, name, kind, index)
        self._funcs[func_name] = func
        rv = self._new(BlockRV, "block", (func_name, new))
        self._record("ReIndex", [block], [[kind, index]], [rv])
        return rv

    def transform_layout(self, block: BlockRV | str, buffer, index_map, pad_value=None, *,
                         assume_injective_transform: bool = False) -> None:
        """Give ``buffer`` (``("read", k)``, ``("write", k)`` or a name) of ``block`` the
        layout ``index_map`` (old indices -> new), rewriting every access to it."""
        block = self._as_block(block)
        func_name, name = self._block(block)
        func = self._funcs[func_name]
        kind, index = self._apply("transform_layout", RX.resolve_buffer,
                                  B.find_block(func, name, "transform_layout")[-1], buffer,
                                  "transform_layout")
        func, text = self._apply("transform_layout", LT.transform_layout, func, name, kind,
                                 index, index_map, pad_value, bool(assume_injective_transform))
        self._funcs[func_name] = func
        pad = pad_value if isinstance(pad_value, (int, float)) else None
        self._record("TransformLayout", [block],
                     [[kind, index], text, pad, bool(assume_injective_transform)], [])

    def transform_block_layout(self, block: BlockRV | str, index_map) -> None:
        """Re-express the block's iteration space through ``index_map`` (a bijective map of
        its iter vars, e.g. ``lambda i, j: (i * 128 + j,)``): new iter vars and loops."""
        block = self._as_block(block)
        func_name, name = self._block(block)
        func, text = self._apply("transform_block_layout", LT.transform_block_layout,
                                 self._funcs[func_name], name, index_map)
        self._funcs[func_name] = func
        self._record("TransformBlockLayout", [block], [text], [])

    def fuse_reduction_epilogue(self, reduction_block: BlockRV | str,
                                epilogue_block: BlockRV | str) -> None:
        """Move an elementwise epilogue (bias add, ReLU, clip) into the reduction block,
        applied at every reduction step as TVM defines it."""
        blocks = [self._as_block(b) for b in (reduction_block, epilogue_block)]
        (func_name, reduction), (other, epilogue) = [self._block(b) for b in blocks]
        if func_name != other:
            raise ScheduleError("fuse_reduction_epilogue: the blocks are in different "
                                "functions")
        self._funcs[func_name] = self._apply("fuse_reduction_epilogue",
                                             EP.fuse_reduction_epilogue,
                                             self._funcs[func_name], reduction, epilogue)
        self._record("FuseReductionEpilogue", blocks, [], [])

    def blockize(self, target, preserve_unit_iters: bool = True) -> BlockRV:
        """Turn the subtree under loop ``target`` into an outer block over the outer parts
        of the inner block's bindings; returns the outer block."""
        if isinstance(target, (list, tuple)):
            raise ScheduleError("blockize of a list of blocks is not implemented in msc",
                                hint="blockize the loop that holds them")
        func_name, var = self._loop(target)
        func, name = self._apply("blockize", BZ.blockize, self._funcs[func_name], var,
                                 bool(preserve_unit_iters))
        self._funcs[func_name] = func
        rv = self._new(BlockRV, "block", (func_name, name))
        self._record("Blockize", [target], [bool(preserve_unit_iters)], [rv])
        return rv

    def tensorize(self, block_or_loop, tensor_intrin: str,
                  preserve_unit_iters: bool = True) -> None:
        """Replace the computation under a loop (blockized first) or in a block by the
        implementation of the registered ``TensorIntrin`` (``tensorize.py``)."""
        rv = self._as_block(block_or_loop) if isinstance(block_or_loop, str) else block_or_loop
        kind, (func_name, ref) = self._lookup(rv)
        intrin = TensorIntrin.get(str(tensor_intrin))
        func, _ = self._apply("tensorize", TZ.tensorize, self._funcs[func_name], (kind, ref),
                              intrin, str(tensor_intrin), bool(preserve_unit_iters))
        self._funcs[func_name] = func
        self._record("Tensorize", [rv], [str(tensor_intrin), bool(preserve_unit_iters)], [])

    def compute_inline(self, block: BlockRV | str) -> None:
        """Inline a block that computes an intermediate buffer into its consumers."""
        self._inline("compute_inline", I.compute_inline, "ComputeInline", block)

    def reverse_compute_inline(self, block: BlockRV | str) -> None:
        """Inline a consumer block back into the single producer of what it reads."""
        self._inline("reverse_compute_inline", I.reverse_compute_inline,
                     "ReverseComputeInline", block)

    def _inline(self, what, fn, kind, block) -> None:
        block = self._as_block(block)
        func_name, name = self._block(block)
        self._funcs[func_name] = self._apply(what, fn, self._funcs[func_name], name)
        self._record(kind, [block], [], [])

    def decompose_reduction(self, block: BlockRV | str, loop: LoopRV) -> BlockRV:
        block = self._as_block(block)
        func_name, name = self._block(block)
        loop_func, var = self._loop(loop)
        if loop_func != func_name:
            raise ScheduleError("decompose_reduction: the block and the loop are in different "
                                "functions")
        func, init, update = self._apply("decompose_reduction", B.decompose_reduction,
                                         self._funcs[func_name], name, var)
        self._funcs[func_name] = func
        self._rvs[block.key] = ("block", (func_name, update))  # TVM: block -> the update
        rv = self._new(BlockRV, "block", (func_name, init))
        self._record("DecomposeReduction", [block, loop], [], [rv])
        return rv

    # ------------------------------------------------------------------ sampling
    def sample_perfect_tile(self, loop: LoopRV, n: int, max_innermost_factor: int = 16,
                            decision=None) -> list:
        """``n`` factors whose product is the loop's constant extent, innermost at most
        ``max_innermost_factor`` (or the given ``decision``)."""
        extent = E.as_int(self.get(loop).extent)
        decision = self._next_decision(decision)
        if extent is None:
            raise ScheduleError("sample_perfect_tile needs a loop of constant extent")
        if decision is None:
            decision = perfect_tile(self._rng, extent, int(n), int(max_innermost_factor))
        decision = [int(d) for d in decision]
        if len(decision) != n or _prod(decision) != extent:
            raise ScheduleError(f"tile decision {decision} does not split {extent} in {n}")
        rvs = [self._new(ExprRV, "value", d) for d in decision]
        self._record("SamplePerfectTile", [loop], [int(n), int(max_innermost_factor)], rvs,
                     decision)
        return rvs

    def sample_categorical(self, candidates: list, probs: list, decision=None) -> ExprRV:
        decision = self._next_decision(decision)
        if decision is None:
            decision = self._rng.choices(range(len(candidates)), weights=probs)[0]
        if not 0 <= int(decision) < len(candidates):
            raise ScheduleError(f"categorical decision {decision} outside {candidates}")
        rv = self._new(ExprRV, "value", candidates[int(decision)])
        self._record("SampleCategorical", [], [list(candidates), list(probs)], [rv],
                     int(decision))
        return rv

    def enter_postproc(self) -> None:
        self._record("EnterPostproc", [], [], [])

    # ------------------------------------------------------------------ internals
    def _func(self, name: str | None) -> PrimFunc:
        prims = [n for n, f in self._funcs.items() if isinstance(f, PrimFunc)]
        if name is None:
            raise WorkOnError("the schedule does not know which function to be working on: "
                              "the module has several prim funcs",
                              hint=f"call sch.work_on(name) or pass func_name; prim funcs: "
                                   f"{prims}")
        if not isinstance(self._funcs.get(name), PrimFunc):
            raise ScheduleError(f"no prim func {name!r} in the module", key=name,
                                hint=f"prim funcs: {prims}")
        return self._funcs[name]

    def _new(self, cls, kind: str, payload) -> RV:
        rv = cls(id(self))
        self._rvs[rv.key] = (kind, payload)
        return rv

    def _lookup(self, rv):
        if not isinstance(rv, RV) or rv.key not in self._rvs:
            raise RVNotFoundError(f"{rv!r} is not a block, loop or value of this schedule")
        return self._rvs[rv.key]

    def _as_block(self, block) -> BlockRV:
        """TVM's primitives take a block by name too: ``sch.compute_at("B", loop)`` is
        ``sch.compute_at(sch.get_sblock("B"), loop)``, and is recorded so."""
        return self.get_block(block) if isinstance(block, str) else block

    def _block(self, rv) -> tuple:
        kind, payload = self._lookup(rv)
        if kind != "block":
            raise ScheduleError(f"expected a block, got a {kind}")
        return payload

    def _loop(self, rv) -> tuple:
        kind, payload = self._lookup(rv)
        if kind != "loop":
            raise ScheduleError(f"expected a loop, got a {kind}")
        return payload

    def _int(self, value) -> int:
        if isinstance(value, ExprRV):
            return int(self.get(value))
        if isinstance(value, E.IntImm) and value.dtype != "bool":
            value = value.value  # TVM's te.const(16, "int64") / T.int64(16) factors
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ScheduleError(f"a split factor must be a positive int or None, got {value!r}")
        return value

    def _same_func(self, loops, what: str) -> tuple:
        pairs = [self._loop(lp) for lp in loops]
        if not pairs or len({f for f, _ in pairs}) != 1:
            raise ScheduleError(f"{what} needs loops of one function")
        return pairs[0][0], [v for _, v in pairs]

    def _apply(self, what: str, fn, *args):
        try:
            return fn(*args)
        except MSCError:
            raise
        except Exception as exc:  # a primitive's bug must not crash a search: report it
            raise ScheduleError(f"{what} failed: {type(exc).__name__}: {exc}") from exc

    def _record(self, kind: str, inputs: list, attrs: list, outputs: list,
                decision=None) -> None:
        self.trace.append(Instruction(kind, inputs, attrs, outputs), decision)


class FuncName(str):
    """The name of the function a schedule works on; equal to its GlobalVar too (TVM's
    ``sch.func_working_on`` is the GlobalVar)."""

    def __eq__(self, other) -> bool:
        return str.__eq__(self, getattr(other, "name_hint", other))

    __hash__ = str.__hash__


class WorkOnError(ScheduleError, ValueError):
    """No function to work on (TVM raises ValueError)."""


def _block_not_found(name: str, exc: ScheduleError, level: str) -> ScheduleError:
    """TVM's refusal of ``get_sblock`` at its ``error_render_level``: "detail" names the
    block (and msc's hint lists the blocks), "fast" does not, "none" renders nothing."""
    if level == "none":
        return ScheduleError("ScheduleError: (not rendered)")
    if level == "fast":
        return ScheduleError("Cannot find a block with the specified name")
    if "no block" not in str(exc):
        return exc  # no such function: msc's own error says which
    return ScheduleError(f"Cannot find a block with the name: {name} ({exc.message})",
                         key=name, hint=exc.hint)


def _block_node(func, name: str):
    """The block ``name`` of ``func``; ``"root"`` is the function's root block (TVM's
    ``get_sblock("root")``), which the primitives refuse to move."""
    if name == "root" and getattr(func.body, "name", None) == "root":
        return func.body
    return B.find_block(func, name)[-1]


def _functions(mod) -> dict:
    if isinstance(mod, PrimFunc):
        return {"main": mod}
    if hasattr(mod, "get_global_vars"):
        return {gv.name_hint: mod[gv] for gv in mod.get_global_vars()}
    raise ScheduleError(f"a Schedule takes an IRModule or a PrimFunc, got {type(mod).__name__}")


def _prod(values) -> int:
    out = 1
    for v in values:
        out *= v
    return out


def _prime_factors(n: int) -> list:
    out, p = [], 2
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out + ([n] if n > 1 else [])


def perfect_tile(rng: random.Random, extent: int, n: int, max_inner: int) -> list:
    """Each prime factor of ``extent`` goes to a random position; redrawn while the innermost
    factor is too large (then the innermost gets what fits)."""
    primes = _prime_factors(extent)
    for _ in range(32):
        tile = [1] * n
        for p in primes:
            tile[rng.randrange(n)] *= p
        if tile[-1] <= max_inner:
            return tile
    inner = max(d for d in range(1, max_inner + 1) if extent % d == 0)
    return [extent // inner] + [1] * (n - 2) + [inner]
