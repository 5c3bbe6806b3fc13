"""Real models: the onnx package's light zoo and a torch-exported transformer encoder.

The shipped light models build every weight as the constant 0.02 (a uniform softmax), so each
is also run with random weights and compared with onnxruntime on the logits.
"""

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from msc.frontends.onnx.api import from_onnx
from msc.frontends.onnx.testing import random_weights, run_msc, run_ort

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
MODELS = sorted(p.stem for p in LIGHT.glob("light_*.onnx"))
# Compiling their large dense layers dominates: numeric checks on the shipped weights only.
SLOW = {"light_bvlc_alexnet", "light_vgg19", "light_zfnet512"}


def graph_input(model):
    inits = {t.name for t in model.graph.initializer}
    return next(v for v in model.graph.input if v.name not in inits)


def example_input(model):
    value = graph_input(model)
    shape = [d.dim_value for d in value.type.tensor_type.shape.dim]
    return {value.name: np.random.default_rng(0).random(shape, dtype=np.float32)}


def test_light_zoo_is_all_there():
    assert len(MODELS) == 9


@pytest.mark.parametrize("name", MODELS)
def test_light_model_translates_with_static_output(name):
    mod, _weights = from_onnx(LIGHT / f"{name}.onnx", as_msc=False)
    expected = numpy_helper.to_array(onnx.load_tensor(str(LIGHT / f"{name}_output_0.pb")))
    ret = mod["main"].ret_struct_info
    assert ret.dtype == "float32"
    assert [int(d) for d in ret.values] == list(expected.shape)
    assert "shape_of" not in mod.script()


@pytest.mark.parametrize("name", MODELS)
def test_light_model_matches_shipped_output(name):
    model = onnx.load(LIGHT / f"{name}.onnx")
    expected = numpy_helper.to_array(onnx.load_tensor(str(LIGHT / f"{name}_output_0.pb")))
    got = run_msc(model, example_input(model))[0]
    np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-7)


def logits_model(model):
    """The model with random weights and, when it ends in a Softmax, its input as output."""
    out = random_weights(model)
    softmax = [n for n in out.graph.node if n.op_type == "Softmax"]
    if softmax:
        del out.graph.output[:]
        out.graph.output.append(onnx.helper.make_value_info(softmax[-1].input[0],
                                                            onnx.TypeProto()))
    out.ir_version = min(out.ir_version, 10)
    return out


@pytest.mark.parametrize("name", [m for m in MODELS if m not in SLOW])
def test_light_model_random_weights_match_onnxruntime(name):
    model = logits_model(onnx.load(LIGHT / f"{name}.onnx"))
    feeds = example_input(model)
    got, want = run_msc(model, feeds)[0], run_ort(model, feeds)[0]
    scale = np.abs(want).max()
    assert scale > 1  # random weights give non-trivial logits
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4 * scale)


@pytest.mark.filterwarnings("ignore")  # torch's legacy exporter warns about itself
def test_torch_transformer_encoder_matches_onnxruntime(tmp_path):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64,
                                             dropout=0.0, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
    x = torch.randn(2, 10, 32)
    path = tmp_path / "encoder.onnx"
    torch.onnx.export(model.eval(), (x,), path, opset_version=17, dynamo=False,
                      input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "batch"}})
    onnx_model = onnx.load(path)
    mod, _ = from_onnx(onnx_model, as_msc=False)
    assert str(mod["main"].params[0].struct_info.shape[0]) == "batch"
    for batch in (2, 3):
        feeds = {"x": np.random.default_rng(batch).standard_normal((batch, 10, 32),
                                                                    dtype=np.float32)}
        onnx_model.ir_version = min(onnx_model.ir_version, 10)
        np.testing.assert_allclose(run_msc(onnx_model, feeds)[0], run_ort(onnx_model, feeds)[0],
                                   rtol=1e-4, atol=1e-5)
