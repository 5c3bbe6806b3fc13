"""A numpy-computed view feeding a native kernel: the kernel reads plain row-major memory, so
the VM hands it a C-contiguous array (wav2vec2's conv positional embedding drops its last
frame with a strided_slice right before a GELU)."""

import numpy as np

from msc import relax
from msc.script import ir as I
from msc.script import relax as R


@I.ir_module
class SliceThenGelu:
    @R.function
    def main(x: R.Tensor((1, 32, 40), dtype="float32")):
        with R.dataflow():
            lv = R.strided_slice(x, (2,), (0,), (-1,), (1,), assume_inbound=False)
            gv = R.nn.gelu(lv)
            R.output(gv)
        return gv


def test_strided_slice_view_into_gelu_kernel():
    x = np.random.default_rng(0).standard_normal((1, 32, 40)).astype(np.float32)
    vm = relax.VirtualMachine(relax.build(SliceThenGelu, target="llvm"), relax.cpu())
    got = vm["main"](x).numpy()
    v = x[:, :, :-1].astype(np.float64)
    want = 0.5 * v * (1 + np.vectorize(__import__("math").erf)(v / np.sqrt(2)))
    assert got.shape == (1, 32, 39) and got.flags.c_contiguous
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
