"""The one way consumer facts reach the op table: each kind names the modules that attach it.

A consumer fact (the backend's kernel, a torch codegen row, a numpy reference...) is attached
by its own module when that module is imported. Nothing relies on which module happened to be
imported first: a reader of a kind loads it first, and the load is explicit::

    load_facts("numpy")                  # imports msc.relax.op.numpy_ref (once)
    OPS["nn.relu"].facts["numpy"]        # now attached
    load_all_facts()                     # every kind (the completeness test does this)

The modules are named by string and imported on demand, so msc/ has no static import of
frontends/ or codegen/ (which import msc).
"""

from __future__ import annotations

import importlib

from ...errors import ValidationError

__all__ = ["FACT_SOURCES", "load_all_facts", "load_facts"]

# fact kind -> the modules whose import attaches it (each attaches at import, idempotently).
FACT_SOURCES: dict[str, tuple[str, ...]] = {
    "numpy": ("msc.relax.op.numpy_ref",),
    "kernel": tuple(f"msc.backend.kernels.{m}" for m in (
        "activation", "attention", "conv", "conv1d", "dense", "elementwise", "layout", "nbits",
        "nonzero", "norm", "pool", "reduce_rows", "unique")),
    "legalize": ("msc.backend.legalize",),
    "int8": ("msc.backend.fuse.qdq.fold",),
    "torch": ("msc.codegen.torch.table",),
    "onnx_codegen": ("msc.codegen.onnx.table",),
    "layout": ("msc.frontends.relax.layout_rules",),
    "prune": ("msc.compression.prune.rules",),
}


def load_facts(kind: str) -> None:
    """Attach every fact of ``kind`` to the op table (imports its modules once)."""
    if kind in _LOADED:
        return  # called once per op call by some readers: skip importlib's lookups
    if kind not in FACT_SOURCES:
        raise ValidationError(f"unknown fact kind {kind!r}", key=kind,
                              hint=f"the kinds are {', '.join(FACT_SOURCES)}")
    for module in FACT_SOURCES[kind]:
        importlib.import_module(module)
    _LOADED.add(kind)


_LOADED: set = set()  # kinds whose modules have all been imported


def load_all_facts() -> None:
    """Attach the facts of every kind."""
    for kind in FACT_SOURCES:
        load_facts(kind)
