"""SmoothQuant (compression.quantize.smooth) and the placement rules the corpus needed: the
smoothed graph computes the same function (against torch), the 1/s goes into a norm that only
the group reads and into an inserted multiply otherwise, the alpha search never picks worse
than no smoothing on the calibration data, and the QDQ model stays a standard one
(onnxruntime runs it). A relu6 carries its conv's output Q/DQ; an additive attention mask gets
none."""

import numpy as np
import pytest
import torch

from msc.codegen import to_onnx, to_torch
from msc.compression.quantize import calibrate, quantize
from msc.compression.quantize.smooth import smooth
from msc.errors import ValidationError
from msc.frontends import translate
from tests.helpers.qdq_models import sqnr


class Mlp(torch.nn.Module):
    """norm -> up -> gelu -> down (+ a residual reading the norm: post-norm when ``post``);
    three norm channels carry outliers, as trained transformers' do."""

    def __init__(self, post: bool = False, dim: int = 32):
        super().__init__()
        self.post = post
        self.norm = torch.nn.LayerNorm(dim)
        self.up, self.down = torch.nn.Linear(dim, 4 * dim), torch.nn.Linear(4 * dim, dim)
        with torch.no_grad():
            self.norm.weight[:3] = 30.0

    def forward(self, x):
        h = self.norm(x)
        y = self.down(torch.nn.functional.gelu(self.up(h)))
        return y + h if self.post else y


def _model(post: bool):
    torch.manual_seed(0)
    model = Mlp(post).eval()
    graph, weights = translate.from_torch(model, [([1, 16, 32], "float32")])
    rng = np.random.default_rng(0)
    data = [rng.standard_normal((1, 16, 32)).astype("float32") for _ in range(6)]
    return model, graph, weights, data


def _run_torch(graph, weights, data, tmp_path):
    module = to_torch(graph, weights, build_folder=str(tmp_path))
    with torch.no_grad():
        return [module(torch.from_numpy(x)).numpy() for x in data]


@pytest.mark.parametrize("post, folded", [(False, "layer_norm"), (True, None)])
def test_smoothing_keeps_the_function(post, folded, tmp_path):
    model, graph, weights, data = _model(post)
    sgraph, sweights, info = smooth(graph, weights, data, alpha=0.5)
    groups = info["groups"]
    # the norm's output feeds up alone (pre-norm): 1/s folds into gamma and beta; post-norm,
    # the residual reads it too: a multiply joint is inserted before up instead
    assert groups["layer_norm:0"]["folded_into"] == folded
    assert groups["gelu:0"]["folded_into"] is None  # gelu is no per-channel op
    inserted = sum(n.optype == "multiply" for n in sgraph.get_nodes()) - \
        sum(n.optype == "multiply" for n in graph.get_nodes())
    assert inserted == (1 if folded else 2)
    with torch.no_grad():
        ref = [model(torch.from_numpy(x)).numpy() for x in data]
    assert sqnr(ref, _run_torch(sgraph, sweights, data, tmp_path)) > 100  # float32 rounding


def test_smoothquant_helps_outlier_channels_and_runs_in_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    model, graph, weights, data = _model(post=False)
    qgraph, qweights, report = quantize(graph, weights, data,
                                        {"per_layer": False, "smooth": "search"})
    tried = report.smoothing["search_sqnr_db"]
    plain = tried["none"]  # the plain per-channel quantization, measured by the search
    # measured: none 30.36, 0.3 34.99, 0.5 35.66, 0.7 35.89 dB; the best is taken, > plain
    assert set(tried) == {"none", "0.3", "0.5", "0.7"}
    assert report.output["sqnr_db"] == max(tried.values())
    assert report.output["sqnr_db"] > plain + 2
    session = ort.InferenceSession(to_onnx(qgraph, qweights).SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    with torch.no_grad():
        ref = [model(torch.from_numpy(x)).numpy() for x in data]
    got = [session.run(None, {session.get_inputs()[0].name: x})[0] for x in data]
    assert sqnr(ref, got) > plain  # the standard QDQ model, on onnxruntime's int8 kernels


@pytest.mark.parametrize("value", [1.5, -0.1, "yes", True])
def test_smooth_setting_is_checked(value):
    _, graph, weights, data = _model(post=False)
    with pytest.raises(ValidationError, match="smooth"):
        quantize(graph, weights, data, {"smooth": value, "per_layer": False})


def test_relu6_carries_the_conv_output_qdq():
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Conv2d(3, 8, 3), torch.nn.Conv2d(8, 4, 3)

        def forward(self, x):
            return self.b(torch.nn.functional.relu6(self.a(x)))
    graph, weights = translate.from_torch(Net().eval(), [([1, 3, 8, 8], "float32")])
    x = np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype("float32")
    plan = calibrate(graph, weights, [x])
    clip = next(n for n in graph.get_nodes() if n.optype == "clip")
    conv = clip.input_pairs()[0][0]
    # one rounding, on the clip's [0, 6]-bounded output (onnxruntime removes the Clip)
    assert clip.outputs[0].name in plan and conv.outputs[0].name not in plan
    assert plan[clip.outputs[0].name]["zero_point"] == 0


def test_an_additive_mask_gets_no_qdq():
    class Masked(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q = torch.nn.Linear(8, 8)
            self.register_buffer("mask", torch.triu(torch.full((6, 6), torch.finfo().min), 1))

        def forward(self, x):
            h = self.q(x)
            return torch.softmax(h @ h.transpose(-1, -2) + self.mask, -1) @ x
    model = Masked().eval()
    graph, weights = translate.from_torch(model, [([1, 6, 8], "float32")])
    data = [np.random.default_rng(i).standard_normal((1, 6, 8)).astype("float32")
            for i in range(4)]
    report = quantize(graph, weights, data, {"per_layer": False})[2]
    masked = next(n for n in graph.get_nodes()
                  if n.optype == "add").outputs[0].name
    assert masked not in report.plan  # no 8-bit grid holds -3.4e38 and the scores
    assert report.output["sqnr_db"] > 30  # every score rounded to the zero point: ~5 dB
