"""torch.fx graphs -> Relax: one dispatch loop over the fx nodes.

Every call node is resolved to a converter before anything is emitted, so a model with
unsupported ops fails once, listing all of them. Each converter gets the node's arguments
(fx nodes replaced by their Relax values) bound to its torch-style signature::

    mod, names = translate_fx(torch.fx.symbolic_trace(model), [((1, 3, 8, 8), "float32")])
    names[const]            # the state_dict key of each weight constant
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from dataclasses import dataclass

from msc import relax
from msc.errors import MSCError, UnsupportedOpError, ValidationError

from ..scopes import module_scope
from .aliasing import check_inplace, writes_in_place
from .common import Context, ParamTable, input_vars, is_tensor
from .converters import FX_FUNCTIONS, MODULES

__all__ = ["FxTranslator", "GraphTranslator", "trace_fx", "translate_fx"]

# Keyword arguments that never change the math (placement, memory format, autograd).
IGNORED_KWARGS = frozenset({"device", "layout", "pin_memory", "memory_format", "non_blocking",
                            "requires_grad", "copy", "generator", "inplace"})
# Python's in-place operators: on tensors they mutate their left operand.
_INPLACE_OPERATORS = frozenset({"iadd", "isub", "imul", "itruediv", "ifloordiv", "imod",
                                "iand", "ior", "ixor", "ipow"})
# fx stores tensors made during tracing as attributes with this prefix (not model state).
_FX_CONSTANT = "_tensor_constant"
CUSTOM_HINT = ("register a converter with custom_convert_map={target: fn}, where "
               "fn(ctx, *args, **kwargs) emits Relax ops through ctx.emit and returns the result "
               "(see frontends/torch/common.py)")


@dataclass
class Target:
    """A resolved call: the converter, the module settings (module calls) and whether the op
    writes its first argument in place."""

    fn: Callable
    settings: Callable | None = None
    inplace: bool = False


class _Failed:
    """The value of a node whose conversion failed (its users are skipped)."""


FAILED = _Failed()


class GraphTranslator:
    """The shared dispatch loop; subclasses say how targets resolve and params are found."""

    def __init__(self, custom_convert_map: dict | None = None):
        self.custom = dict(custom_convert_map or {})
        self.params = ParamTable()
        self.env: dict = {}
        self.errors: list = []
        self.ctx: Context | None = None
        self._order: dict = {}

    # ---- resolution (subclasses) ----------------------------------------------------------
    def resolve(self, node) -> Target | None:
        raise NotImplementedError

    def display_name(self, node) -> str:
        raise NotImplementedError

    def placeholder(self, node):
        raise NotImplementedError

    def get_attr(self, node):
        raise NotImplementedError

    def module_of(self, node):
        return None

    # ---- the loop -------------------------------------------------------------------------
    def check_supported(self, nodes) -> None:
        """One UnsupportedOpError listing every target without a converter."""
        missing: dict[str, dict] = {}
        for node in nodes:
            if node.op.startswith("call_") and self.resolve(node) is None:
                item = missing.setdefault(self.display_name(node),
                                          {"count": 0, "node": node.name, "kind": node.op})
                item["count"] += 1
        if missing:
            items = [{"op": name, **info} for name, info in missing.items()]
            raise UnsupportedOpError(f"{len(items)} torch op(s) have no converter",
                                     items=items, hint=CUSTOM_HINT)

    def translate(self, graph, inputs: list, output_filter=None) -> relax.IRModule:
        nodes = list(graph.nodes)
        self.check_supported(nodes)
        self._order = {node: i for i, node in enumerate(nodes)}
        bb = relax.BlockBuilder()
        self.ctx = Context(bb, self.params)
        self._inputs = list(inputs)
        with bb.function("main", inputs):
            with bb.dataflow():
                output = None
                for node in nodes:
                    if node.op == "output":
                        output = self.output(node, output_filter)
                        break
                    with bb.span(node_span(node)):
                        self.env[node] = self.convert(node)
                self.raise_errors()
                result = bb.emit_output(output)
            bb.emit_func_output(result)
        return bb.get()

    def convert(self, node):
        if node.op == "placeholder":
            return self.placeholder(node)
        if node.op == "get_attr":
            return self.get_attr(node)
        args, kwargs = self.values(node.args), self.values(node.kwargs)
        if _has_failed((args, kwargs)):
            return FAILED
        target = self.resolve(node)
        try:
            if target.inplace and node.args and node.args[0] in self.env:
                check_inplace(node, self._order, self.display_name(node))
            out = self.call(node, target, args, kwargs)
        except MSCError as err:
            self.errors.append((node, err))
            return FAILED
        if target.inplace and node.args and node.args[0] in self.env and is_tensor(out):
            self.env[node.args[0]] = out
        return out

    def call(self, node, target: Target, args, kwargs):
        ctx = self.ctx
        ctx.node, ctx.module = node, self.module_of(node)
        ctx.module_name = node.target if node.op == "call_module" else ""
        kwargs = {k: v for k, v in kwargs.items()
                  if k not in IGNORED_KWARGS and not (k == "out" and v is None)}
        if target.settings is not None:
            kwargs.update(target.settings(ctx, ctx.module))
        bound = bind(target.fn, args, kwargs, self.display_name(node), node.name)
        return target.fn(ctx, *bound.args[1:], **bound.kwargs)

    def values(self, arg):
        import torch

        return torch.fx.node.map_aggregate(
            arg, lambda a: self.env[a] if isinstance(a, torch.fx.Node) else a)

    def output(self, node, output_filter=None):
        """The function result: one tensor, or a flat tuple of the tensors torch returns."""
        import torch

        value = self.values(node.args[0])
        if _has_failed(value):
            return None
        if output_filter is not None:
            value = output_filter(value)
        if isinstance(value, relax.Expr) and not isinstance(value, relax.Tuple):
            return value
        leaves, _ = torch.utils._pytree.tree_flatten(value)
        leaves = [leaf for leaf in _flatten_tuples(leaves) if leaf is not None]
        return relax.Tuple([v if isinstance(v, relax.Expr) else relax.const(v) for v in leaves])

    def raise_errors(self) -> None:
        if not self.errors:
            return
        items = [{"op": self.display_name(node), "node": node.name, "error": err.message}
                 for node, err in self.errors]
        first = self.errors[0][1]
        kind = UnsupportedOpError if all(isinstance(e, UnsupportedOpError)
                                         for _, e in self.errors) else type(first)
        message = f"{len(items)} torch op(s) failed to convert"
        if kind is UnsupportedOpError:
            raise UnsupportedOpError(message, items=items, hint=CUSTOM_HINT)
        details = "\n".join(f"  - {i['op']} (node {i['node']}): {i['error']}" for i in items)
        raise kind(f"{message}\n{details}", hint=first.hint)


def node_span(node) -> relax.Span:
    """The node's name and module scope, from the ``nn_module_stack`` torch.fx's tracer and
    torch.export record (``{key: (qualified name, type)}``, outermost first)."""
    stack = node.meta.get("nn_module_stack") or {}
    return relax.Span(node.name, module_scope([path for path, _ in stack.values()]))


def _flatten_tuples(values):
    for v in values:
        if isinstance(v, relax.Tuple):
            yield from _flatten_tuples(v.fields)
        else:
            yield v


def _has_failed(value) -> bool:
    if value is FAILED:
        return True
    if isinstance(value, (list, tuple)):
        return any(_has_failed(v) for v in value)
    if isinstance(value, dict):
        return any(_has_failed(v) for v in value.values())
    return False


_SIGNATURES: dict = {}


def bind(fn, args, kwargs, op: str, node: str) -> inspect.BoundArguments:
    """Bind a node's arguments to the converter's (torch-style) signature, once."""
    sig = _SIGNATURES.get(fn)
    if sig is None:
        sig = _SIGNATURES[fn] = inspect.signature(fn)
    try:
        return sig.bind(None, *args, **kwargs)
    except TypeError as err:
        raise ValidationError(f"arguments do not fit the converter: {err}", op=op, node=node,
                              hint=f"converter signature: {fn.__name__}{sig}") from None


# --------------------------------------------------------------------------------------------
# fx.

# Where fx finds functions -> the names users write them with.
_PUBLIC_PREFIXES = {"_operator.": "operator.", "torch.nn.functional.": "F.",
                    "torch._C._nn.": "F.", "torch._C._special.special_": "torch.special.",
                    "torch._C._linalg.linalg_": "torch.linalg.", "torch._C._fft.fft_":
                    "torch.fft."}


def _qualified_name(target) -> str:
    import torch

    try:
        name = torch.fx.node._get_qualified_name(target)
    except (RuntimeError, AttributeError):
        name = getattr(target, "__name__", repr(target))
    for prefix, public in _PUBLIC_PREFIXES.items():
        if name.startswith(prefix):
            return public + name[len(prefix):]
    return name


def _module_type_name(cls) -> str:
    module = cls.__module__
    if module.startswith("torch.nn"):
        return f"nn.{cls.__name__}"
    return f"{module}.{cls.__name__}"


# What a subclass may define and still compute exactly what its base's table row converts.
_SAME_MATH = frozenset({"__init__", "extra_repr", "reset_parameters", "_reset_parameters",
                        "reset_running_stats", "_load_from_state_dict", "__setstate__",
                        "__repr__", "__init_subclass__"})


def _lookup_type(table: dict, cls):
    """The row of ``cls`` or of a base class it only configures. A subclass that overrides
    ``forward`` (or anything it calls) is another module: timm's BatchNormAct2d applies an
    activation, Conv2dSame pads, ScaledStdConv2d standardizes its weight. It gets no row, so
    fx traces into its forward."""
    for base in cls.__mro__:
        if base in table:
            return table[base] if _only_configures(cls, base) else None
    return None


def _only_configures(cls, base) -> bool:
    for klass in cls.__mro__[:cls.__mro__.index(base)]:
        for name, value in vars(klass).items():
            if name in _SAME_MATH:
                continue
            if callable(value) or isinstance(value, (property, staticmethod, classmethod)):
                return False
    return True


class FxTranslator(GraphTranslator):
    """A torch.fx GraphModule (from symbolic_trace) -> Relax."""

    def __init__(self, gm, custom_convert_map: dict | None = None):
        super().__init__(custom_convert_map)
        self.gm = gm
        self.modules = dict(gm.named_modules())
        owned = [name for name, _ in gm.named_parameters()] + [
            name for name, _ in gm.named_buffers() if not name.startswith(_FX_CONSTANT)]
        self.params = ParamTable(owned)

    def module_of(self, node):
        return self.modules.get(node.target) if node.op == "call_module" else None

    def display_name(self, node) -> str:
        if node.op == "call_module":
            return _module_type_name(type(self.modules[node.target]))
        if node.op == "call_method":
            return f"Tensor.{node.target}"
        return _qualified_name(node.target)

    def resolve(self, node) -> Target | None:
        target = self._resolve(node)
        if target is not None and not target.inplace and writes_in_place(
                node, self.module_of(node)):
            return dataclasses.replace(target, inplace=True)
        return target

    def _resolve(self, node) -> Target | None:
        if node.op == "call_module":
            return self._resolve_module(type(self.modules[node.target]))
        name = node.target if node.op == "call_method" else getattr(node.target, "__name__",
                                                                    None)
        if node.op == "call_function" and node.target in self.custom:
            return Target(self.custom[node.target])
        return resolve_name(name, self.custom, FX_FUNCTIONS)

    def _resolve_module(self, cls) -> Target | None:
        custom = _lookup_type(self.custom, cls)
        if custom is not None:
            return Target(custom)
        row = _lookup_type(MODULES, cls)
        return Target(row[0], row[1]) if row is not None else None

    def placeholder(self, node):
        if not self._inputs:
            raise ValidationError(f"the model takes more inputs than input_info gives "
                                  f"(no entry for {node.name!r})", hint="give one (shape, "
                                  "dtype) per forward argument")
        return self._inputs.pop(0)

    def get_attr(self, node):
        import torch

        value = self.gm
        for atom in node.target.split("."):
            value = getattr(value, atom)
        if isinstance(value, torch.Tensor):
            return self.params.get(value, node.target)
        return value


def resolve_name(name, custom: dict, table: dict) -> Target | None:
    """Look a function/method name up in the custom map, then the table; ``x_`` falls back to
    ``x`` as an in-place op."""
    if name is None:
        return None
    inplace = name in _INPLACE_OPERATORS
    for key in (name,) + ((name[:-1],) if _is_inplace_name(name) else ()):
        fn = custom.get(key) or table.get(key)
        if fn is not None:
            return Target(fn, inplace=inplace or key != name)
    return None


def _is_inplace_name(name: str) -> bool:
    return name.endswith("_") and not name.endswith("__") and len(name) > 1


def trace_fx(model, custom_convert_map: dict | None = None):
    """torch.fx symbolic tracing where only modules with a converter are leaves: any other
    module (torch's own included, e.g. TransformerEncoderLayer) is traced through."""
    import torch

    custom = dict(custom_convert_map or {})

    class Tracer(torch.fx.Tracer):
        def is_leaf_module(self, m, qualname):
            cls = type(m)
            return _lookup_type(custom, cls) is not None or _lookup_type(MODULES, cls) is not None

        def getattr(self, attr, attr_val, parameter_proxy_cache):
            # torch.fx finds a parameter's name by scanning every named parameter on each
            # first access: quadratic in the parameter count. One id -> name map instead.
            name = _tensor_names(self).get(id(attr_val)) if isinstance(
                attr_val, torch.Tensor) else None
            if name is None:
                return super().getattr(attr, attr_val, parameter_proxy_cache)
            if name not in parameter_proxy_cache:
                parameter_proxy_cache[name] = self.create_proxy("get_attr", name, (), {})
            return parameter_proxy_cache[name]

    tracer = Tracer()
    graph = tracer.trace(model)
    return torch.fx.GraphModule(tracer.root, graph, type(model).__name__)


def _tensor_names(tracer) -> dict:
    """id -> first qualified name of the traced root's parameters (and buffers, when the
    tracer proxies them), as torch.fx's own scan would find them."""
    key = id(tracer.root)
    cached = getattr(tracer, "_msc_tensor_names", None)
    if cached is None or cached[0] != key:
        named = list(tracer.root.named_parameters())
        if tracer.proxy_buffer_attributes:
            named += list(tracer.root.named_buffers())
        names: dict = {}
        for name, tensor in named:
            names.setdefault(id(tensor), name)
        cached = tracer._msc_tensor_names = (key, names)
    return cached[1]


def translate_fx(gm, input_info, custom_convert_map: dict | None = None):
    """An fx GraphModule -> (IRModule, {Constant: state_dict key})."""
    translator = FxTranslator(gm, custom_convert_map)
    mod = translator.translate(gm.graph, input_vars(input_info))
    return mod, translator.params.names

