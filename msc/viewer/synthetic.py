"""A transformer-shaped MSCGraph of any size, for the viewer's benchmark and demo: big graphs
without a big model file.

``decoder_graph(layers)`` has 21 joints per decoder layer (pre-norm attention + gated MLP),
named by module path (``layers.3.self_attn.q_proj``) or, with ``flat=True``, the way
from_relax names joints (``linear_12``), so both grouping paths (scopes, cut blocks) are
exercised.

    >>> len(decoder_graph(2).node_names)
    46
"""

from __future__ import annotations

from ..graph import MSCGraph, MSCJoint, MSCTensor
from ..naming import UniqueNamer

__all__ = ["decoder_graph"]

HIDDEN, SEQ, HEADS = 64, 16, 4

# One decoder layer: (module path, optype, input keys, output shape kind). Keys name earlier
# rows of the layer; "x" is the layer input.
_LAYER = (
    ("input_layernorm", "nn.layer_norm", ["x"], "h"),
    ("self_attn.q_proj", "msc.linear", ["input_layernorm"], "h"),
    ("self_attn.k_proj", "msc.linear", ["input_layernorm"], "h"),
    ("self_attn.v_proj", "msc.linear", ["input_layernorm"], "h"),
    ("self_attn.q_heads", "reshape", ["self_attn.q_proj"], "heads"),
    ("self_attn.k_heads", "reshape", ["self_attn.k_proj"], "heads"),
    ("self_attn.v_heads", "reshape", ["self_attn.v_proj"], "heads"),
    ("self_attn.scores", "msc.matmul", ["self_attn.q_heads", "self_attn.k_heads"], "scores"),
    ("self_attn.softmax", "nn.softmax", ["self_attn.scores"], "scores"),
    ("self_attn.context", "msc.matmul", ["self_attn.softmax", "self_attn.v_heads"], "heads"),
    ("self_attn.merge", "reshape", ["self_attn.context"], "h"),
    ("self_attn.o_proj", "msc.linear", ["self_attn.merge"], "h"),
    ("residual_attn", "add", ["x", "self_attn.o_proj"], "h"),
    ("post_attention_layernorm", "nn.layer_norm", ["residual_attn"], "h"),
    ("mlp.gate_proj", "msc.linear", ["post_attention_layernorm"], "mlp"),
    ("mlp.up_proj", "msc.linear", ["post_attention_layernorm"], "mlp"),
    ("mlp.act", "nn.silu", ["mlp.gate_proj"], "mlp"),
    ("mlp.mul", "multiply", ["mlp.act", "mlp.up_proj"], "mlp"),
    ("mlp.down_proj", "msc.linear", ["mlp.mul"], "h"),
    ("residual_mlp", "add", ["residual_attn", "mlp.down_proj"], "h"),
    ("identity", "reshape", ["residual_mlp"], "h"),
)
_SHAPES = {"h": ([1, SEQ, HIDDEN], "NCW"), "mlp": ([1, SEQ, 4 * HIDDEN], "NCW"),
           "heads": ([1, HEADS, SEQ, HIDDEN // HEADS], "NCHW"),
           "scores": ([1, HEADS, SEQ, SEQ], "NCHW")}


class _Graph:
    def __init__(self, flat: bool):
        self.flat, self.nodes, self.weights = flat, [], 0
        self.namer = UniqueNamer(reserved=["input_ids"])

    def add(self, path: str, optype: str, inputs: list, kind: str) -> MSCJoint:
        base = optype.split(".")[-1]
        name = self.namer(base) if self.flat and optype != "input" else path
        shape, layout = _SHAPES[kind]
        weights = {}
        if optype == "msc.linear":
            out_dim = shape[-1]
            in_dim = inputs[0].output_at(0).shape[-1]
            weights["weight"] = MSCTensor(self._const(), "float32", "OI", [out_dim, in_dim])
        out = MSCTensor(f"{name}:0", "float32", layout, list(shape))
        joint = MSCJoint(len(self.nodes), name, "", optype, {}, [(p, 0) for p in inputs],
                         [out], weights)
        self.nodes.append(joint)
        return joint

    def _const(self) -> str:
        self.weights += 1
        return f"const_{self.weights}"


def decoder_graph(layers: int, flat: bool = False) -> MSCGraph:
    """Embedding, ``layers`` decoder layers, a final norm and the head."""
    g = _Graph(flat)
    x = g.add("input_ids", "input", [], "h")
    x = g.add("embed_tokens", "nn.layer_norm", [x], "h")
    for i in range(layers):
        rows = {"x": x}
        for path, optype, keys, kind in _LAYER:
            rows[path] = g.add(f"layers.{i}.{path}", optype, [rows[k] for k in keys], kind)
        x = rows["identity"]
    x = g.add("norm", "nn.layer_norm", [x], "h")
    head = g.add("lm_head", "msc.linear", [x], "h")
    return MSCGraph("decoder", g.nodes, ["input_ids:0"], [f"{head.name}:0"])
