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

__all__ = ["ir", "ir_module", "relax", "tir"]

ir_module = ir.ir_module  # TVM: @tvm.script.ir_module
