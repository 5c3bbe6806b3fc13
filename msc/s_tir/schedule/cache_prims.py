"""Schedule methods of the primitives that give a block's buffers a new layout or size (a
mixin of :class:`Schedule`, kept apart so schedule.py stays a readable size):
``reindex_cache_read``, ``reindex_cache_write``, ``pad_einsum``, ``cache_index``."""

from __future__ import annotations

from . import cache_index as CI
from . import pad_einsum as PE
from . import reindex_cache as RC

__all__ = ["CacheMixin"]


class CacheMixin:
    """Mixed into Schedule: uses its RV table, ``_apply`` and ``_record``."""

    def reindex_cache_read(self, block, read_buffer_index: int, storage_scope: str,
                           index_map):
        """Read buffer ``read_buffer_index`` of ``block`` (accessed at one point) through a
        cache in ``storage_scope`` laid out by ``index_map`` of the block's iter vars; returns
        the copy block. See :mod:`msc.s_tir.schedule.reindex_cache`."""
        return self._reindex_cache("reindex_cache_read", RC.reindex_cache_read,
                                   "ReindexCacheRead", block, read_buffer_index,
                                   storage_scope, index_map)

    def reindex_cache_write(self, block, write_buffer_index: int, storage_scope: str,
                            index_map):
        """Write buffer ``write_buffer_index`` of ``block`` into a cache laid out by
        ``index_map``, copied back at the cache location; returns the copy block."""
        return self._reindex_cache("reindex_cache_write", RC.reindex_cache_write,
                                   "ReindexCacheWrite", block, write_buffer_index,
                                   storage_scope, index_map)

    def _reindex_cache(self, what, fn, kind, block, index, scope, index_map):
        block = self._as_block(block)
        func_name, name = self._block(block)
        func, new, text = self._apply(what, fn, self._funcs[func_name], name, int(index),
                                      str(scope), index_map)
        self._funcs[func_name] = func
        rv = self._new(type(self)._BLOCK_RV, "block", (func_name, new))
        self._record(kind, [block], [int(index), str(scope), text], [rv])
        return rv

    def pad_einsum(self, block, padding: list) -> None:
        """Round the block's iteration domain up to multiples of ``padding`` (one int per iter
        var) over zero-padded copies of the buffers those iter vars index; see
        :mod:`msc.s_tir.schedule.pad_einsum`."""
        block = self._as_block(block)
        func_name, name = self._block(block)
        values = [int(p) for p in padding]
        self._funcs[func_name] = self._apply("pad_einsum", PE.pad_einsum,
                                             self._funcs[func_name], name, values)
        self._record("PadEinsum", [block], [values], [])

    def cache_index(self, block, storage_scope: str, cse_thresh: int = 0) -> list:
        """Precompute the block's index arithmetic into int buffers (one ``index_<k>`` block
        each, before it); returns those blocks. See :mod:`msc.s_tir.schedule.cache_index`."""
        block = self._as_block(block)
        func_name, name = self._block(block)
        func, names = self._apply("cache_index", CI.cache_index, self._funcs[func_name], name,
                                  str(storage_scope), int(cse_thresh))
        self._funcs[func_name] = func
        rvs = [self._new(type(self)._BLOCK_RV, "block", (func_name, n)) for n in names]
        self._record("CacheIndex", [block], [str(storage_scope), int(cse_thresh)], rvs)
        return rvs
