"""Frontends: models -> MSCGraph and weights, as TVM's MSC ``core/frontend/translate.py``.

The three entry points, handed on from their frontends (``frontends/relax/translate.py``,
``frontends/onnx/api.py``, ``frontends/torch/api.py``); imports point one way, from here
into the frontends::

    from msc.frontends import translate
    graph, weights = translate.from_torch(model, [([1, 3, 224, 224], "float32")])
    graph, weights = translate.from_onnx("model.onnx")        # or a ModelProto
    graph, weights = translate.from_relax(mod)                # IRModule, TVMScript or tvm
    graph.inspect()["nodes"]                                  # {"total": 2, "input": 1, ...}
"""

from __future__ import annotations

from .relax.translate import from_relax

__all__ = ["from_onnx", "from_relax", "from_torch"]


def from_torch(model, input_info, trans_config=None, build_config=None, custom_convert_map=None,
               as_msc: bool = True, via: str | None = None):
    """A torch ``nn.Module`` -> (MSCGraph, weights); see ``frontends.torch.api.from_torch``.

    torch is imported only when this is called.
    """
    from .torch.api import from_torch as _from_torch

    return _from_torch(model, input_info, trans_config, build_config, custom_convert_map,
                       as_msc, via)


def from_onnx(model, input_info=None, opset: int | None = None, trans_config=None,
              build_config=None, as_msc: bool = True, custom_convert_map: dict | None = None):
    """An ONNX model (ModelProto, path or bytes) -> (MSCGraph, weights); see
    ``frontends.onnx.api.from_onnx``. onnx is imported only when this is called."""
    from .onnx.api import from_onnx as _from_onnx

    return _from_onnx(model, input_info, opset, trans_config, build_config, as_msc,
                      custom_convert_map)
