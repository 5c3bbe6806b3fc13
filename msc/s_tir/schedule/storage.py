"""Storage scopes TVM knows (``runtime::StorageScope``): where a buffer lives."""

from __future__ import annotations

from ...errors import ScheduleError

__all__ = ["STORAGE_RANKS", "check_scope"]

# TVM's storage ranks (runtime::StorageScope); a scope is a rank or ``rank.tag``.
STORAGE_RANKS = ("global", "shared", "warp", "local", "wmma", "metal", "texture")
_TAGGED = {"shared.dyn", "wmma.matrix_a", "wmma.matrix_b", "wmma.accumulator",
           "metal.simdgroup"}


def check_scope(scope: str, what: str) -> str:
    rank = str(scope).partition(".")[0]
    if rank not in STORAGE_RANKS or (rank in ("wmma", "metal") and scope not in _TAGGED):
        raise ScheduleError(f"{what}: {scope!r} is not a storage scope",
                            hint=f"use one of {', '.join(STORAGE_RANKS)} (or rank.tag: "
                                 "shared.dyn, wmma.accumulator, ...)")
    return str(scope)
