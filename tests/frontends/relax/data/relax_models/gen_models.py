"""Regenerate the Relax modules TVM 0.27's importers make (data for
tests/frontends/relax/test_from_relax_models.py).

Run with the venv's TVM, torch and onnx:
``.venv/bin/python tests/frontends/relax/data/relax_models/gen_models.py``
(one subprocess per model: TVM may crash while printing). Each ``<name>.tvmscript`` is the
text ``mod.script()`` prints, followed by the constants it references as a literal metadata
section (TVM 0.27 cannot print its own metadata); the constants are recovered from the TVM
objects by ``frontends/relax/tvm_module.py``, which checks their order.
"""

from __future__ import annotations

import base64
import json
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).parent
ROOT = HERE.parents[4]


def _torch_models():
    import torch
    from torch import nn

    class CnnBn(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1, bias=False)
            self.bn = nn.BatchNorm2d(8)
            self.conv2 = nn.Conv2d(8, 8, 3)
            self.fc = nn.Linear(8 * 2 * 2, 10)

        def forward(self, x):
            x = torch.relu(self.bn(self.conv(x)))
            x = torch.nn.functional.max_pool2d(x, 2)
            x = torch.relu(self.conv2(x))
            return self.fc(torch.flatten(x, 1))

    class Mlp(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(16, 32), nn.Linear(32, 4)
            self.drop = nn.Dropout(0.1)

        def forward(self, x):
            return torch.softmax(self.fc2(self.drop(torch.relu(self.fc1(x)))), dim=-1)

    class ResBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(8)
            self.conv2 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(8)
            self.fc = nn.Linear(8, 5)

        def forward(self, x):
            y = torch.relu(self.bn1(self.conv1(x)))
            y = torch.relu(self.bn2(self.conv2(y)) + x)
            y = torch.nn.functional.adaptive_avg_pool2d(y, 1)
            return self.fc(torch.flatten(y, 1))

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)

        def forward(self, x):
            return self.layer(x)

    class Embed(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(20, 8)
            self.fc = nn.Linear(8, 3)

        def forward(self, ids):
            return self.fc(self.emb(ids))

    class Attention(nn.Module):
        def forward(self, q, k, v, mask):
            sdpa = torch.nn.functional.scaled_dot_product_attention
            return sdpa(q, k, v), sdpa(q, k, v, attn_mask=mask)

    return {"cnn_bn": (CnnBn, [(1, 3, 8, 8)], "fx"), "mlp": (Mlp, [(2, 16)], "fx"),
            "attention_fx": (Attention, [(1, 2, 4, 8)] * 3 + [(1, 2, 4, 4)], "fx"),
            "resnet_block": (ResBlock, [(1, 8, 6, 6)], "export"),
            "encoder_layer": (Encoder, [(1, 4, 16)], "export"),
            "embedding_fx": (Embed, [(2, 5)], "fx_ids")}


def _from_torch(name: str):
    import torch
    from tvm.relax.frontend.torch import from_exported_program, from_fx

    torch.manual_seed(0)
    cls, shapes, how = _torch_models()[name]
    model = cls().eval()
    if how.startswith("fx"):
        dtype = "int64" if how == "fx_ids" else "float32"
        return from_fx(torch.fx.symbolic_trace(model), [(s, dtype) for s in shapes])
    args = tuple(torch.randn(*s) for s in shapes)
    with torch.no_grad():
        return from_exported_program(torch.export.export(model, args))


def _dynamic_onnx():
    """An MLP with a dynamic batch, built with onnx.helper (MatMul/Add/Relu/Gemm)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from tvm.relax.frontend.onnx import from_onnx

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype("float32"), n)
             for n, s in (("w1", (8, 16)), ("b1", (16,)), ("w2", (4, 16)), ("b2", (4,)))]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]),
             helper.make_node("Add", ["h", "b1"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["r"]),
             helper.make_node("Gemm", ["r", "w2", "b2"], ["y"], transB=1)]
    graph = helper.make_graph(
        nodes, "dyn_mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["bz", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["bz", 4])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    return from_onnx(model, keep_params_in_input=False)


def _dynamic_conv():
    """torch.export with a dynamic batch: conv -> relu -> flatten -> linear."""
    import torch
    from torch import nn
    from tvm.relax.frontend.torch import from_exported_program

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 4 * 4, 2))
    batch = torch.export.Dim("batch", min=2, max=64)
    program = torch.export.export(model.eval(), (torch.randn(2, 3, 6, 6),),
                                  dynamic_shapes=({0: batch},))
    return from_exported_program(program)


def _metadata_section(arrays, key: str) -> str:
    entries = [{"dtype": str(a.dtype), "shape": list(a.shape),
                "data": base64.b64encode(a.astype(a.dtype.newbyteorder("<")).tobytes())
                .decode()} for a in arrays]
    return f"metadata = {json.dumps({key: entries})}\n"


def generate(name: str) -> None:
    sys.path.insert(0, str(ROOT))
    from msc.frontends.relax import tvm_module

    makers = {"dynamic_mlp_onnx": _dynamic_onnx, "dynamic_conv_export": _dynamic_conv}
    mod = makers[name]() if name in makers else _from_torch(name)
    text = mod.script()
    funcs = {gv.name_hint: f for gv, f in mod.functions.items()}
    order = tvm_module._printed_functions(text, list(funcs))
    arrays = [tvm_module._to_numpy(c) for c in tvm_module._constants(funcs, order)]
    keys = set(tvm_module._META_KEY.findall(text))
    if keys:
        text += "\n" + _metadata_section(arrays, keys.pop())
    (HERE / f"{name}.tvmscript").write_text(text)
    print(f"wrote {name}.tvmscript ({len(arrays)} constants)")


NAMES = ["cnn_bn", "mlp", "attention_fx", "resnet_block", "encoder_layer", "embedding_fx", "dynamic_mlp_onnx",
         "dynamic_conv_export"]

if __name__ == "__main__":
    if len(sys.argv) > 1:
        generate(sys.argv[1])
    else:
        for model_name in NAMES:
            subprocess.run([sys.executable, __file__, model_name], check=True)
