"""MSCGraph -> a readable Relax BlockBuilder script (+ weights .npz + standalone test).

The writer is generic over the op table: a joint becomes ``relax.op.<optype>(...)`` with its
arguments bound by the op record (inputs, weights, attrs given as values) and the attrs that
differ from the record's defaults; fused ``msc.*`` joints become the Relax op sequences they
stand for (conventions 4.2). Weights are function parameters bound by name from
``<graph>_params.npz``; symbolic dims are ``tir.Var``\\ s, and derived dims expressions of the
inputs' shapes::

    mod = to_relax(graph, weights, build_folder="out/relax")    # writes out/relax/main.py
    # out/relax/main.py:
    #   # conv2d(msc.conv2d_bias): inp_0:0 -> conv2d:0<1,6,4,4|float32|NCHW>
    #   conv2d = bb.emit(relax.op.add(relax.op.nn.conv2d(inp_0, const, ...), const_1), ...)
"""

from __future__ import annotations

import ast
import builtins
import functools
import inspect
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from msc.errors import UnsupportedOpError, ValidationError
from msc.gc_tuning import fewer_collections
from msc.graph import MSCGraph, MSCJoint, MSCTensor
from msc.graph.files import write_atomic
from msc.relax.op.registry import OPS, make_function

from ..attrs import index_map
from ..baseline import baseline_keys, read_config, write_manifest
from ..files import load_script, save_npz, script_stem
from ..joint import JointContext, find_weight, joint_comment, shape_dims, write_nodes
from ..naming import Namer, comment, literal
from ..prims import PrimRenderer
from ..templates import test_section

__all__ = ["RelaxWriter", "emits", "to_relax"]

# How the script rebuilds a layout_transform's index map (from its initial vars / final exprs).
_INDEX_MAP_IMPORT = "\nfrom msc.relax.op.defs_manipulate import IndexMap"
# "any" arguments that take a shape value (a ShapeExpr) rather than a tuple.
SHAPE_VALUE_ARGS = {("shape_to_tensor", "expr")}
_RESERVED = set(dir(builtins)) | {"relax", "tir", "np", "os", "sys", "bb", "params", "data",
                                  "IndexMap",
                                  "mod", "build", "run", "main", "HERE", "PARAMS", "BASELINE",
                                  "INPUTS", "OUTPUTS", "ATOL", "RTOL", "compare",
                                  "load_baseline", "load_params"}


@functools.cache
def _builder_params_of(op_name: str) -> tuple:
    return tuple(inspect.signature(make_function(OPS[op_name])).parameters)


def _builder_params(op_def) -> tuple:
    return _builder_params_of(op_def.name)


def _call(op_name: str, args: list[str], kwargs: dict) -> str:
    items = args + [f"{k}={v}" for k, v in kwargs.items()]
    return f"relax.op.{op_name}({', '.join(items)})"


def _kw(values: dict) -> dict:
    return {k: literal(v) for k, v in values.items()}


# --------------------------------------------------------------------------------------------
# Fused msc.* joints as Relax op sequences (conventions 4.2).

def _conv_bias(w: RelaxWriter, ctx: JointContext) -> str:
    conv_op = "nn." + ctx.node.optype.removeprefix("msc.").removesuffix("_bias")
    conv = JointContext(ctx.graph, ctx.node, OPS[conv_op])
    data, weight = w.input(ctx.node, 0), w.weight(ctx.node, "weight")
    expand = ctx.raw("expand_bias", "shape")
    if expand:
        bias = _call("reshape", [w.weight(ctx.node, "bias"), literal(expand)], {})
    else:  # a bias of the conv's rank, one value per channel
        out = ctx.node.output_at(0)
        layout = conv.attr("out_layout") or conv.attr("data_layout")
        shape = [1] * out.ndim
        shape[layout.index("C")] = ctx.node.weight_at("bias").get_size()
        bias = w.weight(ctx.node, "bias", shape)
    return _call("add", [_call(conv_op, [data, weight], _kw(conv.attrs(True))), bias], {})


def _linear(w: RelaxWriter, ctx: JointContext) -> str:
    weight = _call("permute_dims", [w.weight(ctx.node, "weight")], {})
    out = _call("matmul", [w.input(ctx.node, 0), weight], _kw(ctx.attrs(True)))
    if "bias" in ctx.node.weights:
        out = _call("add", [out, w.weight(ctx.node, "bias")], {})
    return out


def _embedding(w: RelaxWriter, ctx: JointContext) -> str:
    index = _call("astype", [w.input(ctx.node, 0), literal("int32")], {})
    reduce_in = ctx.raw("reduce_in", "shape")
    if reduce_in:
        index = _call("reshape", [index, literal(reduce_in)], {})
    out = _call("take", [w.weight(ctx.node, "weight"), index], {"axis": "0"})
    if reduce_in:
        out = _call("reshape", [out, w.dims(ctx.node.output_at(0))], {})
    return out


_BSHD = [0, 2, 1, 3]


def _attention(w: RelaxWriter, ctx: JointContext) -> str:
    qkv = []
    for i, key in enumerate(["axes", "axes_1", "axes_2"]):
        axes = literal(ctx.raw(key, "ints", _BSHD))
        qkv.append(_call("permute_dims", [w.input(ctx.node, i)], {"axes": axes}))
    op = "nn.attention_bias" if len(ctx.node.inputs) > 3 else "nn.attention"
    if len(ctx.node.inputs) > 3:
        qkv.append(w.input(ctx.node, 3))
    attention = JointContext(ctx.graph, ctx.node, OPS[op])
    inner = _call(op, qkv, _kw(attention.attrs(True)))
    return _call("permute_dims", [inner], {"axes": literal(ctx.raw("axes_3", "ints", _BSHD))})


def _layout_transform(w: RelaxWriter, ctx: JointContext) -> str:
    """``IndexMap.from_func(lambda n, c: (n, c // 4, c % 4))``: the printed index map read
    back as its vars and exprs (validated, never evaluated) and rebuilt in the script."""
    w.uses_index_map = True
    mapping = index_map(ctx.node.attrs.get("index_map", ""))
    kwargs = {"index_map": f"IndexMap.from_func({ast.unparse(mapping)})"}
    if ctx.attr("pad_value") is not None:
        kwargs["pad_value"] = literal(ctx.attr("pad_value"))
    return _call("layout_transform", [w.input(ctx.node, 0)], kwargs)


def _arange(w: RelaxWriter, ctx: JointContext) -> str:
    """An end that is a dim of the graph inputs (``arange(seq)``) reaches the graph as -1
    with no ``end.prims`` (msc-conventions): the end is start + length * step, the length
    being the output's dim (as the ONNX codegen's Range). A decoder's mask reads it."""
    args, kwargs = w._arguments(ctx)
    (length,) = w.prims.dims(ctx.node.output_at(0))
    if len(args) < 3 or args[1] != "-1" or isinstance(length, int):
        return _call("arange", args, kwargs)
    args[1] = f"{args[0]} + ({length}) * {args[2]}"
    return _call("arange", args, kwargs)


# Ops of the table written by hand (their attrs are no plain values): this codegen's rows.
SPECIAL: dict[str, Callable[[RelaxWriter, JointContext], str]] = {
    "layout_transform": _layout_transform, "arange": _arange,
}
# Fused msc.* optypes, written as the Relax op sequences they stand for (this codegen's rows).
FUSED: dict[str, Callable[[RelaxWriter, JointContext], str]] = {
    "msc.conv1d_bias": _conv_bias,
    "msc.conv2d_bias": _conv_bias,
    "msc.linear": _linear,
    "msc.linear_bias": _linear,
    "msc.embedding": _embedding,
    "msc.attention": _attention,
    "msc.gelu": lambda w, ctx: _call("nn.gelu", [w.input(ctx.node, 0)], {}),
    "msc.matmul": lambda w, ctx: _call(
        "matmul", [w.input(ctx.node, 0), w.input(ctx.node, 1)], _kw(ctx.attrs(True))),
}


def emits(optype: str) -> bool:
    """Whether a graph node of ``optype`` can be written as Relax source: a fused msc.* node
    with its op sequence, or a table op that is not runtime plumbing (calls into other
    functions, effects, runtime objects)."""
    if optype in FUSED:
        return True
    op_def = OPS.get(optype)
    return op_def is not None and not op_def.runtime and op_def.family != "msc"


def _stat_outputs(optype: str) -> bool:
    """The Relax value is a tuple although the graph keeps only output 0 (conventions 4.1)."""
    op_def = OPS.get(optype)
    return op_def is not None and bool(op_def.stat_outputs)


# --------------------------------------------------------------------------------------------
# The writer.

# Ops whose value is a run-time shape (ShapeStructInfo): prims read its elements.
_SHAPE_VALUES = frozenset({"tensor_to_shape"})


class RelaxWriter:
    """Writes the builder script of one graph; ``source()`` after ``write()``."""

    def __init__(self, graph: MSCGraph, weights: dict | None):
        self.graph, self.weights = graph, weights
        self.namer = Namer(_RESERVED)
        self.vars: dict[str, str] = {}  # node name -> var
        self.tuple_nodes: set[str] = set()
        self.params: dict[str, tuple] = {}  # weight name -> (var, tensor, shape)
        self.prim_vars: dict[str, str] = {}  # prim name -> tir.Var identifier
        self.shape_values: dict[tuple, str] = {}  # (shape producer, element) -> tir.Var
        self.body: list[str] = []
        self.dataflow_vars: set[str] = set()
        self.outputs = set(graph.output_names)
        self.prims = PrimRenderer(graph, self._shape_ref, "relax")
        self.uses_index_map = False

    # ---- sources of values ---------------------------------------------------------------
    def _shape_ref(self, producer: str, out_idx: int, dim: int) -> str:
        if (producer, dim) in self.shape_values:  # bound by _bind_shape_values
            return self.shape_values[producer, dim]
        return f"{self.vars[producer]}.struct_info.shape[{dim}]"

    def _bind_shape_values(self, node: MSCJoint, var: str) -> None:
        """A run-time shape value (``tensor_to_shape``) whose elements later dims read: one
        ``tir.Var`` per element, bound by ``bb.match_cast`` (as from_onnx's Relax does)."""
        if node.optype not in _SHAPE_VALUES or not any(
                p.optype == "shape" and p.get_attr("producer") == node.name
                for p in self.graph.get_prims()):
            return
        (count,) = node.output_at(0).shape
        if not isinstance(count, int):
            return  # a shape of unknown rank: its elements cannot be named
        names = [self.namer(f"{node.name}_{k}", "dim") for k in range(count)]
        for k, name in enumerate(names):
            self.prim_vars[f"{node.name}:{k}"] = name
            self.shape_values[node.name, k] = name
        self.body.append(f"{var} = bb.match_cast({var}, relax.ShapeStructInfo("
                         f"[{', '.join(names)}]), {literal(var)})")

    def ref(self, node: MSCJoint, idx: int) -> str:
        var = self.vars[node.name]
        return f"{var}[{idx}]" if node.name in self.tuple_nodes else var

    def input(self, node: MSCJoint, i: int) -> str:
        return self.ref(*node.producer_and_idx_of(i))

    def weight(self, node: MSCJoint, role: str, shape: list | None = None) -> str:
        tensor = node.weight_at(role)
        if tensor.name not in self.params:
            var = self.namer(tensor.name, "weight")
            self.params[tensor.name] = (var, tensor, shape or tensor.shape)
        return self.params[tensor.name][0]

    def dims(self, tensor: MSCTensor) -> str:
        return PrimRenderer.source(self.prims.dims(tensor))

    # ---- joints --------------------------------------------------------------------------
    def write(self) -> None:
        write_nodes(self.graph, self._node, self.vars, "the Relax codegen",
                    "runtime ops (OpDef.runtime) have no Relax source; fix or remove these "
                    "nodes")

    def _node(self, node: MSCJoint) -> None:
        if node.optype == "input":
            self.vars[node.name] = self.namer(node.name, "inp")
            return
        if node.optype == "constant":
            self.vars[node.name] = self.weight(node, "const")
            return
        self.body.append(f"# {joint_comment(node)}")
        if node.optype == "get_item":
            return self._get_item(node)
        expr = self._expr(node)
        if node.optype == "tuple" or len(node.outputs) > 1 or _stat_outputs(node.optype):
            self.tuple_nodes.add(node.name)
        self._emit(node, expr)

    def _emit(self, node: MSCJoint, expr: str) -> None:
        var = self.namer(node.name, "lv")
        is_output = any(t.name in self.outputs for t in node.outputs)
        method = "emit_output" if is_output else "emit"
        if not is_output:
            self.dataflow_vars.add(var)
        self.body.append(f"{var} = bb.{method}({expr}, {literal(var)})")
        self.vars[node.name] = var
        self._bind_shape_values(node, var)

    def _get_item(self, node: MSCJoint) -> None:
        index = JointContext(self.graph, node).raw("index", "int", 0)
        producer, _ = node.producer_and_idx_of(0)
        if producer.name in self.tuple_nodes:
            return self._emit(node, f"{self.vars[producer.name]}[{index}]")
        # the producer's value is a plain tensor: the item is one of the inputs
        self.vars[node.name] = self.input(node, min(index, len(node.inputs) - 1))

    def _expr(self, node: MSCJoint) -> str:
        if node.optype == "shape":  # a shape read (x.shape, x.size())
            return f"relax.ShapeExpr({PrimRenderer.source(shape_dims(node, self.prims))})"
        if node.optype == "tuple":
            return "[" + ", ".join(self.input(node, i) for i in range(len(node.inputs))) + "]"
        if node.optype in FUSED:
            return FUSED[node.optype](self, JointContext(self.graph, node))
        if not emits(node.optype):
            raise UnsupportedOpError(f"no Relax op {node.optype!r}", node=node.name)
        ctx = JointContext(self.graph, node)
        if node.optype in SPECIAL:
            return SPECIAL[node.optype](self, ctx)
        return _call(node.optype, *self._arguments(ctx))

    def _arguments(self, ctx: JointContext) -> tuple[list[str], dict]:
        args, kwargs = [], {}
        # Positional only where the builder (TVM's Python order) has this very parameter at
        # this position: e.g. nn.attention_var_len takes max_seqlen_q before seqstart_k.
        params = _builder_params(ctx.op_def)
        for arg, source in zip(ctx.op_def.args, ctx.bind_args()):
            if source is None:
                continue
            text = self._argument(ctx, source)
            symbolic = ctx.node.attrs.get(f"{arg.name}.prims", "")
            if symbolic and source[0] == "value":  # run-time values: their prims, as tir
                text = self._symbolic_value(source[1], symbolic)
            if (ctx.op_def.name, arg.name) in SHAPE_VALUE_ARGS and source[0] == "value":
                text = f"relax.ShapeExpr({text})"
            position = len(args)
            if kwargs or position >= len(params) or params[position] != arg.name:
                kwargs[arg.name] = text
            else:
                args.append(text)
        kwargs.update(_kw(ctx.attrs(only_changed=True)))
        return args, kwargs

    def _symbolic_value(self, value, prims: str) -> str:
        """An attr whose ``<name>.prims`` names the prims of its symbolic elements (numbers
        where an element is static): e.g. arange's end, a run-time depth."""
        names = prims.split(",")
        values = list(value) if isinstance(value, (list, tuple)) else [value]
        parts = [literal(v) if n.lstrip("-").isdigit() else self.prims.prim(n)
                 for n, v in zip(names, values + [None] * (len(names) - len(values)))]
        if isinstance(value, (list, tuple)):
            return "[" + ", ".join(parts) + "]"
        return parts[0]

    def _argument(self, ctx: JointContext, source: tuple) -> str:
        kind, value = source
        if kind == "input":
            return self.input(ctx.node, value)
        if kind == "inputs":
            return "[" + ", ".join(self.input(ctx.node, i) for i in value) + "]"
        if kind == "weight":
            return self.weight(ctx.node, value)
        if kind == "output":
            return self.dims(ctx.node.output_at(0))
        return literal(value)

    # ---- the script ----------------------------------------------------------------------
    def _declarations(self) -> list[str]:
        lines = []
        for name in self.graph.input_names:
            tensor = self.graph.find_tensor(name)
            dims = [self._input_dim(tensor, i) for i in range(tensor.ndim)]
            var = self.vars[self.graph.find_producer(name).name]
            lines.append(f"{var} = relax.Var({literal(var)}, relax.TensorStructInfo("
                         f"{PrimRenderer.source(dims)}, {literal(tensor.dtype)}))")
        for var, tensor, shape in self.params.values():
            lines.append(f"{var} = relax.Var({literal(var)}, relax.TensorStructInfo("
                         f"{literal(list(shape))}, {literal(tensor.dtype)}))")
        return [f"{v} = tir.Var({literal(v)}, \"int64\")" for v in self.prim_vars.values()
                ] + lines

    def _input_dim(self, tensor: MSCTensor, i: int):
        prims = tensor.prims
        if prims and not prims[i].lstrip("-").isdigit():
            if prims[i] not in self.prim_vars:
                self.prim_vars[prims[i]] = self.namer(prims[i], "n")
            return self.prim_vars[prims[i]]
        return self.prims.dim(tensor, i)

    def _out_ref(self, name: str) -> str:
        host, _, idx = self.graph.find_tensor(name).name.rpartition(":")
        return self.ref(self.graph.find_node(host), int(idx))

    def _late_outputs(self) -> list[str]:
        """Graph outputs whose value is still a dataflow var get an ``emit_output``."""
        lines = []
        for name in self.graph.output_names:
            base = self._out_ref(name).split("[")[0]
            if base in self.dataflow_vars:
                self.dataflow_vars.discard(base)
                lines.append(f"{base} = bb.emit_output({base}, {literal(base)})")
        return lines

    def source(self, script: str, params_file: str, test: str) -> str:
        body = self.body + self._late_outputs()
        inputs = [self.vars[self.graph.find_producer(n).name] for n in self.graph.input_names]
        refs = [self._out_ref(n) for n in self.graph.output_names]
        declarations = self._declarations()  # first: it names the symbolic dims
        fields = {
            "script": script, "graph": comment(self.graph.name),
            "imports": ("relax, tir" if self.prim_vars or any("tir." in line for line in body)
                        else "relax") +
                       (_INDEX_MAP_IMPORT if self.uses_index_map else ""),
            "sys": "import sys\n" if test else "", "params_file": literal(params_file),
            "declarations": "\n".join("    " + d for d in declarations),
            "func": literal(self.func_name),
            "params": ", ".join(inputs + [v for v, _, _ in self.params.values()]),
            "body": "\n".join("            " + b for b in body or ["pass"]),
            "result": refs[0] if len(refs) == 1 else "[" + ", ".join(refs) + "]",
        }
        return _SCRIPT.format(**fields) + test

    @property
    def func_name(self) -> str:
        return Namer()(self.graph.name, "main")

    def param_arrays(self) -> dict:
        """{param var: array} from the given weights (looked up by name, then alias)."""
        arrays = {}
        for var, tensor, shape in self.params.values():
            value = find_weight(self.weights, tensor)
            if value.size != int(np.prod(shape)):
                raise ValidationError(f"weight data has shape {list(value.shape)}, expected "
                                      f"{list(tensor.shape)}", tensor=tensor.name)
            arrays[var] = value.reshape(shape).astype(tensor.dtype, copy=False)
        return arrays


_SCRIPT = '''\"\"\"Relax builder script generated by msc codegen.

build() returns the IRModule; `python {script}` runs it on the msc backend and checks it
against baseline/ (inputs and golden outputs).
\"\"\"
# graph: {graph}
import os
{sys}
import numpy as np

from msc import {imports}

HERE = os.path.dirname(os.path.abspath(__file__))
PARAMS = os.path.join(HERE, {params_file})


def load_params(path=PARAMS):
    \"\"\"The weights saved next to this script ({{}} when there are none).\"\"\"
    if not os.path.exists(path):
        return {{}}
    with np.load(path, allow_pickle=False) as data:
        return {{k: data[k] for k in data.files}}


def build(params=None):
    \"\"\"The IRModule, with the weights (default: load_params()) bound by name.\"\"\"
{declarations}
    bb = relax.BlockBuilder()
    with bb.function({func}, [{params}]):
        with bb.dataflow():
{body}
        bb.emit_func_output({result})
    mod = bb.get()
    params = load_params() if params is None else params
    if params:
        mod = relax.transform.BindParams({func}, params)(mod)
    return mod


def run(inputs):
    \"\"\"Build, compile with the msc backend and run; the outputs as numpy arrays.\"\"\"
    ex = relax.build(build(), target="llvm")
    vm = relax.VirtualMachine(ex, relax.cpu())
    result = vm[{func}](*inputs)
    result = result if isinstance(result, (tuple, list)) else [result]
    return [r.numpy() if hasattr(r, "numpy") else np.asarray(r) for r in result]
'''


# --------------------------------------------------------------------------------------------
# Entry point.

@fewer_collections
def to_relax(graph: MSCGraph, weights: dict | None = None, codegen_config: dict | None = None,
             build_folder: str | os.PathLike | None = None):
    """Write ``<graph>.py`` (a BlockBuilder script) and ``<graph>_params.npz`` into
    ``build_folder`` and return the IRModule that script builds.

    >>> mod = to_relax(graph, weights, build_folder="out/relax")   # doctest: +SKIP
    """
    config = read_config(codegen_config)
    folder = Path(build_folder or tempfile.mkdtemp(prefix="msc_codegen_"))
    writer = RelaxWriter(graph, weights)
    writer.write()
    stem = script_stem(graph.name)
    script, params_file = f"{stem}.py", f"{stem}_params.npz"
    inputs, outputs = graph.get_inputs(), graph.get_outputs()
    test = test_section(script, baseline_keys(inputs), baseline_keys(outputs), config["atol"],
                        config["rtol"]) if config["need_test"] else ""
    source = writer.source(script, params_file, test)
    if weights is not None:
        save_npz(folder / params_file, writer.param_arrays())
    elif (folder / params_file).exists():
        os.unlink(folder / params_file)
    write_atomic(folder / script, source)
    write_manifest(folder, script, baseline_keys(inputs), baseline_keys(outputs), "relax")
    return load_script(folder / script).build()
