"""The Schedule's dependency queries and annotations (a mixin of :class:`Schedule`, kept
apart so schedule.py stays a readable size): ``get_producers`` / ``get_consumers`` /
``get_output_blocks`` return block RVs and are recorded in the trace as TVM records them;
``annotate`` / ``unannotate`` set TVM's free-form attributes of a loop or block."""

from __future__ import annotations

from ...errors import ScheduleError
from . import access as AC
from . import deps as D
from . import loops as L
from .blocks import find_block
from .state import ScheduleState, StmtSRef
from .tree import child_blocks

__all__ = ["QueryMixin", "StmtSRef"]


class QueryMixin:
    """Mixed into Schedule: uses its RV table, ``_apply`` and ``_record``."""

    @property
    def state(self) -> ScheduleState:
        """TVM's ``sch.state``: the functions and the stable handles to their blocks and
        loops (one state per schedule; a copy gets its own)."""
        state = getattr(self, "_state_cache", None)
        if state is None or state[0] is not self:
            state = self._state_cache = (self, ScheduleState(funcs=lambda: self._funcs))
        return state[1]

    def get_sref(self, rv) -> StmtSRef:
        """The handle (``StmtSRef``) of the block or loop an RV stands for; the same object
        each time, and ``.stmt`` follows the primitives."""
        kind, (func_name, ref) = self._lookup(self._target_rv(rv))
        if kind == "block":
            return self.state.block_sref(func_name, ref)
        if kind == "loop":
            return self.state.loop_sref(func_name, ref)
        raise ScheduleError(f"get_sref takes a block or a loop, got a {kind}")

    def remove_rv(self, rv) -> None:
        """Forget ``rv``: later uses raise IndexError (TVM's ``remove_rv``)."""
        self._lookup(rv)
        del self._rvs[rv.key]

    def get_child_blocks(self, block_or_loop) -> list:
        """The blocks right under a block or loop (nested blocks not included), in order."""
        rv = self._target_rv(block_or_loop)
        kind, (func_name, _) = self._lookup(rv)
        if kind not in ("block", "loop"):
            raise ScheduleError(f"get_child_blocks takes a block or a loop, got a {kind}")
        node = self.get(rv)
        blocks = child_blocks(node.body)
        rvs = [self._new(type(self)._BLOCK_RV, "block", (func_name, b.name)) for b in blocks]
        self._record("GetChildBlocks", [rv], [], rvs)
        return rvs

    def get_producers(self, block) -> list:
        """The blocks of ``block``'s scope that write, before it, what it reads."""
        return self._related("get_producers", D.producers, "GetProducers", block)

    def get_consumers(self, block) -> list:
        """The blocks of ``block``'s scope that read, after it, what it writes."""
        return self._related("get_consumers", D.consumers, "GetConsumers", block)

    def get_output_blocks(self, scope_block) -> list:
        """The blocks under ``scope_block`` ("root" for the function's) that write a
        buffer allocated outside it."""
        if isinstance(scope_block, str) and scope_block == "root":
            func_name = self.func_working_on
            names = self._apply("get_output_blocks", D.output_blocks,
                                self._func(func_name), "root")
            rvs = [self._new(type(self)._BLOCK_RV, "block", (func_name, n)) for n in names]
            self._record("GetOutputBlocks", [], ["root"], rvs)
            return rvs
        return self._related("get_output_blocks", D.output_blocks, "GetOutputBlocks",
                             scope_block)

    def _related(self, what, fn, kind, block) -> list:
        block = self._as_block(block)
        func_name, name = self._block(block)
        names = self._apply(what, fn, self._funcs[func_name], name)
        rvs = [self._new(type(self)._BLOCK_RV, "block", (func_name, n)) for n in names]
        self._record(kind, [block], [], rvs)
        return rvs

    def add_unit_loop(self, block_or_loop):
        """A loop of extent 1 right above a block or loop (TVM's ``add_unit_loop``)."""
        rv = self._target_rv(block_or_loop)
        kind, (func_name, ref) = self._lookup(rv)
        func = self._funcs[func_name]
        if kind == "block":
            path = self._apply("add_unit_loop", find_block, func, ref, "add_unit_loop")
        elif kind == "loop":
            path = self._apply("add_unit_loop", L.find_loop, func, ref, "add_unit_loop")
        else:
            raise ScheduleError(f"add_unit_loop takes a block or a loop, got a {kind}")
        func, var = self._apply("add_unit_loop", L.add_unit_loop, func, path)
        self._funcs[func_name] = func
        loop = self._new(type(self)._LOOP_RV, "loop", (func_name, var))
        self._record("AddUnitLoop", [rv], [], [loop])
        return loop

    def annotate_buffer_access(self, block, buffer_index: int, buf_type: str,
                               gen_new_ranges) -> None:
        """State the region ``block`` reads (``buf_type="read"``) or writes of buffer
        ``buffer_index``: ``gen_new_ranges`` maps the iter vars to a (start, stop) pair or an
        index per dim; marked ``explicit_read_region`` / ``explicit_write_region``."""
        block = self._as_block(block)
        func_name, name = self._block(block)
        func, text = self._apply("annotate_buffer_access", AC.annotate_buffer_access,
                                 self._funcs[func_name], name, int(buffer_index),
                                 str(buf_type), gen_new_ranges)
        self._funcs[func_name] = func
        self._record("AnnotateBufferAccess", [block], [int(buffer_index), str(buf_type), text],
                     [])

    def annotate(self, block_or_loop, ann_key: str, ann_val) -> None:
        """Set annotation ``ann_key`` of a loop or block to ``ann_val``."""
        self._annotate("annotate", block_or_loop, str(ann_key), ann_val, False)
        self._record("Annotate", [self._target_rv(block_or_loop), ann_val], [str(ann_key)],
                     [])  # TVM's form: the value is an input (it may be a sampled ExprRV)

    def unannotate(self, block_or_loop, ann_key: str) -> None:
        """Remove annotation ``ann_key`` of a loop or block."""
        self._annotate("unannotate", block_or_loop, str(ann_key), None, True)
        self._record("Unannotate", [self._target_rv(block_or_loop)], [str(ann_key)], [])

    def _target_rv(self, rv):
        return self._as_block(rv) if isinstance(rv, str) else rv

    def _annotate(self, what, rv, key, value, remove) -> None:
        rv = self._target_rv(rv)
        kind, payload = self._lookup(rv)
        if kind not in ("block", "loop"):
            raise ScheduleError(f"{what} takes a block or a loop, got a {kind}")
        func_name, ref = payload
        self._funcs[func_name] = self._apply(what, D.annotate, self._funcs[func_name],
                                             (kind, ref), key, value, remove)
