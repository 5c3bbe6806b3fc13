"""Regenerate the TVM 0.27 reference texts in this folder (needs tvm, torch, onnx).

    .venv/bin/python tests/relax/data/tvm027/gen_tvm027.py

Each model gives ``<name>.tvmscript`` (``mod.script()`` as TVM 0.27 prints it) and, when it
has constants, ``<name>.npz`` with the values of ``metadata["ir.GenericConst"][i]`` under key
``"i"``. ``<name>.tvmmeta`` is ``mod.script(show_meta=True)`` where TVM 0.27 can print it: it
can for tensors kept in attributes (``"params"``, keyed ``ffi.Tensor``), but it crashes
serializing any ``ir.GenericConst`` (its ``ty`` holds IntImms whose BigInt value tvm-ffi's
ToJSONGraph cannot write). Each model runs in its own subprocess because TVM may crash.
"""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = ["fx_cnn", "fx_mlp", "fx_transformer", "ep_cnn", "ep_mlp", "ep_transformer",
          "ep_cnn_dynamic", "onnx_conv", "onnx_conv_dynamic", "legalized_mlp",
          "params_mlp", "params_cnn"]
INLINE = ("bool", "int8", "int16", "int32", "int64", "float16", "float32", "float64")


def torch_models():
    import torch
    from torch import nn

    class CNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 6, 3)
            self.bn = nn.BatchNorm2d(6)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(6, 4)

        def forward(self, x):
            x = torch.relu(self.bn(self.conv(x)))
            x = self.pool(x).flatten(1)
            return self.fc(x), torch.clamp(x, 0, 6)

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1, self.l2 = nn.Linear(64, 32), nn.Linear(32, 10)

        def forward(self, x):
            return self.l2(torch.relu(self.l1(x)))

    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    return {"cnn": (CNN().eval(), (1, 3, 10, 10)), "mlp": (MLP().eval(), (1, 64)),
            "transformer": (layer.eval(), (1, 4, 16))}


class _TraceableAttention:
    """nn.MultiheadAttention's math with its own weights in fx-traceable ops (torch's module
    branches on tensor properties, which torch.fx cannot trace)."""

    @staticmethod
    def wrap(mha, batch, length):
        import torch.nn.functional as F
        from torch import nn

        class Attention(nn.Module):
            def __init__(self):
                super().__init__()
                self.in_proj = nn.Linear(mha.embed_dim, 3 * mha.embed_dim)
                self.in_proj.weight, self.in_proj.bias = mha.in_proj_weight, mha.in_proj_bias
                self.out_proj = nn.Linear(mha.embed_dim, mha.embed_dim)
                self.out_proj.weight, self.out_proj.bias = mha.out_proj.weight, \
                    mha.out_proj.bias

            def forward(self, q, k, v, **_kw):
                heads, dim = mha.num_heads, mha.embed_dim // mha.num_heads
                qkv = self.in_proj(q).chunk(3, dim=-1)
                q, k, v = [qkv[i].reshape(batch, length, heads, dim).transpose(1, 2)
                           for i in range(3)]
                out = F.scaled_dot_product_attention(q, k, v)
                out = out.transpose(1, 2).reshape(batch, length, heads * dim)
                return self.out_proj(out), None

        return Attention()


def trace_fx(model, shape):
    import torch
    from torch import fx

    if hasattr(model, "self_attn"):
        torch.backends.mha.set_fastpath_enabled(False)
        model.self_attn = _TraceableAttention.wrap(model.self_attn, shape[0], shape[1])
        graph = fx.symbolic_trace(model, concrete_args={
            "src_mask": None, "src_key_padding_mask": None, "is_causal": False})
        for node in list(graph.graph.nodes):
            if getattr(node.target, "__name__", "") in ("_assert", "_assert_is_none"):
                graph.graph.erase_node(node)
        graph.graph.eliminate_dead_code()
        for node in list(graph.graph.nodes):
            if node.op == "placeholder" and not node.users:
                graph.graph.erase_node(node)
        graph.recompile()
        return graph
    return fx.symbolic_trace(model)


def build(name):
    import tvm  # noqa: F401
    from tvm import relax

    kind, model_name = name.split("_", 1)
    if kind == "params":  # weights kept in R.func_attr({"params": [...]})
        import torch
        from tvm.relax.frontend.torch import from_exported_program

        model, shape = torch_models()[model_name]
        ep = torch.export.export(model, (torch.randn(*shape),))
        return from_exported_program(ep, keep_params_as_input=True)
    if kind == "onnx":
        return onnx_module(model_name.endswith("dynamic"))
    if kind == "legalized":
        return relax.transform.LegalizeOps()(_small_mlp())
    dynamic = model_name.endswith("_dynamic")
    model, shape = torch_models()[model_name.replace("_dynamic", "")]
    if kind == "fx":
        from tvm.relax.frontend.torch import from_fx

        return from_fx(trace_fx(model, shape), [(list(shape), "float32")])
    import torch
    from tvm.relax.frontend.torch import from_exported_program

    if dynamic:
        batch = torch.export.Dim("batch", min=2, max=64)
        ep = torch.export.export(model, (torch.randn(4, *shape[1:]),),
                                 dynamic_shapes=({0: batch},))
    else:
        ep = torch.export.export(model, (torch.randn(*shape),))
    return from_exported_program(ep)


def _small_mlp():
    """A two-op module to legalize: R.matmul + R.nn.relu become call_tir + T.prim_func."""
    from tvm import relax

    x = relax.Var("x", relax.TensorType((2, 8), "float32"))
    w = relax.Var("w", relax.TensorType((8, 4), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            lv = bb.emit(relax.op.matmul(x, w))
            gv = bb.emit_output(relax.op.nn.relu(lv))
        bb.emit_func_output(gv)
    return bb.get()


def onnx_module(dynamic):
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    from tvm.relax.frontend.onnx import from_onnx

    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype("float32"), "W")
    b = numpy_helper.from_array(rng.standard_normal((4,)).astype("float32"), "B")
    nodes = [
        helper.make_node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1], strides=[1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"], axis=1),
        helper.make_node("Softmax", ["f"], ["y"], axis=1),
    ]
    batch = "N" if dynamic else 1
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 64])], [w, b])
    return from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))


def metadata_constants(mod):
    """Non-inline constants in the order TVM's printer numbers them (functions sorted as
    printed, then bindings and call arguments left to right)."""
    from tvm import ir, relax

    found = []

    def visit(e):
        if isinstance(e, ir.GenericConst):
            scalar = len(e.value.shape) == 0 and str(e.value.dtype) in INLINE
            if not scalar and not any(c.same_as(e) for c in found):
                found.append(e)
        elif isinstance(e, relax.Call):
            for a in e.args:
                visit(a)
        elif isinstance(e, relax.Tuple):
            for f in e.fields:
                visit(f)
        elif isinstance(e, relax.TupleGetItem):
            visit(e.tuple_value)
        elif isinstance(e, relax.SeqExpr):
            for block in e.blocks:
                for b in block.bindings:
                    visit(b.value)
            visit(e.body)
        elif isinstance(e, relax.Function):
            visit(e.body)

    items = sorted(mod.functions.items(), key=lambda kv: (
        kv[0].name_hint == "main", not isinstance(kv[1], relax.Function), kv[0].name_hint))
    for _, func in items:
        if isinstance(func, relax.Function):
            visit(func)
    return [c.value.numpy() for c in found]


def generate(name, show_meta=False):
    import numpy as np

    mod = build(name)
    if show_meta:  # may crash TVM (see above): run last, in its own process
        text = mod.script(show_meta=True)
        with open(os.path.join(HERE, f"{name}.tvmmeta"), "w") as f:
            f.write(text + "\n")
        return
    text = mod.script()
    with open(os.path.join(HERE, f"{name}.tvmscript"), "w") as f:
        f.write(text + "\n")
    arrays = {str(i): c for i, c in enumerate(metadata_constants(mod))}
    # Tensors in attributes print as metadata["ffi.Tensor"][i], in attribute order.
    attrs = mod["main"].attrs if "main" in [g.name_hint for g in mod.functions] else None
    tensors = list(attrs["params"]) if attrs is not None and "params" in attrs else []
    arrays.update({f"ffi.Tensor.{i}": t.numpy() for i, t in enumerate(tensors)})
    if arrays:
        np.savez(os.path.join(HERE, f"{name}.npz"), **arrays)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        generate(sys.argv[1], "--meta" in sys.argv)
    else:
        for model in MODELS:
            subprocess.run([sys.executable, __file__, model], check=True)
            meta = subprocess.run([sys.executable, __file__, model, "--meta"], check=False,
                                  capture_output=True)
            if meta.returncode:
                path = os.path.join(HERE, f"{model}.tvmmeta")
                if os.path.exists(path):
                    os.remove(path)
            print("wrote", model, "(no show_meta text)" if meta.returncode else "")
