"""Schedule methods of the primitives that reshape a producer's buffer around its tiles
(a mixin of :class:`Schedule`, kept apart so schedule.py stays a readable size):
``rolling_buffer``."""

from __future__ import annotations

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
