"""bfloat16 through float32 where onnxruntime has no bfloat16 kernel.

ONNX types most ops for bfloat16, but onnxruntime's CPU provider registers bfloat16 kernels
for few of them (no Relu, Add, Sub, Exp...), so a bfloat16 model written op for op would not
load there. Each default-domain node outside ``ORT_BF16`` that reads or makes bfloat16 values
runs on float32 twins instead: a Cast to float32 where a bfloat16 value enters such a region,
a Cast back where a value leaves it (a graph output, or a reader that has a bfloat16 kernel).
Inside a region values stay float32, so a chain rounds to bfloat16 once, at its end, as a
float32 reference cast to bfloat16 does.
"""

from __future__ import annotations

from msc.naming import UniqueNamer

__all__ = ["ORT_BF16", "bf16_detours", "ort_registry_bf16"]

# Default-domain ops onnxruntime 1.32's CPU provider runs in bfloat16 (its kernel registry,
# ``ort_registry_bf16()``; tests/codegen/onnx/test_onnx_bf16.py compares the two).
ORT_BF16 = frozenset({
    "BitCast", "Cast", "Celu", "Compress", "Concat", "ConcatFromSequence", "ConstantOfShape",
    "DynamicSlice", "Einsum", "Flatten", "Gather", "GatherElements", "GatherND", "Identity",
    "If", "IsInf", "IsNaN", "LayerNormalization", "Loop", "OneHot", "Optional",
    "OptionalGetElement", "OptionalHasElement", "Pad", "RandomNormalLike",
    "RandomUniformLike", "Reshape", "ReverseSequence", "Scan", "Scatter", "ScatterElements",
    "ScatterND", "SequenceAt", "SequenceConstruct", "SequenceEmpty", "SequenceErase",
    "SequenceInsert", "SequenceLength", "Shape", "Shrink", "Sign", "Slice", "Split",
    "SplitToSequence", "Squeeze", "TensorScatter", "Transpose", "Unique", "Unsqueeze",
})


def ort_registry_bf16() -> set[str] | None:
    """The default-domain ops the installed onnxruntime's CPU provider registers a bfloat16
    kernel for (None without onnxruntime)."""
    try:
        from onnxruntime.capi import _pybind_state
    except ImportError:
        return None
    return {d.op_name for d in _pybind_state.get_all_opkernel_def()
            if d.provider == "CPUExecutionProvider" and d.domain in ("", "ai.onnx") and
            any("bfloat16" in t for ts in d.type_constraints.values() for t in ts)}


def _types(model) -> dict[str, int]:
    from onnx import shape_inference

    inferred = shape_inference.infer_shapes(model)
    g = inferred.graph
    types = {t.name: t.data_type for t in g.initializer}
    for v in [*g.input, *g.value_info, *g.output]:
        if v.type.WhichOneof("value") == "tensor_type":
            types[v.name] = v.type.tensor_type.elem_type
    return types


def _used(nodes) -> set[str]:
    """Every value a node reads, in subgraphs too."""
    from onnx import AttributeProto

    names = set()
    for node in nodes:
        names.update(node.input)
        for attr in node.attribute:
            graphs = [attr.g] if attr.type == AttributeProto.GRAPH else list(attr.graphs)
            for sub in graphs:
                names |= _used(sub.node) | {o.name for o in sub.output}
    return names


class _Detour:
    def __init__(self, types: dict[str, int], taken: set[str], inits: dict):
        from onnx import TensorProto

        self.bf16, self.f32 = TensorProto.BFLOAT16, TensorProto.FLOAT
        self.types, self.namer, self.inits = types, UniqueNamer(taken), inits
        self.new_inits: list = []
        self.twin: dict[str, str] = {}  # bfloat16 value -> its float32 twin
        self.nodes: list = []
        self.backs: dict[str, object] = {}  # bfloat16 value -> the Cast back making it


    def _cast(self, src: str, dst: str, to: int):
        from onnx import helper

        return helper.make_node("Cast", [src], [dst], name=self.namer(f"{dst}_Cast"), to=to)

    def needs(self, node) -> bool:
        return node.domain in ("", "ai.onnx") and node.op_type not in ORT_BF16 and any(
            self.types.get(v) == self.bf16 for v in [*node.input, *node.output] if v)

    def float_input(self, value: str) -> str:
        from onnx import numpy_helper

        if value not in self.twin:
            self.twin[value] = self.namer(f"{value}_f32")
            if value in self.inits:  # a float32 copy of the weight, no Cast node
                data = numpy_helper.to_array(self.inits[value]).astype("float32")
                self.new_inits.append(numpy_helper.from_array(data, self.twin[value]))
            else:
                self.nodes.append(self._cast(value, self.twin[value], self.f32))
        return self.twin[value]

    def rewrite(self, node) -> None:
        for i, value in enumerate(node.input):
            if value and self.types.get(value) == self.bf16:
                node.input[i] = self.float_input(value)
        for attr in node.attribute:
            if attr.name == "dtype" and attr.i == self.bf16:
                attr.i = self.f32
        self.nodes.append(node)
        for i, value in enumerate(node.output):
            if value and self.types.get(value) == self.bf16:
                node.output[i] = self.twin[value] = self.namer(f"{value}_f32")
                self.backs[value] = self._cast(node.output[i], value, self.bf16)
                self.nodes.append(self.backs[value])


def bf16_detours(model) -> None:
    """Rewrite ``model`` (in place) so that onnxruntime runs its bfloat16 nodes."""
    from onnx import NodeProto, TensorProto

    g = model.graph
    types = _types(model)
    if TensorProto.BFLOAT16 not in types.values():
        return
    taken = set(types) | {o for n in g.node for o in n.output} | {n.name for n in g.node}
    detour = _Detour(types, taken, {t.name: t for t in g.initializer})
    for original in g.node:
        node = NodeProto()
        node.CopyFrom(original)
        if detour.needs(node):
            detour.rewrite(node)
        else:
            detour.nodes.append(node)
    needed = _used(detour.nodes) | {o.name for o in g.output}
    kept = [n for n in detour.nodes
            if not (n.op_type == "Cast" and n.output[0] in detour.backs and
                    detour.backs[n.output[0]] is n and n.output[0] not in needed)]
    del g.node[:]
    g.node.extend(kept)
    g.initializer.extend(detour.new_inits)
    used = _used(kept)
    kept_inits = [t for t in g.initializer if t.name in used]
    if len(kept_inits) < len(g.initializer):  # bfloat16 weights only detoured nodes read
        del g.initializer[:]
        g.initializer.extend(kept_inits)

