"""Relax -> MSCGraph -> ONNX: the TVM-printed modules of the test corpus (TVM 0.27's text for
torch.fx, torch.export and ONNX models, tests/relax/data/tvm027 and
tests/frontends/relax/data/relax_models) run in onnxruntime with the outputs of msc's own VM
on the same module (rtol 1e-5, atol 1e-5)."""

from pathlib import Path

import numpy as np
import pytest

from msc import relax
from msc.codegen import to_onnx
from msc.frontends.translate import from_relax
from tests.helpers.onnx_conformance import run_onnxruntime
from tests.helpers.torch_tools import run_vm

pytest.importorskip("onnxruntime")

ROOT = Path(__file__).parents[2]
TVM027 = ROOT / "relax" / "data" / "tvm027"
MODELS = ROOT / "frontends" / "relax" / "data" / "relax_models"
CORPUS = {p.stem: p for p in [*sorted(TVM027.glob("*.tvmscript")),
                              *sorted(MODELS.glob("*.tvmscript"))]}
# A lowered module (calls into TIR functions): msc reads no graph from it (from_relax says
# so), so there is nothing to write.
LOWERED = {"legalized_mlp"}


def _module(path: Path):
    npz = path.with_suffix(".npz")
    metadata = None
    if npz.exists():
        with np.load(npz) as data:  # "i": ir.GenericConst i, "ffi.Tensor.i": attr tensor i
            metadata = {"ir.GenericConst": [data[k] for k in sorted(
                (k for k in data.files if k.isdigit()), key=int)], "ffi.Tensor": [
                data[f"ffi.Tensor.{i}"] for i in range(sum(not k.isdigit() for k in data.files))]}
    return relax.from_script(path.read_text(), metadata=metadata)


def _inputs(graph) -> list:
    rng = np.random.default_rng(0)
    arrays = []
    for tensor in graph.get_inputs():
        shape = [d if d >= 0 else 3 for d in tensor.shape]
        if tensor.dtype.startswith("float"):
            arrays.append(rng.standard_normal(shape).astype(tensor.dtype))
        else:
            arrays.append(rng.integers(0, 4, shape).astype(tensor.dtype))
    return arrays


@pytest.mark.parametrize("name", sorted(set(CORPUS) - LOWERED))
def test_corpus_module_runs_in_onnxruntime_like_the_vm(name):
    mod = _module(CORPUS[name])
    graph, weights = from_relax(mod)
    inputs = _inputs(graph)
    got = run_onnxruntime(to_onnx(graph, weights), inputs)
    # Weights kept as params (values in attrs["params"]) are the VM's trailing arguments.
    want = run_vm(mod, inputs + [t.data for t in mod["main"].attrs.get("params", [])])
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
