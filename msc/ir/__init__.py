"""``tvm.ir`` for msc: the module type, under the names TVM code imports it by.

    import msc as tvm
    from msc.ir.module import IRModule      # TVM: from tvm.ir.module import IRModule
    mod = tvm.IRModule({"mm_relu": func})   # TVM: tvm.IRModule(...)
"""

from ..relax.module import IRModule
from . import module

__all__ = ["IRModule", "module"]
