"""``R.call_dps_packed("linear0", ...)`` reaches the module's own prim func ``linear0`` (TVM's
library exports prim funcs by name); a registered packed function of that name wins."""

import numpy as np
import pytest

from msc import relax
from msc.backend.runtime import packed
from msc.errors import RuntimeCallError

TEXT = '''
@I.ir_module
class Module:
    @T.prim_func
    def linear0(X: T.Buffer((1, 8), "float32"), W: T.Buffer((4, 8), "float32"),
                B: T.Buffer((4,), "float32"), Z: T.Buffer((1, 4), "float32")):
        T.func_attr({"global_symbol": "linear0", "tir.noalias": True})
        Y = T.alloc_buffer((1, 4), "float32")
        for i, j, k in T.grid(1, 4, 8):
            with T.block("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + X[vi, vk] * W[vj, vk]
        for i, j in T.grid(1, 4):
            with T.block("Z"):
                vi, vj = T.axis.remap("SS", [i, j])
                Z[vi, vj] = Y[vi, vj] + B[vj]

    @R.function
    def main(x: R.Tensor((1, 8), "float32"), w: R.Tensor((4, 8), "float32"),
             b: R.Tensor((4,), "float32")):
        with R.dataflow():
            lv = R.call_dps_packed("NAME", (x, w, b), R.Tensor((1, 4), dtype="float32"))
            R.output(lv)
        return lv
'''


@pytest.fixture
def args():
    rng = np.random.default_rng(0)
    return (rng.random((1, 8), "float32"), rng.random((4, 8), "float32"),
            rng.random(4).astype("float32"))


def _vm(name):
    mod = relax.from_script(TEXT.replace("NAME", name))
    return relax.VirtualMachine(relax.build(mod), relax.cpu())


def test_dps_packed_resolves_to_module_prim_func(args):
    x, w, b = args
    out = _vm("linear0")["main"](x, w, b).numpy()
    np.testing.assert_allclose(out, x @ w.T + b, rtol=1e-5)


def test_registered_function_of_the_same_name_wins(args):
    vm = _vm("linear0")

    def fake(x, w, b, out):
        out[:] = 7.0

    relax.register_func("linear0", fake, override=True)
    try:
        assert (vm["main"](*args).numpy() == 7.0).all()
    finally:
        packed.remove_global_func("linear0")
    x, w, b = args  # removed again: the module's prim func runs
    np.testing.assert_allclose(vm["main"](*args).numpy(), x @ w.T + b, rtol=1e-5)


def test_unknown_name_still_names_the_missing_function():
    with pytest.raises(RuntimeCallError, match="linear9"):
        _vm("linear9")
