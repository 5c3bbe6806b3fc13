"""Build-time pattern passes: regions of a lowered program that run as one fused kernel call.

``relax.build`` (build.py) calls :func:`fuse_patterns` after folding constants, with its
rewriter (fuse/rewrite.py): the nodes a pattern makes unused (head reshapes and transposes, the
pieces of a decomposed attention) are erased as it replaces them. A fused node arrives resolved (its kernel made,
weights and masks read at build time) and is counted in ``ex.stats["fused"]`` by pattern and
in ``ex.stats["ops"]`` under its own name (``attention``, ...).

- cache.py: KV cache appends (``index_copy`` into a parameter) written in place;
- attention.py: attention (SDPA or its decomposed export) with heads read through views;
- elementwise.py: chains of elementwise ops as one expression; residual add + layer norm;
- dense.py: matmul + bias + activation as one dense call with the activation as epilogue;
- pad_conv.py: a zero pad of H / W folded into the padding of the conv that reads it;
- views.py: which values are strided views of others (numpy facts run on index arrays).
"""

from __future__ import annotations

from collections import Counter

from ...runtime.program import Program
from ..rewrite import Rewriter
from .attention import fuse_attention
from .cache import write_caches_in_place
from .dense import fuse_dense_act
from .elementwise import fuse_elementwise, fuse_residual_norm
from .pad_conv import fold_pad_into_conv
from .views import Graph

__all__ = ["PASSES", "fuse_patterns"]

# (pattern name, pass), in order: KV caches first (a rewrite of their own calls only), then
# attention (it consumes scalings and mask adds that the elementwise pass would otherwise
# take), the residual norm, elementwise chains, then dense layers absorb the activation
# (single or chained) that follows them; a zero pad folds into the conv that reads it.
PASSES = (("kv_cache_in_place", write_caches_in_place), ("attention", fuse_attention),
          ("add+layer_norm", fuse_residual_norm), ("elementwise", fuse_elementwise),
          ("dense+act", fuse_dense_act), ("pad+conv", fold_pad_into_conv))


def fuse_patterns(program: Program, rewriter: Rewriter | None = None) -> Counter:
    """Fuse every region of ``program``'s top level that a pattern matches (through
    ``rewriter``, the build's, else a new one); returns counts."""
    counts = Counter()
    graph = Graph(program, rewriter)
    for name, fuse in PASSES:
        found = fuse(graph)
        if found:
            counts[name] += found
    return counts
