"""One-function Relax modules built with the BlockBuilder, for the VM tests."""

from msc import relax


def tensor(shape, dtype: str = "float32") -> relax.TensorStructInfo:
    return relax.TensorStructInfo(shape, dtype)


def one_function_module(params, body, name: str = "main"):
    """One-function module: ``body(bb, *params)`` emits the bindings and returns the output."""
    bb = relax.BlockBuilder()
    with bb.function(name, params):
        with bb.dataflow():
            out = bb.emit_output(body(bb, *params))
        bb.emit_func_output(out)
    return bb.get()
