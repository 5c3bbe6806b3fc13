"""ONNX ModelProto -> Relax IRModule: one dispatch loop over the graph's nodes.

    mod, weights = OnnxImporter(model, input_info={"data": [1, 3, 224, 224]}).convert()

Inputs become params (``dim_param`` dims become named ``tir.Var``s, shared by name),
initializers become Constants over the loaded arrays (external data is memory-mapped from its
file), and every node goes through the converter its op type and opset select (opset.py).
Ops that cannot be converted are collected; one UnsupportedOpError lists them all.
"""

from __future__ import annotations

import functools
import os
import re
from collections import Counter

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import external_data_helper, helper, numpy_helper

from msc import relax
from msc.errors import MSCError, SerializationError, UnsupportedOpError, ValidationError
from msc.limits import JointBudget, check_joints
from msc.progress import progress
from msc.relax.expr import Expr, Span, TupleGetItem
from msc.relax.struct_info import TupleStructInfo
from msc.relax.transform.dead_code_elimination import remove_all_unused
from msc.tir import expr as tir

from ..scopes import name_scope, namespace_scope
from . import containers, tensor_check
from . import opset as opsets
from .attrs import node_attrs, schema_of
from .context import Context, OnnxNode
from .dtypes import relax_dtype
from .external_data import external_array
from .functions import Functions, call_leaf
from .proto_text import check_names

__all__ = ["OnnxImporter", "load_model", "sanitize"]


# --------------------------------------------------------------------------------------------
# Loading.

def load_model(model) -> tuple[onnx.ModelProto, str]:
    """A ModelProto, a path or serialized bytes -> (ModelProto, directory of its data files)."""
    if isinstance(model, onnx.ModelProto):
        check_names(model, "<ModelProto>")
        return model, ""
    if isinstance(model, (bytes, bytearray)):
        return _parse(bytes(model), "<bytes>"), ""
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if not os.path.isfile(path):
            raise ValidationError(f"ONNX model file {path!r} does not exist", file=path)
        with open(path, "rb") as f:
            data = f.read()
        # External data stays in its files: initializer_array maps it without a copy.
        return _parse(data, path), os.path.dirname(os.path.abspath(path))
    raise ValidationError(f"cannot read an ONNX model from {type(model).__name__}",
                          hint="pass an onnx.ModelProto, a file path or serialized bytes")


def _parse(data: bytes, source: str) -> onnx.ModelProto:
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except (DecodeError, RuntimeWarning) as err:  # truncated or corrupted protobuf
        raise SerializationError(f"not a valid ONNX model ({err})", file=source,
                                 hint="the file is truncated or corrupted; re-export or "
                                      "download it again") from None
    check_names(model, source)
    return model


def initializer_array(tensor: onnx.TensorProto, base_dir: str) -> np.ndarray:
    """The tensor's data as numpy, read once; external data is memory-mapped.

    The declared dims are checked against the stored data first, so a tensor declaring more
    elements than it holds fails here instead of allocating them."""
    if not external_data_helper.uses_external_data(tensor):
        tensor_check.check_stored(tensor)
        try:
            return numpy_helper.to_array(tensor)
        except (ValueError, TypeError) as err:
            raise SerializationError(f"initializer data cannot be read ({err})",
                                     tensor=tensor.name) from None
    return external_array(tensor, base_dir)


_NOT_IDENT = re.compile(r"\W")


def sanitize(name: str, fallback: str = "x") -> str:
    """A valid identifier for a Relax var from an ONNX value name."""
    name = _NOT_IDENT.sub("_", name) or fallback
    return name if not name[0].isdigit() else f"{fallback}_{name}"


# --------------------------------------------------------------------------------------------
# Inputs.

def _raw_info(graph_inputs: list, input_info) -> dict:
    """input_info (dict by name, or a list in input order) -> {name: info} as given."""
    if input_info is None:
        return {}
    if not isinstance(input_info, dict):
        input_info = {v.name: info for v, info in zip(graph_inputs, input_info)}
    names = {v.name for v in graph_inputs}
    for name in input_info:
        if name not in names:
            raise ValidationError(f"input_info names {name!r}, which is not a graph input",
                                  hint=f"graph inputs: {sorted(names)}")
    return dict(input_info)


def _input_overrides(graph_inputs: list, raw: dict) -> dict:
    """{name: (shape, dtype|None)} for the tensor inputs input_info gives (sequence and
    optional inputs are read by containers.container_param)."""
    tensors = {v.name for v in graph_inputs if v.type.WhichOneof("value") == "tensor_type"}
    out = {}
    for name, info in raw.items():
        if name not in tensors or info is None:
            continue
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

# The Python errors a converter makes on a malformed node (a rank, attr or dim it cannot use);
# anything else is a bug in msc and is left to surface as it is.
CONVERTER_SLIPS = (ValueError, TypeError, IndexError, KeyError, ZeroDivisionError,
                   OverflowError)

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
        self.ctx = Context(self.bb, subgraph=self._inline_graph,
                           lookup=lambda name: self.env.get(name), budget=JointBudget())
        self.env: dict[str, Expr] = {}
        self.bound: set[str] = set()  # names produced by nodes so far (they must be unique)
        self.weights: dict[str, np.ndarray] = {}
        self.dims = _Dims()
        self.problems: list[dict] = []
        self.tuple_params: list = []  # (name, var) of sequence inputs, unpacked in main
        self.scope: tuple = ()  # the module scope of the node being converted
        self.prefix: tuple = ()  # the scope of the function call being expanded
        self.functions = Functions(self.model.functions)

    def convert(self) -> tuple:
        graph = self.model.graph
        check_joints(len(graph.node), "converting the ONNX graph's nodes")
        self._check_converters(graph)
        params = self._params(graph)
        self.ctx.sizes.update(self.dims.vars)  # the inputs' named dims are sizes (>= 0)
        with self.bb.function("main", params):
            with self.bb.dataflow():
                self._initializers(graph)
                for name, var in self.tuple_params:
                    self.env[name] = containers.unpack(self.bb, var)
                for node in progress(graph.node, desc="from_onnx", unit="node", delay=1.0):
                    self._convert_node(node)
                self._raise_problems()
                outputs = [self._output(v.name) for v in graph.output]
                out = self.bb.emit_output(outputs[0] if len(outputs) == 1 else outputs)
            gvar = self.bb.emit_func_output(out)
        mod = self.bb.get()
        # Shape subgraphs folded into constants leave their runtime bindings unused.
        func = remove_all_unused(mod[gvar], mod)
        kinds = containers.output_kinds(graph.output, outputs)
        mod.update_func(gvar, func.with_attr("output_kinds", kinds) if kinds else func)
        return mod, self.weights

    # ---- inputs and weights ---------------------------------------------------------------
    def _params(self, graph: onnx.GraphProto) -> list:
        inits = {t.name for t in graph.initializer}
        inputs = [v for v in graph.input if v.name not in inits]
        raw = _raw_info(inputs, self.input_info)
        overrides = _input_overrides(inputs, raw)
        params = []
        for v in inputs:
            name = sanitize(v.name, "input")
            var, value = containers.container_param(v, raw.get(v.name), v.name in raw, name)
            if var is not None:
                self.tuple_params.append((v.name, var))
            elif value is None:
                var = self._param(v, *overrides.get(v.name, (None, None)))
            self.env[v.name] = var if value is None else value
            self.bound.add(v.name)
            params += [var] if var is not None else []
        return params

    def _param(self, v: onnx.ValueInfoProto, shape, dtype) -> relax.Var:
        v = containers.tensor_of_optional(v)
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
        for node in _all_nodes(graph, self.functions):
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
        """Convert one node; what it emits carries its name and module scope (a node of a
        subgraph without one of its own takes its parent node's)."""
        outer, own = self.scope, tuple(node_scope(proto))
        self.scope = (*self.prefix, *own) if own else outer
        try:
            # an unnamed node is known by its first output, as onnxruntime's tools name it
            source = proto.name or (proto.output[0] if proto.output else "")
            with self.bb.span(Span(source, self.scope)):
                self._convert(proto)
        finally:
            self.scope = outer

    def _convert(self, proto: onnx.NodeProto) -> None:
        names = list(proto.input)  # protobuf fields are read once per node, not per use
        missing = [name for name in names if name and name not in self.env]
        if missing and self.problems:
            return  # an input comes from a node that could not be converted (reported)
        if missing:  # a dangling name, or a cycle (ONNX lists nodes in topological order)
            raise ValidationError(f"input {missing[0]!r} is produced by no earlier node",
                                  node=proto.name or proto.op_type, op=proto.op_type,
                                  hint="the graph must be a DAG in topological order; "
                                       "check the model with onnx.checker.check_model")
        outputs = tuple(proto.output)
        func = self.functions.of(proto)
        if func is not None:
            self._bind(proto, outputs, self._call_function(proto, func, names))
            return
        node = self._node(proto, names, outputs)
        converter = opsets.select(self.table, opsets.key_of(node.op_type, node.domain),
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
        except CONVERTER_SLIPS as err:
            # Converters are written for valid models; on a hostile one (wrong ranks, attrs
            # of the wrong kind, impossible shapes) their Python errors end here, named.
            raise ValidationError(f"cannot convert this node of the model ({type(err).__name__}"
                                  f": {err})", node=node.name, op=node.op_type,
                                  hint="the model is malformed here; check it with "
                                       "onnx.checker.check_model") from err
        self._bind(proto, outputs, result)

    def _call_function(self, proto: onnx.NodeProto, func: onnx.FunctionProto,
                       names: list) -> list:
        """Expand a call of a model-local function: its body in its own names (formal inputs
        bound to the call's values), nested in the call's scope. Returns its outputs."""
        saved = self.env, self.bound, self.prefix
        self.env = {f: self.env[n] if n else None for f, n in zip(func.input, names)}
        self.bound, self.prefix = set(self.env), (*self.scope, call_leaf(proto))
        self.scope = self.prefix
        try:
            with self.functions.entered(func, proto):
                for node in self.functions.body(proto, func):
                    self._convert_node(node)
            return [self.env.get(name) for name in func.output]
        finally:
            self.env, self.bound, self.prefix = saved

    def _inline_graph(self, graph: onnx.GraphProto, inputs: list = ()) -> list:
        """Convert a subgraph (an If branch, a Scan body) in place, its inputs bound to
        ``inputs``; outer values stay visible and inner names stay inner. Returns its
        outputs (None where one could not be converted)."""
        outer, bound = dict(self.env), set(self.bound)
        for value, expr in zip(graph.input, inputs):
            self.env[value.name] = expr
        for tensor in graph.initializer:
            self.env[tensor.name] = relax.Constant(initializer_array(tensor, self.base_dir))
        for node in graph.node:
            self._convert_node(node)
        outputs = [self.env.get(v.name) for v in graph.output]
        self.env, self.bound = outer, bound  # sibling subgraphs may reuse inner names
        return outputs

    def _node(self, proto: onnx.NodeProto, names: list, outputs: tuple) -> OnnxNode:
        op_type, domain = proto.op_type, proto.domain
        opset = self.opsets.get(domain or "", 1)
        inputs = [self.env[n] if n else None for n in names]
        schema = schema_of(op_type, opset, domain or "")
        if schema is not None and not _variadic(schema):  # (schema.inputs copies them all)
            inputs += [None] * (len(_schema_facts(schema)[1]) - len(inputs))
        name = proto.name or f"{op_type}_{len(self.env)}"
        attrs = node_attrs(proto, opset, name)
        if schema is not None:
            _check_required(schema, inputs, attrs, name, op_type)
        return OnnxNode(op_type, name, domain, opset, inputs, attrs, len(outputs),
                        list(outputs))

    def _bind(self, proto: onnx.NodeProto, outputs: tuple, result) -> None:
        if isinstance(result, Expr) and isinstance(result.struct_info, TupleStructInfo) \
                and len(outputs) > 1:
            result = [self.bb.emit(TupleGetItem(result, i))
                      for i in range(len(result.struct_info.fields))]
        results = list(result) if isinstance(result, (list, tuple)) else [result]
        for name, value in zip(outputs, results):
            if name in self.bound:
                raise ValidationError(f"output {name!r} is already produced by another node "
                                      "or is a graph input", node=proto.name or proto.op_type,
                                      op=proto.op_type, hint="ONNX names must be unique (SSA)")
            if name and value is not None:
                self.bound.add(name)
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
        if isinstance(self.env[name], containers.Absent):
            raise UnsupportedOpError(f"graph output {name!r} is an empty optional",
                                     hint="the VM returns tensors and tuples of them; give "
                                          "the output a value")
        return self.env[name]


def node_scope(proto: onnx.NodeProto) -> list[str]:
    """The module path of a node: from its name (torch's TorchScript exporter) or its
    ``namespace`` metadata (torch's dynamo exporter); [] when it has neither."""
    scope = name_scope(proto.name)
    if scope:
        return scope
    for prop in proto.metadata_props:
        if prop.key == "namespace":
            return namespace_scope(prop.value)
    return []


def _check_required(schema, inputs: list, attrs: dict, name: str, op_type: str) -> None:
    """Converters index required inputs and attributes freely and trust their dtypes (a shape
    is int64); a model breaking its schema stops here."""
    required, formals, required_attrs = _schema_facts(schema)
    for k in required:
        if k >= len(inputs) or inputs[k] is None:
            raise ValidationError(f"required input {k} ({formals[k][0]!r}) is missing",
                                  node=name, op=op_type, hint="fix or re-export the model")
    for k, value in enumerate(inputs):
        kind = _onnx_type(value)
        if kind is None or not formals:
            continue
        formal, types = formals[min(k, len(formals) - 1)]
        if types and kind not in types:
            raise ValidationError(f"input {k} ({formal!r}) is {kind}, the schema allows "
                                  f"{', '.join(sorted(types))}", node=name, op=op_type,
                                  hint="fix or re-export the model")
    for attr_name in required_attrs:
        if attrs.get(attr_name) is None:
            raise ValidationError(f"required attribute {attr_name!r} is missing", node=name,
                                  op=op_type, hint="fix or re-export the model")


_SCHEMA_FACTS: dict = {}  # id(schema) -> its facts; schema_of caches the schemas themselves


def _schema_facts(schema) -> tuple:
    """(indices of single (required) inputs, (name, allowed types) of each formal input,
    required attribute names): read from the schema once, not once per node."""
    facts = _SCHEMA_FACTS.get(id(schema))
    if facts is None or facts[0] is not schema:
        single = onnx.defs.OpSchema.FormalParameterOption.Single
        allowed = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}
        required = tuple(k for k, f in enumerate(schema.inputs) if f.option == single)
        formals = tuple((f.name, allowed.get(f.type_str, {f.type_str})) for f in schema.inputs)
        attrs = tuple(n for n, a in schema.attributes.items() if a.required)
        facts = _SCHEMA_FACTS[id(schema)] = (schema, (required, formals, attrs))
    return facts[1]


@functools.cache
def _onnx_names() -> dict:
    """numpy dtype name -> ONNX type name (``float32`` -> ``float``); names two ONNX types
    share (none today) are left out, so their inputs go unchecked."""
    names: dict = {}
    for elem in onnx.TensorProto.DataType.values():
        try:
            key = helper.tensor_dtype_to_np_dtype(elem).name
        except (KeyError, TypeError, ValueError):
            continue
        names[key] = None if key in names else onnx.TensorProto.DataType.Name(elem).lower()
    return names


def _onnx_type(value) -> str | None:
    """``tensor(<elem>)`` of a converted input, None when not a plain typed tensor."""
    sinfo = getattr(value, "struct_info", None)
    dtype = getattr(sinfo, "dtype", None) if isinstance(sinfo, relax.TensorStructInfo) else None
    return _tensor_type(dtype) if dtype else None


@functools.cache  # once per dtype, not once per node input
def _tensor_type(dtype: str) -> str | None:
    name = _onnx_names().get(dtype)
    return f"tensor({name})" if name else None


@functools.cache  # schema_of hands out one object per (op, opset); .inputs copies them all
def _variadic(schema) -> bool:
    return bool(schema.inputs) and schema.inputs[-1].option == \
        onnx.defs.OpSchema.FormalParameterOption.Variadic


def _all_nodes(graph, functions: Functions, seen: frozenset = frozenset()):
    """The nodes to convert: subgraphs' included, function calls by their bodies' nodes."""
    for node in graph.node:
        func = functions.of(node)
        if func is not None:
            key = (func.domain, func.name)
            if key not in seen:  # (a recursive call is refused when it is expanded)
                yield from _all_nodes(func, functions, seen | {key})
            continue
        yield node
        for attr in node.attribute:
            for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                yield from _all_nodes(sub, functions, seen)
