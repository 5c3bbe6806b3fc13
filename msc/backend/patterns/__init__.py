"""Build-time pattern passes: regions of a lowered program that run as one fused kernel call.

``relax.build`` (build.py) calls :func:`fuse_patterns` after folding constants and before
dead-code elimination, so the nodes a pattern makes unused (head reshapes and transposes, the
pieces of a decomposed attention) disappear. A fused node arrives resolved (its kernel made,
weights and masks read at build time) and is counted in ``ex.stats["fused"]`` by pattern and
in ``ex.stats["ops"]`` under its own name (``attention``, ...).

- attention.py: attention (SDPA or its decomposed export) with heads read through views;
- views.py: which values are strided views of others (numpy facts run on index arrays).
"""

from __future__ import annotations

from collections import Counter

from ..runtime.program import Program
from .attention import fuse_attention
from .views import Graph

__all__ = ["fuse_patterns"]


def fuse_patterns(program: Program) -> Counter:
    """Fuse every region of ``program``'s top level that a pattern matches; returns counts."""
    counts = Counter()
    for name, fuse in (("attention", fuse_attention),):
        found = fuse(Graph(program))
        if found:
            counts[name] += found
    return counts
