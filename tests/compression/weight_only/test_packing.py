"""Packed storage of weight-only quantization: codes round trip, the RTN error bound per group,
the .npz stays pickle-free and half a byte per int4 weight, and bad settings are refused with
a ValidationError naming the setting."""

import numpy as np
import pytest

from msc.codegen.files import save_npz
from msc.compression.weight_only import quantize_rtn, read_config
from msc.compression.weight_only.awq import search_scales
from msc.compression.weight_only.packing import pack_codes, unpack_codes
from msc.errors import ValidationError

RNG = np.random.default_rng(0)


@pytest.mark.parametrize("bits", [4, 8])
def test_codes_round_trip(bits):
    codes = RNG.integers(0, 1 << bits, (5, 3, 64)).astype(np.uint8)
    packed = pack_codes(codes, bits)
    assert packed.shape == (5, 3, 64 * bits // 8) and packed.dtype == np.uint8
    np.testing.assert_array_equal(unpack_codes(packed, bits), codes)


def test_int4_nibble_order_is_matmul_nbits():
    """Element 2j in the low nibble, 2j + 1 in the high one (onnxruntime's layout)."""
    assert pack_codes(np.array([[1, 2, 3, 4]], np.uint8), 4).tolist() == [[0x21, 0x43]]


@pytest.mark.parametrize("bits,group,sym", [(4, 32, True), (4, 64, False), (4, 128, True),
                                            (8, None, True), (8, 32, False)])
def test_rtn_error_is_at_most_half_a_step(bits, group, sym):
    w = RNG.standard_normal((7, 100)).astype(np.float32)  # K = 100: the last group is padded
    packed = quantize_rtn(w, bits, group, sym)
    size = 100 if group is None else group
    groups = -(-100 // size)
    assert packed.q.shape == (7, groups, size * bits // 8)
    assert packed.scales.shape == packed.zero_points.shape == (7, groups)
    step = np.repeat(packed.scales, size, axis=1)[:, :100]
    assert np.all(np.abs(packed.dequantize() - w) <= step / 2 * (1 + 1e-5))
    if sym:
        assert np.all(packed.zero_points == 1 << (bits - 1))


def test_asymmetric_keeps_zero_exact_and_a_zero_row_is_zero():
    w = RNG.uniform(0.1, 1.0, (2, 64)).astype(np.float32)
    w[1] = 0.0
    w[0, 5] = 0.0
    got = quantize_rtn(w, 4, 32, symmetric=False).dequantize()
    assert got[0, 5] == 0.0 and not got[1].any()


def test_int4_npz_is_half_a_byte_per_weight_and_loads_without_pickle(tmp_path):
    packed = quantize_rtn(RNG.standard_normal((64, 256)).astype(np.float32), 4, 128)
    path = tmp_path / "w.npz"
    save_npz(str(path), {"q": packed.q, "scales": packed.scales, "zeros": packed.zero_points})
    with np.load(path, allow_pickle=False) as data:
        assert data["q"].dtype == np.uint8 and data["q"].nbytes == 64 * 256 // 2
        np.testing.assert_array_equal(data["q"], packed.q)


@pytest.mark.parametrize("config,key", [
    ({"bits": 3}, "bits"), ({"bits": 4, "group_size": 48}, "group_size"),
    ({"bits": 4, "group_size": 8}, "group_size"), ({"bits": 4, "group_size": None}, "group_size"),
    ({"method": "gptq"}, "method"), ({"awq_grid": 0}, "awq_grid"), ({"symmetric": "yes"},
                                                                     "symmetric"),
    ({"group": 32}, "group")])
def test_bad_settings_are_refused_by_name(config, key):
    with pytest.raises(ValidationError, match=key):
        read_config(config)


def test_awq_is_never_worse_than_rtn_and_wins_on_outlier_channels():
    """A layer whose input has a few large channels (as LLM activations do): the scale search
    must beat round to nearest on held-out rows of the same distribution."""
    k = 256
    magnitude = np.ones(k, np.float32)
    magnitude[RNG.choice(k, 8, replace=False)] = 30.0
    calib = RNG.standard_normal((256, k)).astype(np.float32) * magnitude
    held = RNG.standard_normal((256, k)).astype(np.float32) * magnitude
    w = RNG.standard_normal((64, k)).astype(np.float32)
    choice = search_scales(calib, w, 4, 128, True, grid=20)
    assert choice.sqnr_db >= choice.rtn_sqnr_db and choice.alpha > 0

    def held_db(w_hat):
        ref = held.astype(np.float64) @ w.T
        return 10 * np.log10(np.sum(ref ** 2) / np.sum((ref - held @ w_hat.T) ** 2))
    awq = held_db(choice.packed.dequantize() / choice.input_scale)
    rtn = held_db(quantize_rtn(w, 4, 128, True).dequantize())
    assert awq > rtn + 1.0, (awq, rtn)


def _mlp_graph():
    import torch

    from msc.frontends import translate

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(48, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 16, bias=False)).eval()
    return translate.from_torch(model, [([2, 48], "float32")])


def test_a_saved_plan_re_applies_to_the_same_bytes(tmp_path):
    from msc.compression.weight_only import apply_weight_plan, quantize_weights, save_weight_plan

    graph, weights = _mlp_graph()
    calib = [RNG.standard_normal((2, 48)).astype(np.float32) for _ in range(4)]
    qgraph, qweights, report = quantize_weights(graph, weights, calib,
                                                {"bits": 4, "group_size": 32, "method": "awq"})
    save_weight_plan(report.plan, str(tmp_path / "plan.json"))
    again, again_w = apply_weight_plan(graph, weights, str(tmp_path / "plan.json"))
    assert again.to_json() == qgraph.to_json()
    assert sorted(again_w) == sorted(qweights)
    for name, value in qweights.items():
        np.testing.assert_array_equal(again_w[name], value)


def test_a_plan_for_another_graph_is_refused():
    from msc.compression.weight_only import apply_weight_plan
    from msc.errors import SerializationError

    graph, weights = _mlp_graph()
    entry = {"bits": 4, "group_size": 32, "symmetric": True, "alpha": 0.0, "input_scale": None}
    with pytest.raises(ValidationError, match="no linear joint"):
        apply_weight_plan(graph, weights, {"no_such_node": entry})
    with pytest.raises(SerializationError, match="keys"):
        apply_weight_plan(graph, weights, {"matmul": {"bits": 4}})
