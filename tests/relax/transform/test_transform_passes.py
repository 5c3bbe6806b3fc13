"""Pass infrastructure: TVM's call style, Sequential, PassContext, module_pass."""

import numpy as np
import pytest

from msc import relax
from msc.errors import ValidationError
from msc.relax import op
from msc.relax.transform import (
    DeadCodeElimination,
    FoldConstant,
    FunctionPass,
    ModulePass,
    PassContext,
    Sequential,
    module_pass,
)


def _module():
    x = relax.Var("x", relax.TensorStructInfo((2,), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            c = bb.emit(op.exp(relax.const(np.zeros(2, "float32"))))
            gv = bb.emit_output(op.add(x, c))
        bb.emit_func_output(gv)
    return bb.get()


def _ops(mod):
    return [b.value.op.name for blk in mod["main"].body.blocks for b in blk.bindings]


def test_tvm_call_style_from_the_package():
    mod = relax.transform.FoldConstant()(_module())
    assert _ops(mod) == ["relax.add"]


def test_sequential_runs_in_order_and_honours_opt_level():
    log = []

    @module_pass(opt_level=3, name="Expensive")
    def expensive(mod, ctx):
        log.append("expensive")
        return mod

    seq = Sequential([FoldConstant(), expensive, DeadCodeElimination()], name="pipeline")
    assert seq.name == "pipeline"
    seq(_module())
    assert log == []  # default opt_level 2
    with PassContext(opt_level=3):
        assert PassContext.current().opt_level == 3
        seq(_module())
    assert log == ["expensive"]
    with PassContext(opt_level=0, required_pass=["Expensive"]):
        seq(_module())
    assert log == ["expensive", "expensive"]


def test_disabled_passes_do_not_run():
    with PassContext(disabled_pass=["FoldConstant"]):
        mod = Sequential([FoldConstant()])(_module())
    assert _ops(mod) == ["relax.exp", "relax.add"]


def test_pass_context_nests():
    with PassContext(opt_level=1):
        with PassContext(opt_level=3):
            assert PassContext.current().opt_level == 3
        assert PassContext.current().opt_level == 1
    assert PassContext.current().opt_level == 2


def test_subclassing_module_and_function_passes():
    class Rename(ModulePass):
        def transform_module(self, mod, ctx):
            return relax.IRModule({"forward": mod["main"]})

    class DropAttrs(FunctionPass):
        def transform_function(self, func, mod, ctx):
            return relax.Function(func.params, func.body, func.ret_struct_info, func.is_pure)

    mod = Sequential([DropAttrs(), Rename()])(_module())
    assert [gv.name_hint for gv in mod.get_global_vars()] == ["forward"]
    assert mod["forward"].attrs == {}
    assert repr(Rename()) == "Rename(opt_level=0)"


def test_passes_need_a_module():
    with pytest.raises(ValidationError, match="FoldConstant runs on an IRModule"):
        FoldConstant()(_module()["main"])
