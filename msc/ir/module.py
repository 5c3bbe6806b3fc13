"""``tvm.ir.module``: where TVM's lessons import ``IRModule`` from."""

from ..relax.module import IRModule

__all__ = ["IRModule"]
