"""MSCGraph -> ONNX ModelProto, built with the onnx package's own helpers.

Each joint is written by its op's "onnx_codegen" row (``codegen/onnx/table.py``,
``codegen/onnx/nn.py``): one standard ONNX node where there is one, a small subgraph
otherwise. Weights become initializers (or external data), graph inputs keep their names and
their symbolic dims as ``dim_param``, and every model passes ``onnx.checker.check_model(...,
full_check=True)`` before it is returned::

    model = to_onnx(graph, weights, "out/model.onnx", opset=17)
    onnxruntime.InferenceSession("out/model.onnx").run(None, {"inp_0": x})
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np

from msc.errors import UnsupportedOpError, ValidationError
from msc.graph import MSCGraph, MSCJoint, MSCTensor
from msc.naming import UniqueNamer
from msc.progress import progress
from msc.relax.op.facts import load_facts
from msc.relax.op.registry import OPS

from ..joint import JointContext, find_weight, write_nodes
from ..qweight import QuantizedWeight, is_quantized
from .bf16 import bf16_detours
from .context import OnnxContext, onnx_dtype
from .functions import FunctionTable, domain_of
from .node import OnnxNode
from .outputs import tensor_value_info, write_outputs
from .passes.pipeline import run_passes
from .shapes import ShapeValues

__all__ = ["DEFAULT_OPSET", "MIN_OPSET", "OnnxWriter", "max_opset", "to_onnx"]

MIN_OPSET = 13
# The default: new enough for Gelu, LayerNormalization and the QDQ ops runtimes fuse, old
# enough that every runtime of the last two years runs it (onnxruntime has no kernel yet for
# some ops of the newest opsets).
DEFAULT_OPSET = 21
_UNSAFE = re.compile(r"[^0-9A-Za-z_.\-/]")


def max_opset() -> int:
    """The newest default-domain opset the installed onnx knows."""
    from onnx import defs

    return defs.onnx_opset_version()


def clean_name(name: str) -> str:
    """A model name as an ONNX value name: printable ASCII, no spaces or quotes."""
    return _UNSAFE.sub("_", str(name))[:200] or "v"


class OnnxWriter:
    """Writes the nodes, initializers, inputs and outputs of one graph."""

    def __init__(self, graph: MSCGraph, weights: dict | None, opset: int,
                 custom_domain: bool | str | None = None):
        self.graph, self.weights, self.opset = graph, weights, opset
        domain = domain_of(custom_domain)
        self.functions = FunctionTable(domain, opset) if domain else None
        self.namer = UniqueNamer()
        self.node_namer = UniqueNamer()
        self.nodes: list[OnnxNode] = []  # the passes take them over (passes/pipeline.py)
        self.inits: dict[str, np.ndarray] = {}
        self.const_data = self.inits  # value -> numbers, for constant folding in rows
        self.init_of: dict[str, str] = {}  # weight name -> initializer
        self.values: dict[str, list[str]] = {}  # graph node -> its output values
        self.tuples: set[str] = set()
        self.shapes = ShapeValues(graph)
        self.row_start = 0
        self.static: dict[str, list[int]] = {}  # value -> its static shape (graph tensors)
        self.dtypes: dict[str, str] = {}  # value -> its dtype (graph tensors)

    # ---- values --------------------------------------------------------------------------
    def name(self, hint: str) -> str:
        return self.namer(clean_name(hint))

    def value(self, node: MSCJoint, idx: int) -> str:
        values = self.values[node.name]
        return values[idx] if idx < len(values) else values[-1]

    def data(self, tensor: MSCTensor) -> np.ndarray | None:
        if self.weights is None:
            return None
        return find_weight(self.weights, tensor).reshape(tensor.shape).astype(
            tensor.dtype, copy=False)

    def quantized(self, tensor: MSCTensor) -> QuantizedWeight | None:
        """The int8 record of a weight quantized by compression.quantize, else None."""
        for key in (tensor.name, tensor.alias) if self.weights is not None else ():
            if key and key in self.weights:
                value = self.weights[key]
                return value if is_quantized(value) else None
        return None

    def dequantized(self, qweight: QuantizedWeight, hint: str) -> str:
        """An int8 initializer (zero point 0) read through DequantizeLinear: the form
        onnxruntime fuses with the QDQ activations around it into int8 kernels."""
        q = self.name(hint)
        self.inits[q] = qweight.q
        per_channel = qweight.scale.size > 1
        scale = qweight.scale if per_channel else qweight.scale.reshape(())
        s, z = self.name(f"{hint}_scale"), self.name(f"{hint}_zero_point")
        self.inits[s], self.inits[z] = scale, np.zeros(scale.shape, np.int8)
        out = self.name(f"{hint}_dq")
        attrs = {"axis": qweight.axis} if per_channel else {}
        self.nodes.append(OnnxNode("DequantizeLinear", [q, s, z], [out], attrs=attrs,
                                   name=self.node_namer(clean_name(f"{hint}_DequantizeLinear"))))
        return out

    def initializer(self, tensor: MSCTensor) -> str:
        qweight = self.quantized(tensor)
        if tensor.name not in self.init_of and qweight is not None:
            self.init_of[tensor.name] = self.dequantized(qweight, tensor.alias or tensor.name)
        if tensor.name not in self.init_of:
            data = self.data(tensor)
            if data is None:  # no weights: the shape is still right (random-free zeros)
                data = np.zeros(tensor.shape, dtype=tensor.dtype)
            name = self.name(tensor.alias or tensor.name)
            self.inits[name] = data
            self.init_of[tensor.name] = name
        return self.init_of[tensor.name]

    def constant(self, array: np.ndarray, hint: str) -> str:
        name = self.name(hint)
        self.inits[name] = array
        return name

    def emit(self, node: MSCJoint, op_type: str, inputs: list[str], n_out: int, domain: str,
             attrs: dict):
        outputs = [self.name(f"{node.name}_{op_type.lower()}") for _ in range(n_out)]
        self.nodes.append(OnnxNode(op_type, list(inputs), outputs, domain=domain, attrs=attrs,
                                   name=self.node_namer(clean_name(f"{node.name}_{op_type}"))))
        return outputs[0] if n_out == 1 else outputs

    # ---- joints --------------------------------------------------------------------------
    def write(self) -> None:
        load_facts("onnx_codegen")
        unlinked = runtime_values(self.graph)
        if unlinked:
            raise UnsupportedOpError(
                "the graph holds run-time shape values it does not link to their uses",
                items=unlinked, hint="import the model with its shapes known (input_info / "
                "static shapes), or export from the Relax module")
        for tensor in self.graph.get_inputs():
            node = self.graph.find_producer(tensor.name)
            self.values[node.name] = [self.name(tensor.alias or node.name)]
            self._note_shapes(node)
        extra = " (custom_domain wraps joints that have an ONNX expression; these have none)" \
            if self.functions is not None else ""
        write_nodes(self.graph, self._node, self.values, "the ONNX codegen",
                    "ops with no ONNX form are listed in msc/relax/op facts 'onnx_codegen'; "
                    "remove or replace these nodes" + extra)

    def _node(self, node: MSCJoint) -> None:
        if node.optype == "input":
            return
        if node.optype == "constant":
            self.values[node.name] = [self.initializer(node.weight_at("const"))]
            return self._note_shapes(node)
        if node.optype == "get_item":
            return self._get_item(node)
        ctx = OnnxContext(self, node)
        if node.optype == "tuple":
            self.tuples.add(node.name)
            self.values[node.name] = ctx.inputs
            return
        if node.optype == "shape":  # x.shape: its dims (symbolic ones from the inputs' Shape)
            text = node.attrs.get("dim_prims") or node.attrs.get("shape", "")
            if not text or "-1" in text.split(","):
                raise ctx.fail(f"shape {text!r} has symbolic dims and no prims to read them from")
            dims = self.shapes.elements(ctx, text)
            self.values[node.name] = [ctx.emit("Cast", [dims], to=onnx_dtype("int32"))]
            return self._note_shapes(node)
        self.row_start, first_init = len(self.nodes), len(self.inits)
        result = self._row(node).write(ctx)
        result = [result] if isinstance(result, str) else list(result)
        if self.functions is not None:
            self.functions.wrap(self, node.optype, self.row_start, first_init, result)
        self.values[node.name] = self._rename(node, result)
        self._note_shapes(node)

    def _note_shapes(self, node: MSCJoint) -> None:
        for value, tensor in zip(self.values[node.name], node.outputs):
            self.dtypes.setdefault(value, tensor.dtype)
            dims = ShapeValues.static_dims(tensor)
            if dims is not None:
                self.static.setdefault(value, dims)

    def _row(self, node: MSCJoint):
        op_def = OPS.get(node.optype)
        row = op_def.facts.get("onnx_codegen") if op_def is not None else None
        if row is None:
            raise UnsupportedOpError(f"no ONNX form for {node.optype!r}", op=node.optype,
                                     node=node.name)
        return row

    def _get_item(self, node: MSCJoint) -> None:
        index = JointContext(self.graph, node).raw("index", "int", 0)
        producer, _ = node.producer_and_idx_of(0)
        if producer.name in self.tuples or len(producer.outputs) > 1:
            self.values[node.name] = [self.values[producer.name][index]]
        else:  # the producer's value is one tensor (e.g. batch_norm's output 0)
            ctx = OnnxContext(self, node)
            self.values[node.name] = [ctx.input(min(index, len(node.inputs) - 1))]

    def _rename(self, node: MSCJoint, values: list[str]) -> list[str]:
        """Values made for this joint take the joint's name (``split_0``... for several)."""
        made = {o: n for n in self.nodes[self.row_start:] for o in n.outputs}
        shared = set(self.shapes.prims.values())  # later joints read them by these names
        renamed = {}
        for i, value in enumerate(values):
            if value not in made or value in renamed or value in shared:
                continue
            hint = node.name if len(values) == 1 else f"{node.name}_{i}"
            renamed[value] = self.name(hint)
        for spec in self.nodes[self.row_start:]:
            spec.inputs = [renamed.get(v, v) for v in spec.inputs]
            spec.outputs = [renamed.get(v, v) for v in spec.outputs]
        return [renamed.get(v, v) for v in values]

    # ---- the model -----------------------------------------------------------------------
    def graph_outputs(self) -> list[tuple[str, object]]:
        """(value, ValueInfoProto) per model-level output (``codegen/onnx/outputs.py``)."""
        return write_outputs(self)

    def values_of_inputs(self) -> list[str]:
        return [self.values[self.graph.find_producer(t.name).name][0]
                for t in self.graph.get_inputs()]


def runtime_values(graph: MSCGraph) -> list[dict]:
    """Values read at run time whose uses the MSCGraph does not record: a ``shape`` prim of no
    graph input, or a ``tensor_to_shape`` nobody consumes (its numbers went into attrs as
    placeholders). Such a graph cannot be written faithfully."""
    items = [{"op": "prim", "node": p.name, "why": "a run-time value, no input dim"}
             for p in graph.get_prims() if p.optype == "shape" and "producer" not in p.attrs]
    outputs = set(graph.output_names)
    read = {p.attrs.get("producer") for p in graph.get_prims()}  # values prims read
    for node in graph.get_nodes():
        if node.optype == "tensor_to_shape" and not node.children and node.name not in read and \
                not any(t.name in outputs for t in node.outputs):
            items.append({"op": node.optype, "node": node.name,
                          "why": "its values reach other nodes unlinked"})
    return items


def build_model(writer: OnnxWriter, producer: str = "msc"):
    """The ModelProto of a written graph (checked by the caller)."""
    from onnx import helper, numpy_helper

    outputs = writer.graph_outputs()
    specs = run_passes(writer.nodes, writer.inits, {v for v, _ in outputs}, writer.static,
                       writer.dtypes, writer.opset, writer.name).nodes
    nodes = [n.proto() for n in specs]
    inputs = [tensor_value_info(v, t) for v, t in zip(writer.values_of_inputs(),
                                                       writer.graph.get_inputs())]
    used = {v for n in specs for v in n.inputs} | {v for v, _ in outputs}
    graph = helper.make_graph(nodes, clean_name(writer.graph.name), inputs,
                              [info for _, info in outputs])
    kept = [(name, a) for name, a in writer.inits.items() if name in used]
    for name, array in progress(kept, desc="ONNX weights", unit="tensor"):
        # added in place: one copy of each weight into the proto, not two
        graph.initializer.add().CopyFrom(numpy_helper.from_array(
            np.require(array, requirements="C"), name))
    opsets = [helper.make_opsetid("", writer.opset)]
    functions, imports = writer.functions.model_parts() if writer.functions else ([], [])
    imported = {o.domain for o in opsets + imports}
    imports += [helper.make_opsetid(d, 1) for d in sorted({n.domain for n in specs
                                                            if n.domain} - imported)]
    model = helper.make_model(graph, opset_imports=opsets + imports, producer_name=producer,
                              functions=functions)
    # model-local functions came with IR version 8
    model.ir_version = max(helper.find_min_ir_version_for(opsets), 8 if functions else 0)
    if "bfloat16" in writer.dtypes.values() or any(
            a.dtype.name == "bfloat16" for a in writer.inits.values()):
        bf16_detours(model)
    return model


def _check_opset(opset: int | None) -> int:
    newest = max_opset()
    opset = min(DEFAULT_OPSET, newest) if opset is None else opset
    if not isinstance(opset, int) or not MIN_OPSET <= opset <= newest:
        raise ValidationError(f"opset {opset!r} is out of range", key="opset",
                              hint=f"pick {MIN_OPSET}..{newest} (the installed onnx's newest)")
    return opset


def to_onnx(graph: MSCGraph, weights: dict | None = None, path: str | os.PathLike | None = None,
            opset: int | None = None, external_data: int | bool | None = None,
            custom_domain: bool | str | None = None):
    """The graph as an ONNX ModelProto, checked (``full_check=True``); also saved at ``path``.

    ``opset``: 13 up to the installed onnx's newest (default 21). ``external_data``: weights go to
    ``<path>.data`` beside the model (True: every tensor above 1 KiB; an int: the size
    threshold in bytes; None: only when the model would pass protobuf's 2 GB limit).
    ``custom_domain``: True (domain ``"ai.msc"``) or a domain name: each joint ONNX has no
    single operator for is one node of that domain backed by a model-local ONNX function
    (``codegen/onnx/functions.py``); a joint with no ONNX expression at all raises
    UnsupportedOpError naming it.

    >>> model = to_onnx(graph, weights, "out/model.onnx", opset=17)   # doctest: +SKIP
    """
    writer = OnnxWriter(graph, weights, _check_opset(opset), custom_domain)
    writer.write()
    model = build_model(writer)
    if path is None:
        if _weight_bytes(model) > _TWO_GB:
            raise ValidationError("the model's weights pass protobuf's 2 GB limit",
                                  key="path", hint="give a path: the weights then go to "
                                  "external data beside it")
        _check(model, None)
        return model
    return _save(model, Path(path), external_data)


def _check(model, path: Path | None) -> None:
    from onnx import checker, shape_inference

    try:
        checker.check_model(str(path) if path is not None else model, full_check=True)
    except (checker.ValidationError, shape_inference.InferenceError) as err:
        raise ValidationError(f"the written model fails the ONNX checker: {err}",
                              file=str(path) if path else None,
                              hint="please report this graph (a codegen bug)") from err


_TWO_GB = 2 ** 31 - 2 ** 24  # protobuf's limit, less room for the graph itself


def _save(model, path: Path, external_data: int | bool | None):
    import onnx

    threshold = _threshold(external_data, _weight_bytes(model))
    path.parent.mkdir(parents=True, exist_ok=True)
    if threshold is None:
        tmp = path.with_name(path.name + ".tmp")
        onnx.save_model(model, str(tmp))
        os.replace(tmp, path)
    else:
        location = path.name + ".data"
        if (path.parent / location).exists():
            os.unlink(path.parent / location)  # save_model appends to an existing file
        onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                        location=location, size_threshold=threshold, convert_attribute=False)
    _check(model, path)
    return onnx.load(str(path), load_external_data=False) if threshold is not None else model


def _weight_bytes(model) -> int:
    return sum(len(t.raw_data) for t in model.graph.initializer)


def _threshold(external_data: int | bool | None, size: int) -> int | None:
    if external_data is None:
        return 1024 if size > _TWO_GB else None
    if external_data is True:
        return 1024
    if external_data is False:
        return None
    return int(external_data)
