"""Schedule methods of the primitives that reshape a producer's buffer around its tiles
(a mixin of :class:`Schedule`, kept apart so schedule.py stays a readable size):
``rolling_buffer``, ``decompose_padding``."""

from __future__ import annotations

from ...errors import ScheduleError
from . import padding as PD
from . import rolling as RB

__all__ = ["WindowMixin"]


class WindowMixin:
    """Mixed into Schedule: uses its RV table, ``_apply`` and ``_record``."""

    def rolling_buffer(self, block, write_buffer_index: int) -> None:
        """Keep only the window of the buffer ``block`` writes (index among its writes)
        that one tile of the loop it shares with its consumers needs, indexed modulo the
        window; see :mod:`msc.s_tir.schedule.rolling`."""
        block = self._as_block(block)
        func_name, name = self._block(block)
        self._funcs[func_name] = self._apply("rolling_buffer", RB.rolling_buffer,
                                             self._funcs[func_name], name,
                                             int(write_buffer_index))
        self._record("RollingBuffer", [block], [int(write_buffer_index)], [])

    def decompose_padding(self, block, loop):
        """Fill the buffer ``block`` pads with the pad value right before ``loop`` (a new
        block ``<name>_pad_const``, returned) and let ``block`` write only the in-bound part;
        see :mod:`msc.s_tir.schedule.padding`."""
        block = self._as_block(block)
        func_name, name = self._block(block)
        loop_func, var = self._loop(loop)
        if loop_func != func_name:
            raise ScheduleError("decompose_padding: the block and the loop are in different "
                                "functions")
        func, new = self._apply("decompose_padding", PD.decompose_padding,
                                self._funcs[func_name], name, var)
        self._funcs[func_name] = func
        rv = self._new(type(self)._BLOCK_RV, "block", (func_name, new))
        self._record("DecomposePadding", [block, loop], [], [rv])
        return rv

    def can_decompose_padding(self, block, loop) -> bool:
        """Whether :meth:`decompose_padding` applies (the schedule does not change)."""
        block = self._as_block(block)
        func_name, name = self._block(block)
        _, var = self._loop(loop)
        try:
            PD.decompose_padding(self._funcs[func_name], name, var)
        except ScheduleError:
            return False
        return True
