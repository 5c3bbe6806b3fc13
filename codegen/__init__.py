"""msc codegen: an MSCGraph (+ weights) as runnable source.

    from msc.codegen import to_relax, to_torch, save_baseline
    mod = to_relax(graph, weights, build_folder="out/relax")   # BlockBuilder script + .npz
    model = to_torch(graph, weights, build_folder="out/torch") # nn.Module source + weights
    proto = to_onnx(graph, weights, "out/model.onnx")          # onnx.ModelProto, checked
    save_baseline("out/torch", inputs, golden)                 # then: python out/torch/main.py
"""

from .baseline import save_baseline
from .relax.gen import to_relax

__all__ = ["save_baseline", "to_onnx", "to_relax", "to_torch"]


def __getattr__(name):
    if name == "to_torch":  # torch is imported only when the torch codegen is used
        from .torch.gen import to_torch

        return to_torch
    if name == "to_onnx":  # and onnx only when the ONNX codegen is used
        from .onnx.writer import to_onnx

        return to_onnx
    raise AttributeError(name)
