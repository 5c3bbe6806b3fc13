"""The int8 kernels of folded QDQ programs are native chain steps (kernels/int8/tasks.py's
ChainSteps): a QDQ model's plan calls no kernel from Python, its outputs are bit for bit the
outputs of the same plan with every kernel called from Python, and within one quantization
step of onnxruntime's on the same QDQ file (small-plane 1x1 convs at batch > 1 as one GEMM of
pixel rows, an explicit zero pad taken into the next conv's padding); on the host's ISA, on AVX-512 without AMX and on
AVX2 (``$MSC_CPU_ISA``, in child processes). Shapes are checked once, when the plan is made;
errors still reach the caller as before."""

import os
import textwrap

import numpy as np
import pytest

from msc import relax
from msc.backend.llvm.jit import HostTarget, capped_target
from msc.backend.runtime.threads import num_threads
from msc.errors import RuntimeCallError, ShapeError
from tests.helpers.isa_child import capped_report
from tests.helpers.qdq_chain_models import (
    block_model,
    cnn_float_onnx,
    compare,
    quantized,
    rows_float_onnx,
)

pytest.importorskip("onnxruntime")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
CNN_KINDS = ["QAdd", "QAvgPool", "QConcat", "QConv2d", "QDense", "QDepthwise", "QLut",
             "QMaxPool"]
BLOCK_KINDS = ["QBatchMatmul", "QDense", "QLayerNorm", "QLut", "QSlice", "QSoftmax"]
ROWS_KINDS = ["QConcat", "QDense", "QLut", "QSlice"]  # channel-last tables, runs of 288 rows
# msc and onnxruntime may round a requantized value to neighbouring codes; a code is one step
# of the output's scale (the 1e-3: float32 rounding of the dequantized values)
STEPS = 1.001


def _models():
    return {"cnn_b1": (cnn_float_onnx(1), (1, 8, 12, 12), CNN_KINDS),
            "cnn_b2": (cnn_float_onnx(2), (2, 8, 12, 12), CNN_KINDS),
            "block": (block_model(), (1, 16, 32), BLOCK_KINDS),
            "rows": (rows_float_onnx(24), (24, 12, 16), ROWS_KINDS)}


@pytest.fixture(scope="module")
def qdq_models():
    return {name: (*quantized(model, shape), kinds)
            for name, (model, shape, kinds) in _models().items()}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", ["cnn_b1", "cnn_b2", "block", "rows"])
def test_int8_kernels_run_in_the_chain_as_from_python(qdq_models, name, threads):
    qdq, calib, kinds = qdq_models[name]
    got = compare(qdq, calib[0], threads)
    assert got["kinds"] == kinds  # every kind a chain step of the plan
    assert got["python_calls"] == 0
    if name.startswith("cnn"):  # the explicit pad went into the depthwise conv's padding
        assert got["fused"]["qdq:nn.pad into a conv"] == 1
    np.testing.assert_array_equal(got["chain"], got["python"])
    np.testing.assert_allclose(got["chain"], got["ort"], rtol=0, atol=STEPS * got["scale"])


def test_avx512_cap_keeps_vnni_and_drops_amx():
    spr = HostTarget("x86_64-unknown-linux-gnu", "sapphirerapids",
                     "+avx2,+avx512f,+avx512bw,+avx512vnni,+amx-int8,+amx-tile,+evex512,"
                     "+avx10.1-512")
    capped = capped_target(spr, "avx512")
    assert capped.cpu == "x86-64-v4" and capped.has("avx512vnni") and capped.has("evex512")
    assert not capped.has("amx-int8") and not capped.has("amx-tile")
    assert not capped.has("avx10.1-512")


# A child process: host_target() is read once per process; a fresh kernel cache makes every
# kernel compile for the capped ISA.
_CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    sys.path.insert(0, {root!r})
    from msc.backend.kernels.int8.gemm import host_vnni
    from msc.backend.llvm.jit import host_target
    from tests.helpers.qdq_chain_models import (block_model, cnn_float_onnx, compare,
                                                quantized, rows_float_onnx)

    report = {{"vnni": host_vnni(), "features": host_target().features, "runs": {{}}}}
    for name, model, shape in (("cnn_b2", cnn_float_onnx(2), (2, 8, 12, 12)),
                               ("block", block_model(), (1, 16, 32)),
                               ("rows", rows_float_onnx(24), (24, 12, 16))):
        qdq, calib = quantized(model, shape)
        for threads in (1, 2):
            got = compare(qdq, calib[0], threads)
            report["runs"][f"{{name}}/{{threads}}"] = {{
                "kinds": got["kinds"], "python_calls": got["python_calls"],
                "same": bool(np.array_equal(got["chain"], got["python"])),
                "steps": float(np.abs(got["chain"] - got["ort"]).max() / got["scale"])}}
    print(json.dumps(report))
""")


@pytest.mark.parametrize("isa", ["avx512", "avx2"])
def test_int8_chains_on_a_capped_isa(tmp_path, isa):
    from msc.backend.llvm.jit import host_target

    if isa == "avx512" and not host_target().has("avx512f"):
        pytest.skip("the host has no AVX-512 to keep")
    report = capped_report(_CHILD.format(root=ROOT), isa, tmp_path, timeout=900)
    assert "+amx" not in report["features"]
    assert report["vnni"] == (isa == "avx512" and "+avx512vnni" in host_target().features)
    for key, run in report["runs"].items():
        model = key.split("/")[0].split("_")[0]
        kinds = {"cnn": CNN_KINDS, "block": BLOCK_KINDS, "rows": ROWS_KINDS}[model]
        assert run["kinds"] == kinds, key
        assert run["python_calls"] == 0 and run["same"], key
        assert run["steps"] <= STEPS, (key, run["steps"])


def _executable(qdq):
    from msc.codegen import to_relax
    from msc.frontends.translate import from_onnx

    return relax.build(to_relax(*from_onnx(qdq)))


def test_bad_input_shape_is_refused_before_native_code(qdq_models):
    qdq = qdq_models["cnn_b1"][0]
    f = relax.VirtualMachine(_executable(qdq))["main"]
    with pytest.raises(ShapeError, match="'x'"):
        f(np.zeros((1, 4, 12, 12), np.float32))


def test_every_kind_refuses_shapes_it_was_not_planned_for(qdq_models):
    """Each int8 kernel of the plans checks its buffers when the plan is made: another shape
    gets no chain step (None), and the kernel called with it raises ShapeError naming its
    op."""
    seen = set()
    for name in ("cnn_b1", "block", "rows"):
        qdq, calib, _ = qdq_models[name]
        f = relax.VirtualMachine(_executable(qdq))["main"]
        f(calib[0])
        for instr in f.entry({}).plan.instructions:
            step = getattr(instr[4], "step", None)
            kernel = getattr(step, "kernel", None)
            if kind := _int8_kind(kernel):
                _refuses(kernel, step.specs)
                seen.add(kind)
    assert seen == set(CNN_KINDS + BLOCK_KINDS)


def _int8_kind(kernel) -> str | None:
    module = type(kernel).__module__
    return type(kernel).__name__ if module.startswith("msc.backend.kernels.int8") else None


def _refuses(kernel, specs) -> None:
    buffers = [(s.shape, s.dtype) for s in specs]
    assert kernel.native_signature(buffers) is not None
    first = buffers[0][0]
    bad = (first[0] + 1, *first[1:])  # one more row / image / batch
    wrong = [(bad, buffers[0][1])] + buffers[1:]
    assert kernel.native_signature(wrong) is None, type(kernel).__name__
    arrays = [np.zeros(s, d) for s, d in wrong]
    with pytest.raises(ShapeError) as info:
        kernel(*arrays)
    assert info.value.context["op"] == kernel.op and kernel.op in str(info.value)


def test_failing_step_after_int8_steps_reaches_the_caller(qdq_models):
    """An out-of-range index in a compiled kernel in the same chain as the int8 steps: the
    chain's status reaches the caller as RuntimeCallError naming the op."""
    import onnx
    from onnx import TensorProto, helper

    qdq, calib, _ = qdq_models["cnn_b1"]
    model = onnx.ModelProto()
    model.CopyFrom(qdq)
    graph = model.graph
    out = graph.output[0].name
    graph.node.append(helper.make_node("Gather", [out, "idx"], ["picked"], axis=1))
    graph.input.append(helper.make_tensor_value_info("idx", TensorProto.INT64, [2]))
    del graph.output[:]
    graph.output.append(helper.make_tensor_value_info("picked", TensorProto.FLOAT, None))
    ex = _executable(model)
    f = relax.VirtualMachine(ex)["main"]
    with num_threads(1):
        good = f(calib[0], np.array([0, 3], np.int64)).numpy()
        plan = f.entry({}).plan
        assert plan.stats["chains"] == 1
        full = compare(qdq, calib[0])["chain"]
        np.testing.assert_array_equal(good, full[:, [0, 3]])
        with pytest.raises(RuntimeCallError, match="take|out of range"):
            f(calib[0], np.array([0, 12], np.int64))


def test_an_int8_conv_big_enough_to_split_splits_inside_the_chain(monkeypatch):
    """One plan for every thread count: on one thread the chain runs the big conv, on two
    the chain hands its blocks to the native pool (runtime/chain_split.py), never its kernel
    object, with the same bytes."""
    from onnx import TensorProto, helper, numpy_helper

    from msc.backend.kernels.int8 import conv as int8_conv
    from msc.backend.runtime import split_cost

    monkeypatch.setenv(split_cost.SPLIT_ENV, "always")  # not this host's load: the path
    rng = np.random.default_rng(2)
    w = numpy_helper.from_array((rng.standard_normal((32, 16, 3, 3)) * 0.2)
                                .astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["y"])], "big",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 32, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              ir_version=8)
    qdq, calib = quantized(model, (1, 16, 32, 32))
    f = relax.VirtualMachine(_executable(qdq))["main"]
    calls = []
    entry = int8_conv.QConv2d.__call__
    monkeypatch.setattr(int8_conv.QConv2d, "__call__",
                        lambda self, *a: calls.append(1) or entry(self, *a))
    with num_threads(1):
        one = f(calib[0]).numpy()
    plan = f.entry({}).plan
    assert "SPLIT()" not in plan.runner.source and plan.stats["parallel_steps"] == 1
    with num_threads(2):
        two = f(calib[0]).numpy()
    assert calls == []
    np.testing.assert_array_equal(one, two)
