"""Shape reads (``x.shape``, ``x.size()``): from_torch gives a ``shape`` node, which both
codegens write as the static shape value, matching what the torch model returns."""

import importlib.util

import numpy as np
import pytest
import torch

from msc.codegen import to_onnx, to_relax, to_torch
from msc.frontends.translate import from_torch
from tests.helpers.codegen import relax_build_and_run, torch_run
from tests.helpers.onnx_conformance import run_onnxruntime


class _Shape(torch.nn.Module):
    def forward(self, x):
        return x.shape


class _Size(torch.nn.Module):
    def forward(self, x):
        return x.size()


@pytest.mark.parametrize("model", [_Shape(), _Size()], ids=["getattr-shape", "size"])
def test_shape_reads_through_both_codegens(model, tmp_path):
    x = np.zeros((1, 3, 5, 2), "float32")
    want = np.array(list(model(torch.from_numpy(x))))
    graph, weights = from_torch(model, [(list(x.shape), "float32")])
    assert [n.optype for n in graph.get_nodes()] == ["input", "shape"]
    module = to_torch(graph, weights, {"need_test": False}, build_folder=tmp_path / "t")
    np.testing.assert_array_equal(torch_run(module, [x])[0], want)
    mod = to_relax(graph, weights, {"need_test": False}, build_folder=tmp_path / "r")
    # the VM returns a shape tuple (one int per dim)
    np.testing.assert_array_equal(np.asarray(relax_build_and_run(mod, [x])).ravel(), want)


@pytest.mark.parametrize("model", [_Shape(), _Size()], ids=["getattr-shape", "size"])
def test_symbolic_shape_reads_come_from_the_input(model, tmp_path):
    """A dynamic batch: all three codegens read the dim from the input (``inp_0.shape[0]``), never
    write the -1 the graph stores for it; one build serves two batch sizes."""
    graph, weights = from_torch(model, [(["bz", 3, 5, 2], "float32")])
    shape_node = next(n for n in graph.get_nodes() if n.optype == "shape")
    assert shape_node.get_attrs()["dim_prims"].split(",")[1:] == ["3", "5", "2"]
    module = to_torch(graph, weights, {"need_test": False}, build_folder=tmp_path / "t")
    mod = to_relax(graph, weights, {"need_test": False}, build_folder=tmp_path / "r")
    written = to_onnx(graph, weights)
    for batch in (1, 4):
        x = np.ones((batch, 3, 5, 2), "float32")
        want = np.array([batch, 3, 5, 2])
        np.testing.assert_array_equal(torch_run(module, [x])[0], want)
        np.testing.assert_array_equal(np.asarray(relax_build_and_run(mod, [x])).ravel(), want)
        if importlib.util.find_spec("onnxruntime"):
            np.testing.assert_array_equal(run_onnxruntime(written, [x])[0], want)
