"""Relax function -> node records -> MSCGraph (MSC's RelaxGraphBuilder, msc-conventions 1, 4).

The builder walks the bindings once. Params become ``input`` nodes, each call (or fused
group, see ``fusion.py``) a node named by ``naming.py``; its arguments become inputs, weights
or attrs by role (``roles.py``); a constant read as an input becomes a ``constant`` node.
Output tensors take the layouts of ``layout.py`` and the prims of ``prims.py``::

    builder = GraphBuilder(view, mod, names, layouts, groups, BuildConfig())
    graph, weight_refs = builder.build()
"""

from __future__ import annotations

from dataclasses import dataclass, field

from msc.errors import ValidationError
from msc.graph import MSCGraph, MSCJoint, MSCTensor
from msc.limits import check_joints
from msc.relax.expr import (
    Call,
    Constant,
    Expr,
    Function,
    MatchCast,
    ShapeExpr,
    Span,
    Tuple,
    TupleGetItem,
    Var,
)
from msc.relax.op.registry import Op
from msc.relax.struct_info import ShapeStructInfo, TensorStructInfo, TupleStructInfo
from msc.tir import expr as tir

from .optypes import FIRST_OUTPUT_ONLY, VANISHING_OPS, call_optype, leaf_sinfos
from .prims import PrimTable
from .roles import INPUT, WEIGHT_ROLE_OF_CONST, roles_of
from .values import arg_attr, arg_scalars, call_attrs, fused_attrs, is_attr_arg, scalar_attr
from .walk import op_name

__all__ = ["BuildConfig", "GraphBuilder", "NodeSpec", "WeightRef"]

# Optypes whose ``weight`` is stored [out, in] (``OI``) whatever the constant's layout. Not an
# op fact: a graph convention (msc-conventions) for the fused msc.linear optypes.
LINEAR_OPTYPES = frozenset({"msc.linear", "msc.linear_bias"})
SHAPE_DTYPE = "int32"


@dataclass
class BuildConfig:
    """The ``build_config`` keys the builder reads (MSC's RelaxGraphBuildConfig)."""

    input_aliases: list = field(default_factory=list)
    output_aliases: list = field(default_factory=list)
    use_var_name: bool = False
    float_precision: int = 6
    graph_name: str = ""
    prune_graph: bool = False


@dataclass
class WeightRef:
    """A weight tensor of the graph and the constant (with its inferred layout) behind it."""

    const: Constant
    layout: str
    tensor: MSCTensor


@dataclass
class NodeSpec:
    """A node before it becomes an MSCJoint: inputs are ``(producer name, out_idx)``."""

    name: str
    optype: str
    inputs: list
    outputs: list
    attrs: dict = field(default_factory=dict)
    weights: dict = field(default_factory=dict)
    scope: list = field(default_factory=list)
    shared_ref: str = ""


def _dims_of(sinfo) -> tuple:
    if isinstance(sinfo, TensorStructInfo):
        return sinfo.values or ()
    if isinstance(sinfo, TupleStructInfo):
        return tuple(d for f in sinfo.fields for d in _dims_of(f))
    return ()


class GraphBuilder:
    def __init__(self, view, mod, names, layouts: dict, groups, config: BuildConfig):
        self.view, self.mod, self.names, self.config = view, mod, names, config
        self.layouts = layouts
        self.groups = {g.root: g for g in groups}
        self.absorbed = {v for g in groups for v in g.members if v is not g.root}
        self.root_of = {v: g.root for g in groups for v in g.members}
        self.prims = PrimTable()
        self.run_time: set = set()  # tir vars read from values at run time (match_cast)
        self.specs: dict[str, NodeSpec] = {}
        self.tensors: dict = {}  # Var / Constant -> [(node name, out_idx)]
        self.weights: dict[str, WeightRef] = {}
        self.views: dict[str, list] = {}  # constant's name -> its weights, one per layout
        self.holders: dict[str, str] = {}  # weight name -> first node holding it
        self.scope: list = []
        self.attr_scopes = attr_scopes(view.func)
        self.module: list = []  # the module path of the binding being built, if known

    # ---- driver ---------------------------------------------------------------------------
    def build(self) -> tuple[list[NodeSpec], list[str], list[str], list[WeightRef]]:
        """Node records in order, graph input and output tensor names, weight refs."""
        check_joints(len(self.view.bindings) + len(self.view.func.params),
                     "building the graph from the Relax function")  # before building any node
        inputs = [self._add_input(p) for p in self.view.func.params]
        for block, binding in self.view.bindings:
            if binding.var in self.absorbed:
                continue
            self.scope = self._scope_of(binding.var, block)
            if isinstance(binding, MatchCast):
                self._match_cast(binding)
            self._note_prims(binding.var)
            handler = _BINDINGS.get(type(binding.value))
            if handler is not None:
                handler(self, binding.var, binding.value)
        self.module = []
        outputs = [f"{n}:{i}" for n, i in self._inputs_of(self.view.result)]
        return list(self.specs.values()), inputs, outputs, list(self.weights.values())

    def sources(self) -> dict[str, str]:
        """``{source name: joint name}``: the frontend's node (a span's ``source_name``: an
        ONNX node name, a torch.fx node name) behind each joint. A call fused into a joint
        maps to that joint; a call that became no joint (a view folded away) maps nowhere."""
        found = {}
        for _, binding in self.view.bindings:
            span = binding.var.span
            if not isinstance(span, Span) or not span.source_name:
                continue
            refs = self.tensors.get(self.root_of.get(binding.var, binding.var))
            if refs and refs[0][0] in self.specs and span.source_name not in found:
                found[span.source_name] = refs[0][0]
        return found

    def _scope_of(self, var: Var, block: int) -> list:
        """The model's module path of ``var`` (its span, else the function's ``msc_scopes``
        attr), else the name of its binding block (msc-conventions 4.4)."""
        span = var.span
        self.module = list(span.scope) if isinstance(span, Span) and span.scope else \
            list(self.attr_scopes.get(var.name_hint, ()))
        return self.module or [self.names.blocks[block]]

    def _note_prims(self, var: Var) -> None:
        group = self.groups.get(var)
        for member in group.members if group else [var]:
            for dim in _dims_of(member.struct_info):
                if not dim.is_const:
                    self.prims.match(dim)

    def _match_cast(self, binding: MatchCast) -> None:
        """The vars a match_cast defines are read from the value at run time: a dim of a
        tensor, or an element of a shape value (``tensor_to_shape``), msc-conventions 1.3."""
        refs = self._inputs_of(binding.value)
        sinfo = binding.struct_info
        if len(refs) != 1 or not isinstance(sinfo, (ShapeStructInfo, TensorStructInfo)):
            return
        element = isinstance(sinfo, ShapeStructInfo)
        for dim_idx, dim in enumerate(sinfo.values or ()):
            if isinstance(dim, tir.Var) and not self.prims.has(dim):
                self.prims.add_shape(dim, refs[0][0], refs[0][1], dim_idx, element=element)
                self.run_time.add(dim)

    def _add(self, spec: NodeSpec, key: Expr | None) -> NodeSpec:
        self.specs[spec.name] = spec
        if key is not None:
            self.tensors[key] = [(spec.name, i) for i in range(len(spec.outputs))]
        return spec

    # ---- tensors --------------------------------------------------------------------------
    def _tensor(self, name: str, sinfo, layout) -> MSCTensor:
        layout = layout if isinstance(layout, str) else ""
        if isinstance(sinfo, ShapeStructInfo):
            return MSCTensor(name, SHAPE_DTYPE, layout, [max(sinfo.ndim, 0)])
        if sinfo.values is None:  # unknown dims: -1 without prims
            return MSCTensor(name, sinfo.dtype, layout, [-1] * max(sinfo.ndim, 0))
        shape, prims = self.prims.dims(sinfo.values)
        return MSCTensor(name, sinfo.dtype, layout, shape, prims=prims)

    def _outputs(self, name: str, var: Var, optype: str, layout=None) -> list[MSCTensor]:
        sinfo = var.struct_info
        layout = self.layouts.get(var, "") if layout is None else layout
        if not isinstance(sinfo, TupleStructInfo):
            return [self._tensor(f"{name}:0", sinfo, layout)]
        fields = sinfo.fields[:1] if optype in FIRST_OUTPUT_ONLY else sinfo.fields
        layouts = layout if isinstance(layout, tuple) else ("",) * len(fields)
        return [self._tensor(f"{name}:{i}", f, lay) for i, (f, lay) in
                enumerate(zip(fields, layouts))]

    def output_tensor(self, ref: tuple[str, int]) -> MSCTensor:
        return self.specs[ref[0]].outputs[ref[1]]

    def _inputs_of(self, expr: Expr) -> list[tuple[str, int]]:
        """The graph tensors an argument stands for (a tuple gives all of its fields')."""
        value = self.view.value_of(expr)
        if isinstance(value, Tuple):
            return [ref for f in value.fields for ref in self._inputs_of(f)]
        if isinstance(value, Constant):
            return self._constant_node(value)
        if isinstance(value, ShapeExpr) and value not in self.tensors:
            self._shape(None, value)  # an unbound ShapeExpr (a function result)
        return list(self.tensors.get(value, []))

    # ---- leaves ---------------------------------------------------------------------------
    def _add_input(self, param: Var) -> str:
        name = param.name_hint
        for dim_idx, dim in enumerate(_dims_of(param.struct_info)):
            if isinstance(dim, tir.Var):
                self.prims.add_shape(dim, name, 0, dim_idx)
        outputs = [self._tensor(f"{name}:0", param.struct_info, self.layouts.get(param, ""))]
        self._add(NodeSpec(name, "input", [], outputs), param)
        return f"{name}:0"

    def _constant_node(self, const: Constant) -> list[tuple[str, int]]:
        if const not in self.tensors:
            name = self.names.of(const)
            layout = self.layouts.get(const, "")
            weight = self._weight_tensor(name, const, layout, WEIGHT_ROLE_OF_CONST, "constant")
            output = MSCTensor(f"{name}:0", weight.dtype, layout, list(const.data.shape))
            scalar = scalar_attr(const, self.config.float_precision)
            attrs = {"scalar": scalar} if scalar is not None else {}
            # a constant has no binding block; it belongs to the module first reading it
            self._add(NodeSpec(name, "constant", [], [output], attrs,
                               {WEIGHT_ROLE_OF_CONST: weight}, list(self.module)), const)
        return list(self.tensors[const])

    def _weight_tensor(self, name: str, const: Constant, layout: str, role: str,
                       optype: str) -> MSCTensor:
        """The weight tensor of ``const`` as ``role`` of ``optype`` reads it. One constant read
        in two layouts (a linear's ``OI`` weight and the ``IO`` constant itself, a graph
        output) gets a weight per layout: the second is named ``<name>_<layout>``."""
        dtype, shape = const.struct_info.dtype, list(const.data.shape)
        if role == "bias":
            want, shape = "O", [int(const.data.size)]
        elif role == "weight" and optype in LINEAR_OPTYPES and layout == "IO":
            want, shape = "OI", shape[::-1]
        else:
            want = layout
        views = self.views.setdefault(name, [])
        for ref in views:
            if (ref.tensor.layout.name, ref.tensor.shape) == (want, shape):
                return ref.tensor
        own, k = name, 0
        while own in self.weights or (views and own in self.specs):
            k += 1
            own = f"{name}_{want.lower() or 'data'}" + (f"_{k - 1}" if k > 1 else "")
        views.append(WeightRef(const, layout, MSCTensor(own, dtype, want, shape)))
        self.weights[own] = views[-1]
        return views[-1].tensor

    # ---- bindings -------------------------------------------------------------------------
    def _call(self, var: Var, call: Call) -> None:
        optype = call_optype(call, self.mod)
        if var in self.groups:
            self._fused(var, self.groups[var])
        elif optype in VANISHING_OPS:
            self.tensors[var] = self._inputs_of(call.args[0])
        else:
            self._plain_call(var, call, optype)

    def _plain_call(self, var: Var, call: Call, optype: str) -> None:
        args, arg_names, attrs = call.args, _arg_names(call), call_attrs(call)
        if op_name(call) == "call_dps_packed":
            args, arg_names, attrs = _plugin_args(call)
        elif not isinstance(call.op, Op):
            attrs, values = self._composite_attrs(call)
            args, arg_names = list(args) + values, arg_names + [""] * len(values)
        roles = roles_of(optype, len(args))
        self._call_node(var, self.names.of(var), optype, list(zip(args, roles, arg_names)),
                        attrs)

    def _fused(self, var: Var, group) -> None:
        name = self.names.of(var)
        roles = roles_of(group.optype, len(group.args))
        self._call_node(var, name, group.optype, list(zip(group.args, roles, group.keys)),
                        fused_attrs(group.calls), self._anchor_layout(group))

    def _anchor_layout(self, group) -> str | None:
        """MSC gives a fused node its anchor's layout (attention: ``ABCD`` between the
        permutes); a reshaping pattern (embedding) keeps its result's."""
        anchor, root = group.anchor.struct_info, group.root.struct_info
        same_rank = isinstance(anchor, TensorStructInfo) and \
            isinstance(root, TensorStructInfo) and anchor.ndim == root.ndim
        return self.layouts.get(group.anchor, "") if same_rank else None

    def _composite_attrs(self, call: Call) -> tuple[dict, list]:
        """A call to a composite function: the attrs of its calls, and its shape values."""
        func = call.op if isinstance(call.op, Function) else self.mod[call.op]
        inner = [b.value for blk in func.body.blocks for b in blk.bindings
                 if isinstance(b.value, Call)]
        values = [a for c in inner for a in c.args if isinstance(a, ShapeExpr)]
        return fused_attrs(inner), values

    def _call_node(self, var: Var, name: str, optype: str, args: list, attrs: dict,
                   layout: str | None = None) -> None:
        attrs = dict(attrs)
        values = [self.view.value_of(arg) for arg, _, _ in args]
        is_attr = [is_attr_arg(value) for value in values]
        for (_, role, arg_name), value, attr in zip(args, values, is_attr):
            if attr:
                key = arg_name if role == INPUT and arg_name else role
                attrs[key] = arg_attr(value)
                attrs.update(self._attr_prims(key, value))
        inputs, weights = [], {}
        for (arg, role, _), value, attr in zip(args, values, is_attr):
            if attr:
                continue
            if role != INPUT and isinstance(value, Constant):
                weights[role] = self._weight(value, role, optype, attrs)
            else:
                inputs.extend(self._inputs_of(arg))
        spec = NodeSpec(name, optype, inputs, self._outputs(name, var, optype, layout), attrs,
                        weights, list(self.scope), self._shared_ref(name, weights))
        self._add(spec, var)

    def _attr_prims(self, key: str, value: Expr) -> dict:
        """``{"<key>.prims": "0,k,ADD_3"}`` when an attr holds values read at run time
        (written ``-1`` in the attr; msc-conventions 1.3): per element, its number or the
        prim computing it. Dims of the graph inputs alone add nothing (as MSC's graphs)."""
        scalars = arg_scalars(value)
        if not any(isinstance(v, tir.PrimExpr) and _reads(v, self.run_time) for v in scalars):
            return {}
        names = [self.prims.match(v).name if isinstance(v, tir.PrimExpr) and not v.is_const
                 else str(int(v) if isinstance(v, tir.PrimExpr) else v) for v in scalars]
        return {f"{key}.prims": ",".join(names)}

    def _weight(self, const: Constant, role: str, optype: str, attrs: dict) -> MSCTensor:
        name = self.names.of(const)
        tensor = self._weight_tensor(name, const, self.layouts.get(const, ""), role, optype)
        scalar = scalar_attr(const, self.config.float_precision)
        if scalar is not None:
            attrs[role] = scalar
        return tensor

    def _shared_ref(self, node: str, weights: dict) -> str:
        ref = ""
        for tensor in weights.values():
            first = self.holders.setdefault(tensor.name, node)
            ref = ref or (first if first != node else "")
        return ref

    def _tuple(self, var: Var, value: Tuple) -> None:
        name = self.names.of(var)
        inputs = self._inputs_of(value)
        outputs = [self._tensor(f"{name}:{i}", f, self.output_tensor(ref).layout.name)
                   for i, (f, ref) in enumerate(zip(leaf_sinfos(var.struct_info), inputs))]
        self._add(NodeSpec(name, "tuple", inputs, outputs, scope=list(self.scope)), var)

    def _get_item(self, var: Var, item: TupleGetItem) -> None:
        source = self.view.value_of(item.tuple_value)
        producer = self.view.bound_value(source)
        if isinstance(producer, Call) and call_optype(producer, self.mod) in VANISHING_OPS:
            self.tensors[var] = self.tensors[source][:1]
            return
        name, inputs = self.names.of(var), self._inputs_of(item.tuple_value)
        layout = self.layouts.get(var, "")
        if item.index < len(inputs):
            layout = self.output_tensor(inputs[item.index]).layout.name
        outputs = [self._tensor(f"{name}:0", var.struct_info, layout)]
        self._add(NodeSpec(name, "get_item", inputs, outputs, {"index": str(item.index)},
                           scope=list(self.scope)), var)

    def _shape(self, var: Var | None, value: ShapeExpr) -> NodeSpec:
        """A ShapeExpr: a ``shape`` node, int32 1-D ``[ndim]``, layout ``O`` (msc-conventions
        3, 4.1). Bound ones are keyed by their var and their value (``value_of`` resolves a
        var bound to a ShapeExpr to the ShapeExpr); an unbound one (a function result) is
        named by ``naming.py`` and has no scope."""
        name = self.names.of(var if var is not None else value) or self._unique("shape")
        layout = self.layouts.get(var, "O") if var is not None else "O"
        outputs = [self._tensor(f"{name}:0", value.struct_info, layout)]
        scope = list(self.scope) if var is not None else []
        attrs = {"shape": arg_attr(value)}
        _, prims = self.prims.dims(value.values)
        if prims:  # symbolic dims: the prims the codegens read them from (x.shape[0])
            attrs["dim_prims"] = ",".join(prims)
        spec = self._add(NodeSpec(name, "shape", [], outputs, attrs, scope=scope), value)
        if var is not None:
            self.tensors[var] = self.tensors[value]
        return spec

    def _unique(self, hint: str) -> str:
        name, k = hint, 0
        while name in self.specs or name in self.names.values.values():
            k += 1
            name = f"{hint}_{k}"
        return name


_BINDINGS = {
    Call: GraphBuilder._call,
    Tuple: GraphBuilder._tuple,
    TupleGetItem: GraphBuilder._get_item,
    ShapeExpr: GraphBuilder._shape,
}


def attr_scopes(func: Function) -> dict:
    """``{var name: [scope...]}`` of the function's ``msc_scopes`` attr: a dict of var names to
    module paths, ``"layer1/layer1.0/conv1"`` or a list of segments (from_relax input that
    carries the model's hierarchy, as msc's frontends put it in spans)."""
    scopes = (func.attrs or {}).get("msc_scopes") or {}
    if not isinstance(scopes, dict):
        raise ValidationError(f"attr msc_scopes is a {type(scopes).__name__}", key="msc_scopes",
                              hint='give {"var name": "module/path"}')
    return {str(k): [s for s in v.split("/") if s] if isinstance(v, str) else
            [str(s) for s in v] for k, v in scopes.items()}


def _reads(expr, run_time: set) -> bool:
    """Whether ``expr`` uses a var of ``run_time``."""
    if expr in run_time:
        return True
    return not expr.is_const and any(_reads(c, run_time) for c in tir.children(expr))


def _arg_names(call: Call) -> list[str]:
    if isinstance(call.op, Op):
        names = [a.name for a in call.op.op_def.args]
        return names[:len(call.args)] + [""] * max(len(call.args) - len(names), 0)
    return [""] * len(call.args)


def _plugin_args(call: Call) -> tuple[list, list, dict]:
    """``call_dps_packed(extern, (inputs...))``: the plugin reads the tuple's fields."""
    fields = call.args[1].fields if len(call.args) > 1 and isinstance(call.args[1], Tuple) \
        else call.args[1:]
    return list(fields), [""] * len(fields), {}


# --------------------------------------------------------------------------------------------
# Node records -> MSCGraph.

def _live(specs: list[NodeSpec], outputs: list[str]) -> set[str]:
    by_name = {s.name: s for s in specs}
    live, stack = set(), [o.rpartition(":")[0] for o in outputs]
    while stack:
        name = stack.pop()
        if name not in live:
            live.add(name)
            stack.extend(p for p, _ in by_name[name].inputs)
    return live | {s.name for s in specs if s.optype == "input"}


def _set_aliases(specs: dict, inputs: list, outputs: list, config: BuildConfig) -> None:
    for i, ref in enumerate(inputs):
        node = specs[ref.rpartition(":")[0]]
        alias = config.input_aliases[i] if i < len(config.input_aliases) else node.name
        node.outputs[0].set_alias(alias)
    for i, ref in enumerate(outputs):
        host, _, idx = ref.rpartition(":")
        node = specs[host]
        alias = node.name if len(node.outputs) == 1 else ref.replace(":", "_")
        if i < len(config.output_aliases):
            alias = config.output_aliases[i]
        node.outputs[int(idx)].set_alias(alias)


def assemble(name: str, specs: list[NodeSpec], inputs: list, outputs: list, prims: list,
             config: BuildConfig, output_kinds: list | None = None) -> MSCGraph:
    """The MSCGraph of the node records (pruned to what the outputs need when asked)."""
    if config.prune_graph:
        live = _live(specs, outputs)
        specs = [s for s in specs if s.name in live]
    _set_aliases({s.name: s for s in specs}, inputs, outputs, config)
    joints: dict[str, MSCJoint] = {}
    for index, s in enumerate(specs):
        pairs = [(joints[p], i) for p, i in s.inputs]
        joints[s.name] = MSCJoint(index, s.name, s.shared_ref, s.optype, s.attrs, pairs,
                                  s.outputs, s.weights, scope=s.scope)
    return MSCGraph(name, list(joints.values()), inputs, outputs, prims, output_kinds)
