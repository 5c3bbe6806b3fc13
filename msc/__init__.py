"""msc: a pure-Python model-interchange toolkit built around one DAG graph (MSC-style).

    from msc import MSCGraph, MSCJoint, MSCTensor, errors
    graph = MSCGraph.from_json("msc/data/conv_relu.json")
    print(graph.inspect())
"""

from importlib import import_module

from . import errors

__version__ = "0.1.0"
__all__ = [
    "Generator",
    "IRModule",
    "MSCGraph",
    "MSCJoint",
    "MSCPrim",
    "MSCTensor",
    "__version__",
    "build",
    "compile",
    "cpu",
    "device",
    "errors",
    "generate",
    "get_global_func",
    "ir",
    "meta_schedule",
    "nd",
    "register_func",
    "relax",
    "te",
    "tir",
]

# The graph classes and subpackages load on first use so `import msc` stays cheap and
# `import msc.tir` does not pull in the graph or the IR.
_LAZY = {"MSCGraph": ".graph", "MSCJoint": ".graph", "MSCPrim": ".graph", "MSCTensor": ".graph",
         # TVM's top-level names, so code written for `import tvm` runs with `import msc as tvm`
         "IRModule": ".relax.module", "build": ".backend.runtime.library",
         "cpu": ".backend.runtime.arrays", "device": ".backend.runtime.arrays",
         "register_func": ".backend.runtime.packed", "get_global_func": ".backend.runtime.packed",
         "generate": ".generation", "Generator": ".generation", "compile": ".runtime"}
_SUBPACKAGES = {"relax", "tir", "graph", "script", "backend", "cli", "nd", "meta_schedule", "s_tir",
                "frontends", "codegen", "compression", "ir", "te", "runtime"}


def __getattr__(name):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name], __name__), name)
    if name in _SUBPACKAGES:
        return import_module(f".{name}", __name__)
    raise AttributeError(f"module 'msc' has no attribute {name!r}")
