"""Hand-written native kernels built with llvmlite.ir, one module per kernel family.

Modules are not shadowed by their functions: ``kernels.gemm`` is the module, and the one-shot
function is ``kernels.gemm.gemm``.
"""

from .gemm import Gemm, GemmConfig, PackedB, build_gemm_module, pack_b

__all__ = ["Gemm", "GemmConfig", "PackedB", "build_gemm_module", "pack_b"]
