"""The models of benchmarks/scaling.py: chains of a few op kinds, the same in ONNX, torch and
numpy, and a BERT-style encoder from a transformers config with random weights."""

from __future__ import annotations

import io

import numpy as np

# One row per op kind: (ONNX op, torch step, numpy step, weight shape or None). A step takes
# (x, weight); weights are drawn once per node that has one.
_KINDS = {
    "add": ("Add", lambda x, w: x + w, lambda x, w: x + w, (4,)),
    "relu": ("Relu", lambda x, w: x.relu(), lambda x, w: np.maximum(x, 0), None),
    "matmul": ("MatMul", lambda x, w: x @ w, lambda x, w: x @ w, (4, 4)),
    "mul": ("Mul", lambda x, w: x * w, lambda x, w: x * w, (4,)),
    "sigmoid": ("Sigmoid", lambda x, w: x.sigmoid(),
                lambda x, w: (1 / (1 + np.exp(-x))).astype(np.float32), None),
    "tanh": ("Tanh", lambda x, w: x.tanh(), lambda x, w: np.tanh(x), None),
    "neg": ("Neg", lambda x, w: -x, lambda x, w: -x, None),
    "transpose": ("Transpose", lambda x, w: x.t(), lambda x, w: x.T, None),
}
CYCLES = {
    "add_relu": ("add", "relu"),
    "mixed": ("matmul", "add", "sigmoid", "mul", "tanh", "neg", "transpose", "transpose"),
}


class Chain:
    """``size`` nodes cycling through the kinds of ``CYCLES[kind]`` on a [1, 4] input."""

    def __init__(self, kind: str, size: int, seed: int = 0):
        if kind not in CYCLES:
            raise SystemExit(f"unknown chain kind {kind!r}; known: {', '.join(CYCLES)}")
        cycle = CYCLES[kind]
        self.ops = [cycle[i % len(cycle)] for i in range(size)]
        rng = np.random.default_rng(seed)
        self.weights = [None if _KINDS[op][3] is None else
                        (0.5 * rng.standard_normal(_KINDS[op][3])).astype(np.float32)
                        for op in self.ops]

    @staticmethod
    def input(seed: int = 1) -> np.ndarray:
        return np.random.default_rng(seed).standard_normal((1, 4)).astype(np.float32)

    def reference(self, x: np.ndarray) -> np.ndarray:
        for op, w in zip(self.ops, self.weights):
            x = _KINDS[op][2](x, w)
        return x

    def onnx(self):
        from onnx import TensorProto, helper, numpy_helper

        nodes, inits, prev = [], [], "x"
        for i, (op, w) in enumerate(zip(self.ops, self.weights)):
            inputs = [prev]
            if w is not None:
                inits.append(numpy_helper.from_array(w, f"w{i}"))
                inputs.append(f"w{i}")
            nodes.append(helper.make_node(_KINDS[op][0], inputs, [f"t{i}"], name=f"n{i}"))
            prev = f"t{i}"
        graph = helper.make_graph(
            nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
            [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [1, 4])], inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])

    def torch(self):
        import torch

        class ChainModule(torch.nn.Module):
            def __init__(self, ops, weights):
                super().__init__()
                self.ops = ops
                self.slots = _slots(weights)
                self.w = torch.nn.ParameterList(
                    [torch.nn.Parameter(torch.from_numpy(w)) for w in weights if w is not None])

            def forward(self, x):
                for op, slot in zip(self.ops, self.slots):
                    x = _KINDS[op][1](x, None if slot is None else self.w[slot])
                return x

        return ChainModule(self.ops, self.weights).eval()


def _slots(weights: list) -> list:
    """Index of each node's weight among the weights, None for nodes without one."""
    slots, k = [], 0
    for w in weights:
        slots.append(None if w is None else k)
        k += w is not None
    return slots


class Transformer:
    """A BERT-style encoder (transformers ``BertModel``, random weights, no download):
    ``layers`` layers of ``hidden`` with heads of 64, the last hidden state as output."""

    def __init__(self, layers: int = 24, hidden: int = 256, seq: int = 128, seed: int = 0):
        import torch
        import transformers

        transformers.logging.set_verbosity_error()
        torch.manual_seed(seed)
        config = transformers.BertConfig(
            vocab_size=1000, hidden_size=hidden, num_hidden_layers=layers,
            num_attention_heads=max(hidden // 64, 1), intermediate_size=4 * hidden,
            max_position_embeddings=max(seq, 128))
        self.bert = transformers.BertModel(config, add_pooling_layer=False).eval()
        self.seq = seq
        self.ids = np.random.default_rng(seed).integers(0, 1000, (1, seq)).astype(np.int64)

    def torch(self):
        import torch

        class Encoder(torch.nn.Module):
            def __init__(self, bert):
                super().__init__()
                self.bert = bert

            def forward(self, ids):
                return self.bert(input_ids=ids).last_hidden_state

        return Encoder(self.bert).eval()

    def input_info(self) -> list:
        return [((1, self.seq), "int64")]

    def inputs(self) -> list:
        return [self.ids]

    def reference(self) -> np.ndarray:
        import torch

        with torch.no_grad():
            return self.torch()(torch.from_numpy(self.ids)).numpy()

    def onnx(self):
        import onnx
        import torch

        buffer = io.BytesIO()
        torch.onnx.export(self.torch(), (torch.from_numpy(self.ids),), buffer,
                          opset_version=17, dynamo=False, input_names=["ids"],
                          output_names=["hidden"])
        return onnx.load_from_string(buffer.getvalue())
