"""The ``I`` namespace: ``@I.ir_module`` turns a class of ``@R.function`` / ``@T.prim_func``
functions into an msc IRModule (parsed from the class's source, never executed)::

    @I.ir_module
    class Module:
        @R.function
        def main(x: R.Tensor((2,), dtype="float32")) -> R.Tensor((2,), dtype="float32"):
            return x
"""

from __future__ import annotations

import inspect

__all__ = ["ir_module", "module_attrs"]


def ir_module(cls=None, **_kwargs):
    """``@I.ir_module`` / ``@I.ir_module(check_well_formed=...)`` -> IRModule."""
    if cls is None:
        return ir_module
    from ..relax.parser import parse_object

    frame = inspect.currentframe().f_back
    return parse_object(cls, dict(frame.f_locals) if frame is not None else None)


def module_attrs(attrs: dict) -> dict:
    """``I.module_attrs({...})`` inside a module class (read by the parser)."""
    return attrs
