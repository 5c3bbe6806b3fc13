"""TVMScript namespaces for writing msc Relax modules as Python source::

    from msc.script import ir as I, relax as R, tir as T

    @I.ir_module
    class Module:
        @R.function
        def main(x: R.Tensor((1, 784), dtype="float32")) -> R.Tensor((1, 784), dtype="float32"):
            with R.dataflow():
                gv = R.nn.relu(x)
                R.output(gv)
            return gv

The decorators read the source with ``inspect`` and parse it with ``ast``
(msc.relax.parser): function bodies are never run. ``Module`` is then an msc IRModule.
"""

from . import ir, relax, tir

__all__ = ["from_source", "ir", "ir_module", "relax", "tir"]

ir_module = ir.ir_module  # TVM: @tvm.script.ir_module


def from_source(text: str):
    """TVMScript text -> a PrimFunc (a lone ``@T.prim_func``) or an IRModule / Relax function
    (TVM's ``tvm.script.from_source``): ``from_source(func.script())`` round-trips."""
    import ast

    from ..relax.parser import from_script
    from ..tir.parser import parse_tir_text

    tree = ast.parse(text)
    if any(isinstance(n, ast.ClassDef) for n in tree.body) or "@R." in text:
        return from_script(text)
    funcs = parse_tir_text(text)
    if len(funcs) == 1:
        return next(iter(funcs.values()))
    from ..relax.module import IRModule

    return IRModule(funcs)
