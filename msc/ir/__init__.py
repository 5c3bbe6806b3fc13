"""``tvm.ir`` for msc: the module type, under the names TVM code imports it by.

    import msc as tvm
    from msc.ir.module import IRModule      # TVM: from tvm.ir.module import IRModule
    mod = tvm.IRModule({"mm_relu": func})   # TVM: tvm.IRModule(...)
"""

from ..relax.module import IRModule
from . import module

__all__ = ["IRModule", "assert_structural_equal", "module", "structural_equal",
           "structural_hash"]


def assert_structural_equal(lhs, rhs, map_free_vars: bool = False) -> None:
    """TVM's ``tvm.ir.assert_structural_equal``: ValueError with both texts when the two
    functions or modules differ (bound names compared by their order of first use)."""
    from ..testing import assert_structural_equal as check

    check(lhs, rhs, map_free_vars)


def structural_equal(lhs, rhs, map_free_vars: bool = False) -> bool:
    """TVM's ``tvm.ir.structural_equal``."""
    from ..testing import structural_text

    return structural_text(lhs) == structural_text(rhs)


def structural_hash(node, map_free_vars: bool = False) -> int:
    """TVM's ``structural_hash``: equal for structurally equal functions or modules."""
    from ..testing import structural_text

    return hash(structural_text(node))
