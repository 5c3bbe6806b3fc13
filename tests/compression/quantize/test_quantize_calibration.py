"""Entropy calibration equals a loop-form numpy reference; msc's QDQ output SQNR is at least
onnxruntime's quantize_static on a tiny conv net for every method."""

import numpy as np
import pytest

from msc.compression.quantize import quantize
from msc.compression.quantize.calibration import entropy_window, signed_histogram
from msc.compression.quantize.observers import Observer
from msc.compression.quantize.runner import make_runner
from tests.helpers.qdq_models import ort_qdq_outputs, sqnr, tiny_conv_onnx


def _reference_window(hist, levels):
    """onnxruntime's entropy search written plainly: windows [zero - i, zero + i)."""
    zero = len(hist) // 2
    best, best_i = np.inf, zero
    for i in range(levels // 2, zero + 1):
        start, end = zero - i, zero + i
        window = [float(v) for v in hist[start:end]]
        p = list(window)
        p[0] += float(sum(hist[:start]))
        p[-1] += float(sum(hist[end:]))
        merged, q = len(window) // levels, [0.0] * len(window)
        for level in range(levels):
            a = level * merged
            b = len(window) if level == levels - 1 else a + merged
            kept = [j for j in range(a, b) if p[j] != 0]
            for j in kept:
                q[j] = sum(window[a:b]) / len(kept)
        dists = []
        for d in (p, q):
            d = np.array(d) / sum(d)
            zeros = int((d == 0).sum())
            d = np.where(d == 0, 1e-4, d - 1e-4 * zeros / (d.size - zeros))
            dists.append(d)
        if any((d <= 0).any() for d in dists):
            continue
        kl = sum(a * np.log(a / b) for a, b in zip(*dists))
        if kl < best:
            best, best_i = kl, i
    return best_i


@pytest.mark.parametrize("seed", range(6))
def test_entropy_window_equals_the_numpy_reference(seed):
    rng = np.random.default_rng(seed)
    hist = rng.integers(0, 50, 64).astype(float)
    hist[rng.random(64) < 0.2] = 0           # empty bins, as real histograms have
    hist[[3, 60]] += [400, 900]              # outliers far out: worth clipping or not
    assert entropy_window(hist, 8) == _reference_window(hist, 8)


def test_observer_entropy_range():
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.standard_normal(20_000), [-9.1, 12.0]]).astype("float32")
    obs = Observer(bins=64)
    obs.update(x)
    # onnxruntime's default (128 signed bins into 128 levels): one candidate, MinMax
    assert obs.range("entropy", False) == obs.range("minmax", False)
    hist = np.histogram(x, 32, range=(-obs.limit, obs.limit))[0]
    np.testing.assert_array_equal(signed_histogram(obs.neg, obs.pos, 32), hist)
    t = _reference_window(hist, 8) * obs.limit / 16  # 16 bins per sign
    assert obs.range("entropy", False, levels=8, entropy_bins=32) == (-t, t)
    assert t < 9  # the lone outliers are clipped


@pytest.fixture
def one_thread():
    import torch  # msc calibrates on torch; its thread pool thrashes on a loaded machine

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_msc_sqnr_is_at_least_onnxruntime_per_method(capsys, one_thread):
    import onnxruntime as ort

    from msc.frontends.translate import from_onnx

    model = tiny_conv_onnx()
    rng = np.random.default_rng(3)
    calib = [rng.random((1, 3, 12, 12), dtype=np.float32) for _ in range(6)]
    held_out = [rng.random((1, 3, 12, 12), dtype=np.float32) for _ in range(3)]
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    ref = [sess.run(None, {"x": x})[0] for x in held_out]
    graph, weights = from_onnx(model)
    for method, ort_name in (("minmax", "MinMax"), ("entropy", "Entropy"),
                             ("percentile", "Percentile")):
        ort_db = sqnr(ref, ort_qdq_outputs(model, calib, held_out, ort_name))
        qgraph, qweights, _ = quantize(graph, weights, calib,
                                       {"method": method, "per_layer": False})
        run = make_runner(qgraph, qweights)
        msc_db = sqnr(ref, [run([x])[qgraph.output_names[0]] for x in held_out])
        assert msc_db >= ort_db - 0.0, (method, msc_db, ort_db)
    capsys.readouterr()  # onnxruntime's calibrators print
