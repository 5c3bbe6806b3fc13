"""Relax op builders with TVM's signatures: ``relax.op.add(a, b)``, ``relax.op.nn.conv2d(...)``.

The records live in ``registry.OPS``; each ``defs_*`` module declares one family of ops.
"""

from . import (  # noqa: F401  (each module registers its ops)
    defs_create,
    defs_elementwise,
    defs_image,
    defs_index,
    defs_linalg,
    defs_manipulate,
    defs_msc,
    defs_nn,
    defs_quant,
    defs_reduce,
    defs_special,
)
from .defs_manipulate import OP_ALIASES
from .facts import load_all_facts, load_facts
from .registry import (
    OPS,
    REQUIRED,
    Arg,
    AttrDef,
    Op,
    attach,
    get_op,
    install,
    make_call,
    ops_having,
    ops_in,
    ops_with,
)

install(globals())

# The namespaces read OPS, so they load last.
from . import image, nn, vision

__all__ = ["OPS", "OP_ALIASES", "REQUIRED", "Arg", "AttrDef", "Op", "attach", "get_op",
           "image", "install", "load_all_facts", "load_facts", "make_call", "nn", "ops_having",
           "ops_in", "ops_with", "vision"]
