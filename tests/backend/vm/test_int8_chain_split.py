"""The int8 kernels split across threads from inside the native chains (kernels/int8/tasks.py's
split forms, runtime/chain_split.py): with every split forced (``MSC_SPLIT=always``) each int8
kind that has a split form is a parallel step of the plan, no step is left to Python, and the
outputs are the same bytes at 1 and 2 threads as with every kernel called from Python, and
within one quantization step of onnxruntime; on the host's ISA, on AVX-512 without AMX and on
AVX2 (``$MSC_CPU_ISA``, in child processes)."""

import collections
import os
import textwrap

import numpy as np
import pytest

from msc.backend.runtime import split_cost
from tests.helpers.isa_child import capped_report
from tests.helpers.qdq_chain_models import cnn_float_onnx, compare, quantized

pytest.importorskip("onnxruntime")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
# the kinds whose steps split in the chain at these shapes (batch 3: unequal parts)
CNN_SPLIT = ["QAdd", "QAvgPool", "QConcat", "QConv2d", "QDepthwise", "QLut", "QMaxPool"]
BLOCK_SPLIT = ["QBatchMatmul", "QDense", "QLayerNorm", "QLut", "QSoftmax"]
# onnxruntime may round a requantized value to a neighbouring code; in the attention block a
# neighbouring code before the softmax can move the layer norm's output by two
STEPS = {"cnn": 1.001, "block": 2.001}


@pytest.fixture
def forced(tmp_path, monkeypatch):
    """Every step that can split does; split costs in a fresh cache directory."""
    monkeypatch.setenv("MSC_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(split_cost, "_costs", {})
    monkeypatch.setenv(split_cost.SPLIT_ENV, "always")


def split_kinds(plan) -> dict:
    """Per int8 kernel kind of a plan: its steps that split from inside the chain."""
    found = collections.Counter()
    for instr in plan.instructions:
        step = getattr(instr[4], "step", None)
        kernel = getattr(step, "kernel", None)
        if type(kernel).__module__.startswith("msc.backend.kernels.int8") and step.parallel:
            found[type(kernel).__name__] += 1
    return dict(found)


def batched_block(batch: int = 3, seq: int = 64):
    """compression's qdq_block (attention + residual layer norm) on ``batch`` sequences."""
    from msc.compression.quantize.testing import qdq_block

    model = qdq_block(seq, 32)
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = batch
    return model


def _models():
    return {"cnn": (cnn_float_onnx(3), (3, 8, 12, 12), CNN_SPLIT),
            "block": (batched_block(), (3, 64, 32), BLOCK_SPLIT)}


@pytest.mark.parametrize("name", ["cnn", "block"])
def test_forced_split_gives_the_same_bytes(forced, name):
    model, shape, kinds = _models()[name]
    qdq, calib = quantized(model, shape)
    one, two = (compare(qdq, calib[0], threads) for threads in (1, 2))
    assert sorted(split_kinds(two["plan"])) == kinds
    if name == "cnn":  # the 3x3, the 1x1 and the 1x1 on 6x6 planes as one GEMM of pixel rows
        assert split_kinds(two["plan"])["QConv2d"] == 3
    assert two["python_calls"] == 0
    np.testing.assert_array_equal(two["chain"], one["chain"])
    np.testing.assert_array_equal(two["chain"], two["python"])
    np.testing.assert_allclose(two["chain"], two["ort"], rtol=0,
                               atol=STEPS[name] * two["scale"])


_CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    sys.path.insert(0, {root!r})
    from msc.backend.llvm.jit import host_target
    from tests.backend.vm.test_int8_chain_split import _models, split_kinds
    from tests.helpers.qdq_chain_models import compare, quantized

    report = {{"features": host_target().features, "runs": {{}}}}
    for name, (model, shape, _) in _models().items():
        qdq, calib = quantized(model, shape)
        one, two = (compare(qdq, calib[0], threads) for threads in (1, 2))
        report["runs"][name] = {{
            "split": sorted(split_kinds(two["plan"])), "python_calls": two["python_calls"],
            "same": bool(np.array_equal(one["chain"], two["chain"])
                         and np.array_equal(two["chain"], two["python"])),
            "steps": float(np.abs(two["chain"] - two["ort"]).max() / two["scale"])}}
    print(json.dumps(report))
""")


@pytest.mark.parametrize("isa", ["avx512", "avx2"])
def test_forced_split_on_a_capped_isa(tmp_path, monkeypatch, isa):
    from msc.backend.llvm.jit import host_target

    if isa == "avx512" and not host_target().has("avx512f"):
        pytest.skip("the host has no AVX-512 to keep")
    monkeypatch.setenv(split_cost.SPLIT_ENV, "always")
    report = capped_report(_CHILD.format(root=ROOT), isa, tmp_path, timeout=900)
    assert "+amx" not in report["features"]
    for name, (_, _, kinds) in _models().items():
        run = report["runs"][name]
        assert run["split"] == kinds and run["python_calls"] == 0 and run["same"], name
        assert run["steps"] <= STEPS[name], (name, run["steps"])
