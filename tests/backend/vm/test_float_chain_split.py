"""The float kernels that split through Python before (dense GEMMs, dense + activation, layer
norm, permutes) split across threads from inside the native chains (their split forms,
runtime/chain_split.py): with every split forced (``MSC_SPLIT=always``) each is a parallel step,
the outputs are the same bytes at 1 and 2 threads and match onnxruntime; on the host's ISA,
on AVX-512 without AMX and on AVX2 (``$MSC_CPU_ISA``, in child processes); a kernel failing
after such a step still raises RuntimeCallError."""

import collections
import os
import textwrap

import numpy as np
import pytest

from benchmarks.blocks import _Graph
from benchmarks.common import msc_executable, msc_runner, ort_session
from msc import relax
from msc.backend.runtime import split_cost
from msc.backend.runtime.threads import num_threads
from msc.errors import RuntimeCallError
from msc.relax import op as R
from tests.helpers.isa_child import capped_report
from tests.helpers.relax_modules import one_function_module

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
KINDS = ["DenseActKernel", "LayerNormKernel", "PermuteKernel", "_DenseKernel"]
TOL = {"rtol": 1e-4, "atol": 1e-4}  # float32 sums of under a hundred terms, in another order
SHAPE = (3, 26, 64)  # 78 rows: parts of unequal size


def block_model():
    """x @ W1 + b1 -> swish -> layer norm -> @ W2 + b2 -> transpose(1, 0, 2)."""
    g = _Graph(seed=3)

    def weight(*shape):
        return g.const((g.rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32))
    y = g.op("Add", [g.op("MatMul", ["x", weight(64, 96)]), weight(96)])
    y = g.op("Mul", [y, g.op("Sigmoid", [y])])
    y = g.op("LayerNormalization", [y, g.const(np.ones(96, np.float32)),
                                    g.const(np.zeros(96, np.float32))], axis=-1)
    y = g.op("Add", [g.op("MatMul", [y, weight(96, 64)]), weight(64)])
    model = g.model(list(SHAPE), g.op("Transpose", [y], perm=[1, 0, 2]))
    model.opset_import[0].version = 17
    return model


def split_kinds(plan) -> list:
    """The kernel classes of a plan's steps that split from inside the chain."""
    found = collections.Counter(type(i[4].step.kernel).__name__ for i in plan.instructions
                                if getattr(getattr(i[4], "step", None), "parallel", None))
    return sorted(found)


def outputs(model) -> dict:
    ex = msc_executable(model)
    x = np.random.default_rng(1).standard_normal(SHAPE, dtype=np.float32)
    return {"split": split_kinds(ex.plan("main", (), {})),
            "runs": [msc_runner(ex, threads)(x) for threads in (1, 2, 1, 2)],
            "ort": ort_session(model, 1)(x)}


@pytest.fixture
def forced(tmp_path, monkeypatch):
    monkeypatch.setenv("MSC_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(split_cost, "_costs", {})
    monkeypatch.setenv(split_cost.SPLIT_ENV, "always")


def test_forced_split_gives_the_same_bytes(forced):
    pytest.importorskip("onnxruntime")
    got = outputs(block_model())
    assert [k for k in got["split"] if k in KINDS] == KINDS
    for out in got["runs"]:
        np.testing.assert_allclose(out, got["ort"], **TOL)
        np.testing.assert_array_equal(out, got["runs"][0])


_CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    sys.path.insert(0, {root!r})
    from msc.backend.llvm.jit import host_target
    from tests.backend.vm.test_float_chain_split import block_model, outputs

    got = outputs(block_model())
    runs = got["runs"]
    print(json.dumps({{"features": host_target().features, "split": got["split"],
                      "same": all(bool(np.array_equal(r, runs[0])) for r in runs),
                      "err": float(np.abs(runs[1] - got["ort"]).max())}}))
""")


@pytest.mark.parametrize("isa", ["avx512", "avx2"])
def test_forced_split_on_a_capped_isa(tmp_path, monkeypatch, isa):
    pytest.importorskip("onnxruntime")
    from msc.backend.llvm.jit import host_target

    if isa == "avx512" and not host_target().has("avx512f"):
        pytest.skip("the host has no AVX-512 to keep")
    monkeypatch.setenv(split_cost.SPLIT_ENV, "always")
    report = capped_report(_CHILD.format(root=ROOT), isa, tmp_path, timeout=900)
    assert "+amx" not in report["features"]
    assert [k for k in report["split"] if k in KINDS] == KINDS
    assert report["same"] and report["err"] < 1e-3


def test_failing_kernel_after_a_split_dense_raises(forced):
    """dense (a parallel step) then take (a compiled TIR kernel that checks its indices) in
    one chain: an index out of range stops the chain and names the take."""
    rng = np.random.default_rng(2)
    w = rng.standard_normal((32, 48)).astype(np.float32)
    x = relax.Var("x", relax.TensorStructInfo((40, 32), "float32"))
    k = relax.Var("k", relax.TensorStructInfo((2,), "int64"))

    def body(bb, x, k):
        return R.take(bb.emit(R.matmul(x, relax.const(w))), k, axis=1)

    ex = relax.build(one_function_module([x, k], body))
    assert split_kinds(ex.plan("main", (), {})) == ["_DenseKernel"]
    vm = relax.VirtualMachine(ex, relax.cpu())["main"]
    xv = rng.standard_normal((40, 32)).astype(np.float32)
    with num_threads(2):
        good = vm(xv, np.array([5, 0], np.int64)).numpy()
        with pytest.raises(RuntimeCallError, match="out of range"):
            vm(xv, np.array([1, 99], np.int64))
    np.testing.assert_allclose(good, (xv @ w)[:, [5, 0]], rtol=1e-5, atol=1e-5)
