"""llvmlite backend: ``relax.build`` (build.py) and the VirtualMachine (runtime/), in rooms that
import downwards only: dispatch/ -> kernels/ -> legalize/ -> tir/ -> runtime/ -> llvm/ (see
README.md). The JIT and its kernel cache are re-exported here.

Importing ``msc`` does not import this package (or llvmlite); the backend loads on first use.
"""

from .llvm.cache import KernelCache
from .llvm.jit import JIT, CodeLibrary, get_jit, host_target, vector_lanes

__all__ = ["JIT", "CodeLibrary", "KernelCache", "get_jit", "host_target", "vector_lanes"]
