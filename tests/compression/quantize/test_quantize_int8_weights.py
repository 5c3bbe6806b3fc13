"""Quantized weights are stored as int8 + per-channel scale (QuantizedWeight): every array
reader sees exactly the fake-quantized floats of before (both codegens and the backend give
bit-identical outputs), fused joints stay fused, and the saved .npz shrinks ~4x."""

import numpy as np
import pytest
import torch
from torch import nn

from msc import relax
from msc.codegen import to_relax, to_torch
from msc.codegen.files import save_npz
from msc.codegen.qweight import QuantizedWeight, pack_weights, unpack_weights
from msc.codegen.weight_files import load_weights
from msc.compression.quantize import apply_plan, calibrate, fake_quant
from msc.errors import ValidationError
from msc.frontends import translate

RNG = np.random.default_rng(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(3, 32, 3, padding=1), nn.Conv2d(32, 64, 3, padding=1)
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        x = torch.relu(self.c2(torch.relu(self.c1(x))))
        return self.fc(x.mean(dim=(2, 3)))


@pytest.fixture(scope="module")
def quantized():
    torch.manual_seed(0)
    graph, weights = translate.from_torch(Net().eval(), [([1, 3, 8, 8], "float32")])
    batches = [{"inp_0": RNG.standard_normal((1, 3, 8, 8)).astype("float32")}
               for _ in range(3)]
    plan = calibrate(graph, weights, batches)
    return graph, weights, plan, batches[0]["inp_0"]


def test_int8_weights_equal_the_fake_quantized_floats(quantized):
    graph, weights, plan, _ = quantized
    qgraph, qweights = apply_plan(graph, weights, plan)
    _, fweights = apply_plan(graph, weights, plan, int8_weights=False)
    int8 = {k: v for k, v in qweights.items() if isinstance(v, QuantizedWeight)}
    assert len(int8) == 3  # c1, c2, fc
    for name, value in int8.items():
        assert value.q.dtype == np.int8 and not np.any(value.q == -128)
        entry = plan[name]
        expected = fake_quant(np.asarray(weights[name]), entry["scale"],
                              np.zeros(len(entry["scale"]), np.int8), entry["axis"])
        np.testing.assert_array_equal(np.asarray(value), expected)  # bit for bit
        np.testing.assert_array_equal(np.asarray(value), fweights[name])
    # the fused joints stay fused: weights are records, not computed inputs
    assert [n.optype for n in qgraph.get_nodes()].count("msc.conv2d_bias") == 2


def test_codegens_give_identical_outputs_with_int8_weights(quantized):
    graph, weights, plan, x = quantized
    qgraph, qweights = apply_plan(graph, weights, plan)
    _, fweights = apply_plan(graph, weights, plan, int8_weights=False)
    outs = []
    for w in (qweights, fweights):
        vm = relax.VirtualMachine(relax.build(to_relax(qgraph, w)), relax.cpu())
        outs.append(vm["main"](x).numpy())
        outs.append(to_torch(qgraph, w)(torch.from_numpy(x)).detach().numpy())
    np.testing.assert_array_equal(outs[0], outs[2])   # backend: int8 record == floats
    np.testing.assert_array_equal(outs[1], outs[3])   # torch codegen likewise
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-5, atol=1e-5)


def test_npz_keeps_int8_and_is_smaller(quantized, tmp_path):
    graph, weights, plan, _ = quantized
    _, qweights = apply_plan(graph, weights, plan)
    save_npz(tmp_path / "q.npz", pack_weights(qweights))
    save_npz(tmp_path / "f.npz", {k: np.asarray(v) for k, v in qweights.items()})
    ratio = (tmp_path / "f.npz").stat().st_size / (tmp_path / "q.npz").stat().st_size
    assert ratio > 3.0, ratio  # 4x on the weights, less the float biases and file headers
    back = load_weights(tmp_path / "q.npz")
    assert set(back) == set(qweights)
    for name, value in qweights.items():
        assert type(back[name]) is type(value)
        np.testing.assert_array_equal(np.asarray(back[name]), np.asarray(value))


def test_unpack_refuses_a_scale_that_does_not_fit():
    arrays = pack_weights({"w": QuantizedWeight(np.ones((4, 2), np.int8), [0.1] * 4, 0)})
    arrays["w#scale"] = np.ones(3, np.float32)
    with pytest.raises(ValidationError, match="one scale per channel"):
        unpack_weights(arrays)
