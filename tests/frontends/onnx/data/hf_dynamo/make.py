"""Regenerate the tiny Hugging Face ONNX files in this folder with torch's default exporter
(``torch.onnx.export(dynamo=True)``, which needs onnxscript): random weights from the tiny
configs of tests/helpers/hf_models.py (no downloads), dynamic batch and sequence. The files are
checked in because one export takes 7-13 s; run from the repository root:

    python -m tests.frontends.onnx.data.hf_dynamo.make

T5's encoder is not here: torch 2.13's exporter fails on it ("Cannot view a tensor with shape
[2, 8, 4, 8] ... as (2, 8, 32)" in its decomposition step), before any ONNX exists.
"""

import warnings
from pathlib import Path

import onnx
import torch

from tests.helpers.hf_models import VOCAB, tiny_hf_models

HERE = Path(__file__).parent
NAMES = ("bert", "gpt2", "vit", "distilbert")


def _example(name: str):
    if name == "vit":
        return torch.randn(2, 3, 32, 32), {"pixel_values": {0: torch.export.Dim("bz")}}
    dims = {0: torch.export.Dim("bz"), 1: torch.export.Dim("seq", max=64)}
    return torch.randint(0, VOCAB, (2, 8)), {"input_ids": dims}


def _strip(model: onnx.ModelProto) -> onnx.ModelProto:
    """Drop what only makes the file bigger: value_info, doc strings, metadata."""
    del model.graph.value_info[:]
    del model.metadata_props[:]
    for node in model.graph.node:
        node.doc_string = ""
        del node.metadata_props[:]
    return model


def main() -> None:
    import transformers
    transformers.logging.set_verbosity_error()
    warnings.filterwarnings("ignore")
    for name, build in tiny_hf_models(transformers, layers=1).items():
        if name not in NAMES:
            continue
        torch.manual_seed(0)
        x, dynamic = _example(name)
        tmp = HERE / f"{name}.tmp.onnx"
        torch.onnx.export(build().eval(), (x,), tmp, dynamo=True, input_names=list(dynamic),
                          output_names=["last_hidden_state"], dynamic_shapes=dynamic)
        model = _strip(onnx.load(tmp))
        onnx.save(model, HERE / f"{name}.onnx")
        for leftover in (tmp, Path(f"{tmp}.data")):
            leftover.unlink(missing_ok=True)
        print(name, len(model.graph.node), "nodes")


if __name__ == "__main__":
    main()
