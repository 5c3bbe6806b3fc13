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


# A relu of one input, as TVMScript text: a Relax graph with no source spans or model scopes.
RELU_SCRIPT = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), dtype="float32")) -> R.Tensor((2, 3), dtype="float32"):
        with R.dataflow():
            y = R.nn.relu(x)
            R.output(y)
        return y
'''
