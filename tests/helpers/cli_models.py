"""Model files for the CLI and diff tests: onnx light-zoo paths, small ONNX nets built in code,
a torch model file and a TVMScript file written into a test's tmp_path."""

from __future__ import annotations

from pathlib import Path

import numpy as np

LIGHT = Path(__import__("onnx").__file__).parent / "backend/test/data/light"


def light(name: str) -> str:
    """Path of an onnx light-zoo model (``squeezenet``, ``resnet50``, ...)."""
    return str(LIGHT / f"light_{name}.onnx")


def onnx_weight_count(path: str) -> int:
    """Elements of a model's weights, counted on the ONNX file itself (initializers and the
    ConstantOfShape weights of the light zoo)."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(path)
    arrays = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    made = {n.input[0] for n in model.graph.node if n.op_type == "ConstantOfShape"}
    count = sum(int(np.prod(arrays[n.input[0]])) for n in model.graph.node
                if n.op_type == "ConstantOfShape")
    used = {name for n in model.graph.node for name in n.input}  # one initializer is unused
    return count + sum(a.size for k, a in arrays.items()
                       if k in used and k not in made and a.dtype.kind == "f")


def cnn_onnx(path, channels: int = 8, extra: str | None = None, seed: int = 0) -> str:
    """Conv -> Relu [-> extra op] -> Conv -> GlobalAveragePool -> Flatten -> Gemm, dynamic batch
    ``N``, random weights; ``extra`` inserts one unary op (e.g. ``"Sigmoid"``) after the Relu."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)

    def init(name, *shape):
        return numpy_helper.from_array(rng.standard_normal(shape).astype("float32") * 0.3, name)

    inits = [init("w1", channels, 3, 3, 3), init("b1", channels), init("w2", 6, channels, 3, 3),
             init("b2", 6), init("fc", 10, 6), init("fcb", 10)]
    mid = "e" if extra else "r"
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"])]
    nodes += [helper.make_node(extra, ["r"], ["e"])] if extra else []
    nodes += [helper.make_node("Conv", [mid, "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
              helper.make_node("GlobalAveragePool", ["c2"], ["p"]),
              helper.make_node("Flatten", ["p"], ["f"]),
              helper.make_node("Gemm", ["f", "fc", "fcb"], ["y"], transB=1)]
    graph = helper.make_graph(
        nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                                ir_version=8), str(path))
    return str(path)


TORCH_NET = '''
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class Config:  # a dataclass needs its module registered in sys.modules while it runs
    channels: int = 8


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, Config().channels, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        return self.fc(y.mean(dim=(2, 3)))


class Cnn(nn.Module):
    """cnn_onnx's net written in torch."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 6, 3, padding=1)
        self.fc = nn.Linear(6, 10)

    def forward(self, x):
        y = self.conv2(torch.relu(self.conv1(x)))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(y, 1), 1))


def make_cnn():
    return Cnn()


def make_model():
    torch.manual_seed(0)
    return Net()


def broken():
    raise RuntimeError("weights not found")


def not_a_module():
    return 42
'''


def torch_file(folder) -> str:
    """A torch model file: specs ``<path>:make_model`` (conv, batch norm, linear) and
    ``<path>:make_cnn`` (the net of ``cnn_onnx``)."""
    path = Path(folder) / "net.py"
    path.write_text(TORCH_NET)
    return str(path)


TVMSCRIPT = '''@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 8), dtype="float32")):
        with R.dataflow():
            gv = R.nn.relu(x)
            R.output(gv)
        return gv
'''


def tvmscript_file(folder) -> str:
    path = Path(folder) / "relu.py"
    path.write_text(TVMSCRIPT)
    return str(path)


def relu_onnx(path, dims=("batch size", 4)) -> str:
    """Relu on an input named ``input.1`` (the graph sanitizes it to ``input_1``)."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["input.1"], ["out:0"])], "g",
        [helper.make_tensor_value_info("input.1", TensorProto.FLOAT, list(dims))],
        [helper.make_tensor_value_info("out:0", TensorProto.FLOAT, list(dims))])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)
