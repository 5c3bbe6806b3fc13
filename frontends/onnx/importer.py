"""ONNX ModelProto -> Relax IRModule: one dispatch loop over the graph's nodes.

    mod, weights = OnnxImporter(model, input_info={"data": [1, 3, 224, 224]}).convert()

Inputs become params (``dim_param`` dims become named ``tir.Var``s, shared by name),
initializers become Constants over the loaded arrays (external data is memory-mapped from its
file), and every node goes through the converter its op type and opset select (opset.py).
Ops that cannot be converted are collected; one UnsupportedOpError lists them all.
"""

from __future__ import annotations

import os
import re
from collections import Counter

import numpy as np
import onnx
from onnx import external_data_helper, helper, numpy_helper

from msc import relax
from msc.errors import MSCError, UnsupportedOpError, ValidationError
from msc.relax.expr import Expr, TupleGetItem
from msc.relax.struct_info import TupleStructInfo
from msc.relax.transform.dead_code_elimination import remove_all_unused
from msc.tir import expr as tir

from . import opset as opsets
from .attrs import node_attrs, schema_of
from .context import Context, OnnxNode
from .dtypes import relax_dtype

__all__ = ["OnnxImporter", "load_model", "sanitize"]


# --------------------------------------------------------------------------------------------
# Loading.

def load_model(model) -> tuple[onnx.ModelProto, str]:
    """A ModelProto, a path or serialized bytes -> (ModelProto, directory of its data files)."""
    if isinstance(model, onnx.ModelProto):
        return model, ""
    if isinstance(model, (bytes, bytearray)):
        return onnx.load_from_string(bytes(model)), ""
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if not os.path.isfile(path):
            raise ValidationError(f"ONNX model file {path!r} does not exist", file=path)
        # External data stays in its files: initializer_array maps it without a copy.
        return onnx.load(path, load_external_data=False), os.path.dirname(os.path.abspath(path))
    raise ValidationError(f"cannot read an ONNX model from {type(model).__name__}",
                          hint="pass an onnx.ModelProto, a file path or serialized bytes")


def initializer_array(tensor: onnx.TensorProto, base_dir: str) -> np.ndarray:
    """The tensor's data as numpy, read once; external data is memory-mapped."""
    if not external_data_helper.uses_external_data(tensor):
        return numpy_helper.to_array(tensor)
    info = external_data_helper.ExternalDataInfo(tensor)
    path = os.path.realpath(os.path.join(base_dir, info.location))
    if not path.startswith(os.path.realpath(base_dir) + os.sep):
        raise ValidationError(f"external data {info.location!r} lies outside the model's "
                              "directory", tensor=tensor.name)
    if not os.path.isfile(path):
        raise ValidationError(f"external data file {path!r} is missing", tensor=tensor.name,
                              hint="keep the data files next to the model (paths are relative)")
    dtype = helper.tensor_dtype_to_np_dtype(tensor.data_type)
    if dtype.kind not in "biuf" or dtype.itemsize * 8 < 8:
        return numpy_helper.to_array(tensor, base_dir)
    shape = tuple(tensor.dims)
    return np.memmap(path, dtype=dtype.newbyteorder("<"), mode="r", offset=info.offset or 0,
                     shape=shape)


_NOT_IDENT = re.compile(r"\W")


def sanitize(name: str, fallback: str = "x") -> str:
    """A valid identifier for a Relax var from an ONNX value name."""
    name = _NOT_IDENT.sub("_", name) or fallback
    return name if not name[0].isdigit() else f"{fallback}_{name}"


# --------------------------------------------------------------------------------------------
# Inputs.

def _input_overrides(graph_inputs: list, input_info) -> dict:
    """input_info (dict by name, or a list in input order) -> {name: (shape, dtype|None)}."""
    if input_info is None:
        return {}
    if not isinstance(input_info, dict):
        input_info = {v.name: info for v, info in zip(graph_inputs, input_info)}
    names = {v.name for v in graph_inputs}
    out = {}
    for name, info in input_info.items():
        if name not in names:
            raise ValidationError(f"input_info names {name!r}, which is not a graph input",
                                  hint=f"graph inputs: {sorted(names)}")
        shape_dtype = len(info) == 2 and isinstance(info[1], str) and isinstance(
            info[0], (list, tuple))
        out[name] = (list(info[0]), info[1]) if shape_dtype else (list(info), None)
    return out


class _Dims:
    """Named symbolic dims: the same name gives the same tir.Var."""

    def __init__(self):
        self.vars: dict[str, tir.Var] = {}

    def __call__(self, name: str) -> tir.Var:
        name = sanitize(name, "d")
        if name not in self.vars:
            self.vars[name] = tir.Var(name, "int64")
        return self.vars[name]

    def dim(self, value, fallback: str):
        """An int dim, a named dim, or (unknown, -1, None) a fresh dim named ``fallback``."""
        if isinstance(value, str):
            return self(value)
        return self(fallback) if value is None or value < 0 else int(value)


def _proto_dims(value_info: onnx.ValueInfoProto) -> list:
    tensor_type = value_info.type.tensor_type
    if not tensor_type.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
            for d in tensor_type.shape.dim]


# --------------------------------------------------------------------------------------------
# The importer.

class OnnxImporter:
    """Converts one ModelProto; ``convert()`` returns ``(IRModule, weights)``."""

    def __init__(self, model, input_info=None, opset: int | None = None,
                 custom_convert_map: dict | None = None):
        self.model, self.base_dir = load_model(model)
        self.opsets = {(i.domain or ""): i.version for i in self.model.opset_import}
        self.opsets["ai.onnx"] = self.opsets[""] = opset or self.opsets.get("", 1)
        self.table = opsets.with_custom(opsets.converter_table(), custom_convert_map)
        self.input_info = input_info
        self.bb = relax.BlockBuilder()
        self.ctx = Context(self.bb, subgraph=self._inline_graph)
        self.env: dict[str, Expr] = {}
        self.weights: dict[str, np.ndarray] = {}
        self.dims = _Dims()
        self.problems: list[dict] = []

    def convert(self) -> tuple:
        graph = self.model.graph
        self._check_converters(graph)
        params = self._params(graph)
        with self.bb.function("main", params):
            with self.bb.dataflow():
                self._initializers(graph)
                for node in graph.node:
                    self._convert_node(node)
                self._raise_problems()
                outputs = [self._output(v.name) for v in graph.output]
                out = self.bb.emit_output(outputs[0] if len(outputs) == 1 else outputs)
            gvar = self.bb.emit_func_output(out)
        mod = self.bb.get()
        # Shape subgraphs folded into constants leave their runtime bindings unused.
        mod.update_func(gvar, remove_all_unused(mod[gvar], mod))
        return mod, self.weights

    # ---- inputs and weights ---------------------------------------------------------------
    def _params(self, graph: onnx.GraphProto) -> list:
        inits = {t.name for t in graph.initializer}
        inputs = [v for v in graph.input if v.name not in inits]
        overrides = _input_overrides(inputs, self.input_info)
        params = []
        for v in inputs:
            var = self._param(v, *overrides.get(v.name, (None, None)))
            self.env[v.name] = var
            params.append(var)
        return params

    def _param(self, v: onnx.ValueInfoProto, shape, dtype) -> relax.Var:
        if not v.type.HasField("tensor_type"):
            raise UnsupportedOpError(f"graph input {v.name!r} is not a tensor "
                                     f"({v.type.WhichOneof('value')})",
                                     hint="sequence, map and optional inputs are unsupported")
        dtype = dtype or relax_dtype(v.type.tensor_type.elem_type)
        dims = shape if shape is not None else _proto_dims(v)
        name = sanitize(v.name, "input")
        if dims is None:
            return relax.Var(name, relax.TensorStructInfo(None, dtype))
        values = [self.dims.dim(d, f"{name}_d{k}") for k, d in enumerate(dims)]
        return relax.Var(name, relax.TensorStructInfo(values, dtype))

    def _initializers(self, graph: onnx.GraphProto) -> None:
        for tensor in graph.initializer:
            array = initializer_array(tensor, self.base_dir)
            self.weights[tensor.name] = array
            self.env[tensor.name] = relax.Constant(array)

    # ---- nodes ----------------------------------------------------------------------------
    def _check_converters(self, graph: onnx.GraphProto) -> None:
        """Every node (subgraphs included) without a converter, reported at once."""
        missing = Counter()
        first = {}
        for node in _all_nodes(graph):
            key = opsets.key_of(node.op_type, node.domain)
            opset = self.opsets.get(node.domain or "", 1)
            if opsets.select(self.table, key, opset) is None:
                missing[(node.op_type, node.domain, opset)] += 1
                first.setdefault((node.op_type, node.domain, opset), node.name)
        for (op, domain, opset), count in missing.items():
            item = {"op": op, "opset": opset, "count": count, "node": first[(op, domain, opset)]}
            if domain:
                item["domain"] = domain
            starts = opsets.opsets_of(self.table, opsets.key_of(op, domain))
            item["reason"] = (f"converters start at opset {starts[0]}" if starts
                              else "no converter")
            self.problems.append(item)
        self._raise_problems()

    def _convert_node(self, proto: onnx.NodeProto) -> None:
        if any(name and name not in self.env for name in proto.input):
            return  # an input comes from a node that could not be converted (reported)
        node = self._node(proto)
        converter = opsets.select(self.table, opsets.key_of(proto.op_type, proto.domain),
                                  node.opset)
        try:
            result = converter(self.ctx, node)
        except UnsupportedOpError as err:
            self._record(node, err)
            return
        except MSCError as err:
            err.add_note(f"while converting ONNX node {node.name!r} ({node.op_type}, "
                         f"opset {node.opset})")
            raise
        self._bind(proto, result)

    def _inline_graph(self, graph: onnx.GraphProto, inputs: list = ()) -> list:
        """Convert a subgraph (an If branch, a Scan body) in place, its inputs bound to
        ``inputs``; outer values stay visible and inner names stay inner. Returns its
        outputs (None where one could not be converted)."""
        outer = dict(self.env)
        for value, expr in zip(graph.input, inputs):
            self.env[value.name] = expr
        for tensor in graph.initializer:
            self.env[tensor.name] = relax.Constant(initializer_array(tensor, self.base_dir))
        for node in graph.node:
            self._convert_node(node)
        outputs = [self.env.get(v.name) for v in graph.output]
        self.env = outer
        return outputs

    def _node(self, proto: onnx.NodeProto) -> OnnxNode:
        opset = self.opsets.get(proto.domain or "", 1)
        inputs = [self.env[n] if n else None for n in proto.input]
        schema = schema_of(proto.op_type, opset, proto.domain or "")
        if schema is not None and not _variadic(schema):
            inputs += [None] * (len(schema.inputs) - len(inputs))
        name = proto.name or f"{proto.op_type}_{len(self.env)}"
        return OnnxNode(proto.op_type, name, proto.domain, opset, inputs,
                        node_attrs(proto, opset), len(proto.output), list(proto.output))

    def _bind(self, proto: onnx.NodeProto, result) -> None:
        if isinstance(result, Expr) and isinstance(result.struct_info, TupleStructInfo) \
                and len(proto.output) > 1:
            result = [self.bb.emit(TupleGetItem(result, i))
                      for i in range(len(result.struct_info.fields))]
        results = list(result) if isinstance(result, (list, tuple)) else [result]
        for name, value in zip(proto.output, results):
            if name and value is not None:
                self.env[name] = value

    def _record(self, node: OnnxNode, err: UnsupportedOpError) -> None:
        reason = err.message.split("\n")[0]
        for item in self.problems:
            if item["op"] == node.op_type and item.get("reason") == reason:
                item["count"] += 1
                return
        self.problems.append({"op": node.op_type, "opset": node.opset, "count": 1,
                              "node": node.name, "reason": reason})

    def _raise_problems(self) -> None:
        if self.problems:
            kinds = len({p["op"] for p in self.problems})
            raise UnsupportedOpError(
                f"{kinds} ONNX op type(s) cannot be converted", items=self.problems,
                hint="pass custom_convert_map={op_type: fn(ctx, node)} to convert them, or "
                     "re-export the model with another opset")

    def _output(self, name: str) -> Expr:
        if name not in self.env:
            raise ValidationError(f"graph output {name!r} is produced by no node",
                                  tensor=name)
        return self.env[name]


def _variadic(schema) -> bool:
    return bool(schema.inputs) and schema.inputs[-1].option == \
        onnx.defs.OpSchema.FormalParameterOption.Variadic


def _all_nodes(graph: onnx.GraphProto):
    for node in graph.node:
        yield node
        for attr in node.attribute:
            for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                yield from _all_nodes(sub)
