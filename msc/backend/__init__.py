"""llvmlite backend: a process-wide JIT, an on-disk kernel cache and native kernels.

Importing ``msc`` does not import this package (or llvmlite); the backend loads on first use.
"""

from .llvm.cache import KernelCache
from .llvm.jit import JIT, CodeLibrary, get_jit, host_target, vector_lanes

__all__ = ["JIT", "CodeLibrary", "KernelCache", "get_jit", "host_target", "vector_lanes"]
