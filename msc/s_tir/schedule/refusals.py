"""TVM's refusals that several primitives share, as ``ScheduleError`` subclasses worded as
TVM words them (``analysis.cc``, ``for_kind.cc``, ``loop_transformation.cc``).

* ``parallel`` / ``vectorize`` need a loop whose child blocks each are a local complete block
  or a local reduction block (compact dataflow): iterations of such a loop touch disjoint
  outputs, so running them at once cannot race.
* ``reorder`` needs the blocks under the loops to have (partially) affine bindings with respect
  to the loops being reordered: a binding like ``v0 * v0 + v1`` or ``l * 16`` has no iteration
  order that reordering preserves.
* ``rfactor`` needs its block's scope to be a stage pipeline (every consumer's region covered by
  its producers, no write-after-read).

Each check is a function taking the function and the loop or block path it inspects::

    check_compact_dataflow(func, loop_path, "parallel")   # NotCompactDataFlowError or None
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from ...errors import ScheduleError
from ...tir import expr as E
from ...tir.function import For, PrimFunc, SBlock
from .flags import cached_flags, scope_deps
from .region import accesses, block_reads, block_writes
from .tree import blocks_in, child_blocks, find_path, kids

__all__ = ["NotAffineBindingError", "NotCompactDataFlowError", "NotStagePipelineError",
           "check_compact_dataflow", "check_reorder_bindings", "check_stage_pipeline",
           "quasi_affine"]

_LOCAL_COMPLETE = (
    "Definition of a local complete block:\n1) All block vars are data parallel\n2) Local "
    "Dominant: the block is the only writer of its output, dominating the reader of its output "
    "buffers under a given subtree\n3) No overlap between the buffers the block reads and writes")
_LOCAL_REDUCTION = (
    "Definition of a reduction block:\n1) The block has the `init` statement\n2) All the block "
    "bindings are quasi-affine expressions\n3) All block vars are either data parallel block "
    "vars or reduction block vars\n4) Local Dominant: the block is the only writer of its output, "
    "dominating the reader of its output buffers under a given subtree\n5) The reduction block "
    "vars are not used to index the output buffers")
_STAGE_PIPELINE = (
    "Definition of a scope that is a stage pipeline:\n- The region cover property holds for "
    "every of its child blocks\n- No write-after-read dependency or opaque dependency,\n- only "
    "read-after-write and write-after-write are allowed\n- All the statements in the scope are "
    "schedulable statements, i.e. SBlock and For")


class NotCompactDataFlowError(ScheduleError):
    """TVM's ``NotCompactDataFlowError``: a child block of the loop is neither a local
    complete block nor a local reduction block."""


class NotAffineBindingError(ScheduleError):
    """TVM's ``NotAffineBindingError``: a block's bindings are not affine in the loops a
    primitive rearranges."""


class NotStagePipelineError(ScheduleError):
    """TVM's ``NotStagePipelineError``: the block's scope is not a stage pipeline."""


# ------------------------------------------------------------------------ compact dataflow

def check_compact_dataflow(func: PrimFunc, loop_path: list, what: str) -> None:
    """Refuse to ``what`` (parallel / vectorize) the loop at the end of ``loop_path`` when one
    of its child blocks is neither local complete nor local reduction (TVM's
    ``CheckSubtreeCompactDataflow``)."""
    loop = loop_path[-1]
    children = child_blocks(loop.body)
    writers = Counter(b.name for child in children for inner in child_blocks(child.body)
                      for b in block_writes(inner))
    for block in children:
        complete = _complete_code(block, writers)
        reduction = _reduction_code(func, block, writers)
        if complete and reduction:
            raise NotCompactDataFlowError(
                f"{what}: The queried subtree root {loop.var.name!r} in SRef tree does not "
                f"have compact dataflow, because its child block {block.name!r} on SRef tree "
                "is neither a local complete block nor a local reduction block.\nIt violates "
                f"condition #{complete} as a local complete block.\n{_LOCAL_COMPLETE}\nIt "
                f"violates condition #{reduction} as a local reduction block.\n"
                f"{_LOCAL_REDUCTION}", key=loop.var.name)


def _dominant(block: SBlock, writers: Counter) -> bool:
    """TVM's local dominance under a loop counts the writers inside each child block."""
    return all(writers[b.name] <= 1 for b in block_writes(block))


def _complete_code(block: SBlock, writers: Counter) -> int:
    if any(iv.kind != "spatial" for iv in block.iter_vars):
        return 1
    if not _dominant(block, writers):
        return 2
    written = {b.name for b in block_writes(block)}
    return 3 if written & {b.name for b in block_reads(block)} else 0


def _reduction_code(func: PrimFunc, block: SBlock, writers: Counter) -> int:
    if block.init is None:
        return 1
    if not cached_flags(func, block.name)[0]:
        return 2
    if any(iv.kind not in ("spatial", "reduce") for iv in block.iter_vars):
        return 3
    if not _dominant(block, writers):
        return 4
    reduce = {iv.var.name for iv in block.iter_vars if iv.kind == "reduce"}
    for _, _, idx in accesses(replace(block, init=None, iter_vars=()), "write"):
        if any(v.name in reduce for i in idx for v in E.free_vars(i)):
            return 5
    return 0


# ------------------------------------------------------------------------ affine bindings

def check_reorder_bindings(top: list, bottom: For) -> None:
    """TVM's ``CheckBlockIterTypeAndAffineBinding`` for ``reorder``: each block under the
    ``bottom`` loop has only spatial / reduce axes and bindings affine in the loops from the
    ``top`` loop (the end of path ``top``) down to it; loops above are constants there."""
    above = {id(s) for s in top[:-1]}
    for block in blocks_in(bottom.body):
        odd = [iv.var.name for iv in block.iter_vars if iv.kind not in ("spatial", "reduce")]
        if odd:
            raise ScheduleError(f"reorder: The block {block.name!r} under the loops to be "
                                "reordered have block iter type other than data-parallel or "
                                "reduction", key=block.name)
        path = find_path(top[-1], lambda s, b=block: s is b) or []
        loops = {s.var.name for s in [top[-1], *path] if isinstance(s, For) and
                 id(s) not in above}
        if not affine_binding(block, loops):
            parent = next((s for s in reversed(top[:-1]) if isinstance(s, (For, SBlock))),
                          None)
            under = f" under {parent.var.name}" if isinstance(parent, For) else ""
            kind = "an partial affine binding" if under else "an affine binding"
            raise NotAffineBindingError(f"reorder: The block {block.name!r} is required to "
                                        f"have {kind}{under}", key=block.name)


def affine_binding(block: SBlock, loops: set) -> bool:
    """Whether the block's bindings are affine in the loop vars ``loops`` as TVM's
    ``IsAffineBinding`` finds them: quasi-affine, each binding's finest term of unit scale
    (``l * 16`` alone is not), and a predicate over several of those loops only where a
    binding fuses them too (``T.where(i0 * 4 + i1 < 10)`` with ``vi = i0 * 4 + i1``)."""
    bindings = [iv.binding for iv in block.iter_vars]
    if not all(quasi_affine(b, loops) and _unit_scale(b, loops) for b in bindings):
        return False
    if block.predicate is None:
        return True
    fused = [{v.name for v in E.free_vars(b)} & loops for b in bindings]
    for part in _conjuncts(block.predicate):
        used = {v.name for v in E.free_vars(part)} & loops
        if len(used) > 1 and not any(used <= names for names in fused):
            return False
    return True


def quasi_affine(e, loops: set) -> bool:
    """Sums, differences and products by constants of the ``loops``' vars, and their floor
    division / modulo by constants (vars outside ``loops`` count as constants)."""
    if not any(v.name in loops for v in E.free_vars(e)):
        return True
    if isinstance(e, E.Var):
        return True
    if not isinstance(e, E.BinaryOp) or e.op not in ("Add", "Sub", "Mul", "FloorDiv",
                                                     "FloorMod"):
        return False
    if e.op in ("FloorDiv", "FloorMod") and not isinstance(e.b, E.IntImm):
        return False
    if e.op == "Mul" and not (_constant(e.a, loops) or _constant(e.b, loops)):
        return False
    return quasi_affine(e.a, loops) and quasi_affine(e.b, loops)


def _constant(e, loops: set) -> bool:
    return not any(v.name in loops for v in E.free_vars(e))


def _unit_scale(e, loops: set) -> bool:
    """Some additive term over the loops has coefficient one (TVM's first split scale)."""
    scales = [s for s in _term_scales(e, loops) if s is not None]
    return not scales or min(abs(s) for s in scales) == 1


def _term_scales(e, loops: set) -> list:
    """The constant coefficient of each additive term of ``e`` that uses the loops (None:
    not a constant)."""
    if _constant(e, loops):
        return []
    if isinstance(e, E.BinaryOp) and e.op in ("Add", "Sub"):
        return _term_scales(e.a, loops) + _term_scales(e.b, loops)
    if isinstance(e, E.BinaryOp) and e.op == "Mul":
        coef, term = (e.a, e.b) if _constant(e.a, loops) else (e.b, e.a)
        inner = _term_scales(term, loops)
        c = E.as_int(coef)
        return [None if c is None or s is None else c * s for s in inner]
    return [1]  # a var, or a floor division / modulo of a sum (one fused iterator)


def _conjuncts(e) -> list:
    if isinstance(e, E.BinaryOp) and e.op == "And":
        return _conjuncts(e.a) + _conjuncts(e.b)
    return [e]


# ------------------------------------------------------------------------ stage pipeline

def check_stage_pipeline(func: PrimFunc, block_path: list, what: str) -> None:
    """Refuse when the scope of the block at the end of ``block_path`` is not a stage
    pipeline (TVM's ``GetScopeRoot(..., require_stage_pipeline=true)``)."""
    scope = next((s for s in reversed(block_path[:-1]) if isinstance(s, SBlock)), None)
    if scope is None:
        return
    war = any(kind == "WAR" for _, _, kind in scope_deps(child_blocks(scope.body)))
    if not war and (_symbolic(scope) or cached_flags(func, scope.name)[2]):
        return  # msc proves region cover over constant extents; symbolic ones are assumed
    raise NotStagePipelineError(f"{what}: The scope {scope.name!r} is not a stage pipeline.\n"
                                f"{_STAGE_PIPELINE}", key=scope.name)


def _symbolic(scope: SBlock) -> bool:
    """Whether a loop of the scope has a symbolic extent (``for i in range(n)``)."""
    stack = [scope.body]
    while stack:
        s = stack.pop()
        if isinstance(s, For) and E.as_int(s.extent) is None:
            return True
        stack.extend(kids(s))
    return False
