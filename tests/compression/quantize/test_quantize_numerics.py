"""compression.quantize numerics: qparams equal onnxruntime's, observers equal numpy, the QDQ
joints equal a numpy fake-quant reference, and the torch codegen, the Relax codegen on the
msc backend and the reference give the same numbers on a QDQ graph."""

import numpy as np
import pytest
import torch

from msc.compression.quantize import apply_plan, calibrate, fake_quant, qparams_from_range
from msc.compression.quantize.observers import Observer, kl_threshold
from msc.compression.quantize.runner import activation_names, make_runner, with_outputs
from msc.frontends import translate
from msc.graph import MSCGraph, MSCJoint, MSCTensor


class Net(torch.nn.Module):
    """conv -> relu -> conv + residual -> maxpool -> mean -> linear: every default optype."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        y = torch.relu(self.c1(x))
        z = torch.nn.functional.max_pool2d(self.c2(y) + y, 2)
        return self.fc(z.mean((2, 3)))


@pytest.fixture(scope="module")
def net():
    torch.manual_seed(0)
    graph, weights = translate.from_torch(Net().eval(), [([2, 3, 8, 8], "float32")])
    rng = np.random.default_rng(0)
    data = [rng.standard_normal((2, 3, 8, 8)).astype("float32") for _ in range(4)]
    return graph, weights, data


@pytest.mark.parametrize("rmin, rmax", [(-1.3, 2.7), (0.0, 5.5), (-0.25, -0.01), (0.0, 0.0)])
@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_qparams_equal_onnxruntime(rmin, rmax, dtype):
    quant_utils = pytest.importorskip("onnxruntime.quantization.quant_utils")
    lo, hi = (0, 255) if dtype == "uint8" else (-127, 127)
    zero, scale = quant_utils.compute_scale_zp(
        np.array(rmin, np.float32), np.array(rmax, np.float32), np.array(lo, dtype),
        np.array(hi, dtype), symmetric=dtype == "int8")
    got_scale, got_zero = qparams_from_range(rmin, rmax, dtype)
    assert got_scale.tobytes() == np.asarray(scale, np.float32).tobytes()
    assert int(got_zero) == int(zero) and got_zero.dtype == np.dtype(dtype)


def test_observer_histogram_growth_is_exact():
    """Bins merged on range doubling equal a histogram made at the final range at once."""
    rng = np.random.default_rng(1)
    batches = [rng.standard_normal(1000).astype("float32") * s for s in (0.1, 1.0, 7.0)]
    grown = Observer(bins=256)
    for b in batches:
        grown.update(b)
    once = Observer(bins=256)
    once.limit = grown.limit
    once.update(np.concatenate(batches))
    np.testing.assert_array_equal(grown.pos, once.pos)
    np.testing.assert_array_equal(grown.neg, once.neg)
    assert (grown.min, grown.max) == (float(min(map(np.min, batches))),
                                      float(max(map(np.max, batches))))


def test_percentile_and_entropy_ranges():
    rng = np.random.default_rng(2)
    x = np.append(rng.standard_normal(200_000), 40.0).astype("float32")
    obs = Observer()
    obs.update(x)
    lo, hi = obs.range("percentile", True, 99.9)
    want = np.percentile(np.abs(x), 99.9)
    assert abs(hi - want) <= obs.width and lo == -hi
    assert obs.range("minmax", True) == (float(x.min()), 40.0)
    # TensorRT's KL search ignores the lone outlier (the anchors measured 5.35 at 2048 bins)
    t = obs.range("entropy_trt", True)[1]
    assert 3.0 < t < 8.0
    assert kl_threshold(np.ones(100)) == 100  # fewer bins than levels: keep everything
    relu = Observer()  # half zeros: bin 0 counts as bin 1, else the zeros pull t down to ~2
    relu.update(np.maximum(rng.standard_normal(200_000), 0).astype("float32"))
    assert 3.0 < relu.range("entropy_trt", False)[1] < 4.5
    band = Observer()  # a narrow band keeps its range (no degenerate 1-bin window)
    band.update(rng.uniform(0.3, 1.0, 50_000).astype("float32"))
    assert band.range("entropy_trt", False)[1] > 0.9


def test_fake_quant_numerics_equal_numpy_reference(net):
    graph, weights, data = net
    plan = calibrate(graph, weights, data, {"quantize_outputs": False})  # inputs only
    qgraph, qweights = apply_plan(graph, weights, plan)
    acts = [n for n in plan if n not in graph.weight_holders]
    assert set(acts) == {"inp_0:0", "relu:0", "conv2d_1:0", "add:0", "mean:0"}
    dq = {n.producer_of(0).input_at(0).name: n.output_at(0).name
          for n in qgraph.get_nodes() if n.optype == "dequantize"}
    run = make_runner(with_outputs(qgraph, [*acts, *dq.values()]), qweights)
    got = run([data[0]])
    for name in acts:
        entry, x = plan[name], got[name].astype(np.float64)
        lo, hi = (0, 255) if entry["dtype"] == "uint8" else (-128, 127)
        s, z = np.float32(entry["scale"]), entry["zero_point"]
        q = np.clip(np.round(got[name] / s) + z, lo, hi)
        want = ((q - z) * np.float64(s)).astype(np.float32)
        np.testing.assert_array_equal(got[dq[name]], want, err_msg=name)
        inside = (x >= (lo - z) * s) & (x <= (hi - z) * s)  # calibrated on all 4 batches
        assert np.abs(got[dq[name]] - x)[inside].max() <= float(s) * 0.5001, name
    for name in (n for n in plan if n in graph.weight_holders):
        w = weights[name].astype(np.float64)
        flat = np.abs(w.reshape(w.shape[0], -1)).max(axis=1)
        scale = (np.float32(2) * flat.astype(np.float32)) / np.float32(254)
        shape = (-1,) + (1,) * (w.ndim - 1)
        q = np.clip(np.round(weights[name] / scale.reshape(shape)), -128, 127)
        np.testing.assert_array_equal(qweights[name],
                                      (q * scale.reshape(shape).astype(np.float64))
                                      .astype(np.float32), err_msg=name)
        assert plan[name]["axis"] == 0 and plan[name]["dtype"] == "int8"


def _qdq_only_graph(dtype: str) -> MSCGraph:
    x = MSCTensor("x:0", "float32", "NC", [4, 64], alias="x")
    inp = MSCJoint(0, "x", "", "input", outputs=[x])
    graph = MSCGraph("main", [inp], ["x:0"], ["x:0"])
    plan = {"x:0": {"scale": 0.05, "zero_point": 3 if dtype == "uint8" else -2, "axis": -1,
                    "dtype": dtype, "consumers": []}}
    return graph, plan


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_qdq_joints_identical_on_both_codegens_and_reference(dtype):
    """Half-way ties (x / scale = k + 0.5), clipping both ends: bit-identical everywhere."""
    graph, plan = _qdq_only_graph(dtype)
    qgraph, qweights = apply_plan(graph, {}, plan)
    q_name = next(n.output_at(0).name for n in qgraph.get_nodes() if n.optype == "quantize")
    dq_name = next(n.output_at(0).name for n in qgraph.get_nodes() if n.optype == "dequantize")
    probe = with_outputs(qgraph, [q_name, dq_name])
    ties = (np.arange(-128, 128) + 0.5).astype(np.float32) * np.float32(0.05)
    x = ties.reshape(4, 64)
    x[0, :4] = [-100.0, 100.0, 0.0, -0.0]
    torch_out = make_runner(probe, qweights, "torch")([x])
    relax_out = make_runner(probe, qweights, "relax")([x])
    zero = np.asarray(plan["x:0"]["zero_point"], dtype)
    want = fake_quant(x, 0.05, zero)
    for out in (torch_out, relax_out):
        assert out[q_name].dtype == np.dtype(dtype)
        np.testing.assert_array_equal(out[q_name], torch_out[q_name])
        np.testing.assert_array_equal(out[dq_name], want)


def test_qdq_model_agrees_on_both_codegens(net):
    graph, weights, data = net
    qgraph, qweights = apply_plan(graph, weights,
                                  calibrate(graph, weights, data, {"activation_dtype": "int8"}))
    names = activation_names(qgraph) + [n.output_at(0).name for n in qgraph.get_nodes()
                                        if n.optype == "quantize"]
    probe = with_outputs(qgraph, names)
    a = make_runner(probe, qweights, "torch")([data[1]])
    b = make_runner(probe, qweights, "relax")([data[1]])
    for name in names:
        if a[name].dtype.kind == "i":  # float conv sums differ in the last bit at most
            diff = np.abs(a[name].astype(int) - b[name].astype(int))
            assert diff.max() <= 1 and (diff > 0).mean() < 1e-3, name
        else:
            np.testing.assert_allclose(a[name], b[name], rtol=1e-5, atol=1e-5, err_msg=name)


def test_dynamic_batch_calibrates_on_any_batch_size():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(),
                                torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                                torch.nn.Linear(4, 2)).eval()
    graph, weights = translate.from_torch(model, [(["bz", 3, 8, 8], "float32")])
    rng = np.random.default_rng(0)
    data = [rng.standard_normal((n, 3, 8, 8)).astype("float32") for n in (1, 3)]
    qgraph, qweights = apply_plan(graph, weights, calibrate(graph, weights, data))
    qgraph.check()
    assert qgraph.inspect()["inputs"][0]["shape"] == ["bz", 3, 8, 8]
    got = make_runner(qgraph, qweights, "relax")([data[1]])[qgraph.output_names[0]]
    ref = model(torch.from_numpy(data[1])).detach().numpy()
    np.testing.assert_allclose(got, ref, atol=0.05 * np.abs(ref).max())
