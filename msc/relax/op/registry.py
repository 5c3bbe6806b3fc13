"""The op table: one record per Relax op, read by every consumer.

An op is declared once with its expression arguments, its attributes (typed, with defaults, in
TVM's declaration order), its struct-info inference, its family (``unary``, ``conv``...) and
its traits (what is true of the op: ``pure``, ``view``, ``movement``, ``activation``... see
TRAITS). Consumers ask the table instead of spelling op names out (``ops_with("movement")``,
``ops_in("unary")``) and attach their own facts from their own modules
(``attach("nn.conv2d", "torch", ...)``, loaded by facts.py; ``ops_having("int8")``); nothing
re-derives defaults (``attrs_with_defaults``)::

    register("nn.relu", [Arg("data")], [], infer=unary_infer, family="unary")
    call = make_call("nn.relu", x)              # relax.op.nn.relu(x) does the same
    OPS["nn.relu"].facts["torch"]               # a consumer's fact, once load_facts("torch")
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ...errors import ShapeError, UnsupportedOpError, ValidationError
from ...tir import expr as tir
from ..expr import Attrs, Call, Expr, GlobalVar, ShapeExpr, Tuple, convert_to_expr
from ..struct_info import (
    PrimStructInfo,
    ShapeStructInfo,
    StructInfo,
    TensorStructInfo,
    TupleStructInfo,
    normalize_dtype,
)
from .facts import FACT_SOURCES, load_facts


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED = _Required()

# Argument kinds: how a Python value given for the argument becomes a Relax expr.
ARG_KINDS = ("tensor", "tensors", "shape", "prim", "any")


@dataclass(frozen=True)
class Arg:
    """An expression argument. ``kind`` is one of ARG_KINDS; ``default`` makes it optional."""

    name: str
    kind: str = "tensor"
    default: Any = REQUIRED


@dataclass(frozen=True)
class AttrDef:
    """An attribute. ``type`` is one of: int, float, bool, str, dtype, ints, floats, axes
    (None, an int or a list of ints), any. ``default`` REQUIRED means the caller must give it."""

    name: str
    type: str
    default: Any = REQUIRED


@dataclass
class OpDef:
    """One op's record. The traits (``pure`` ... ``stat_outputs``) are facts of the op itself,
    declared at registration and read by every consumer (``ops_with("view")``); ``facts``
    holds what consumers attach (kernels, torch rows, numpy references; see facts.py)."""

    name: str  # "nn.conv2d" (the Relax name without "relax.")
    args: tuple
    attrs: tuple
    infer: Callable
    family: str = ""  # the defs_* group it belongs to ("unary", "conv", "special", ...)
    normalize: Callable | None = None  # attrs dict -> attrs dict (e.g. int -> pair)
    builder: Callable | None = None  # custom Python signature (call_tir & co)
    # Traits.
    pure: bool = True  # no side effect (TVM's FPurity): unused calls may be dropped
    float_only: bool = False  # rejects integer inputs (inference raises)
    runtime: bool = False  # runtime plumbing: calls out, effects, runtime objects; no graph op
    runtime_call: bool = False  # calls code outside the op table (TIR, packed, VM builtin)
    view: bool = False  # the output is the input's data with a new shape: no copy needed
    # the output holds each input element exactly once, reordered (the views, permute_dims):
    # it commutes with elementwise maps, and a chain of them is a strided view (a view is one)
    movement: bool = False
    # a pointwise activation (relu, gelu, silu...): out[i] = f(x[i]), float in and out;
    # softmax (a row op) and dropout (identity at inference) share the family, not the fact
    activation: bool = False
    may_alias: bool = False  # the output may share memory with an input (views, slices)
    commutative: bool = False  # the two arguments may be swapped
    inference_identity: bool = False  # output 0 is the input at inference time (dropout)
    stat_outputs: tuple = ()  # tuple outputs that are statistics, not the result (batch_norm)
    shape_is_output: bool = False  # its shape argument is exactly the output's shape
    facts: dict = field(default_factory=dict)

    def __post_init__(self):
        self.movement = self.movement or self.view  # declared once: a view moves nothing

    @property
    def full_name(self) -> str:
        return "relax." + self.name

    @property
    def attr_defaults(self) -> dict:
        return {a.name: a.default for a in self.attrs}

    @property
    def optional_defaults(self) -> dict:
        """The defaults a caller may leave out (REQUIRED attrs excluded)."""
        return {a.name: a.default for a in self.attrs if a.default is not REQUIRED}


OPS: dict[str, OpDef] = {}
# Names of the traits ``register`` takes and ``ops_with`` answers.
TRAITS = ("pure", "float_only", "runtime", "runtime_call", "view", "movement", "activation",
          "may_alias", "commutative", "inference_identity", "stat_outputs", "shape_is_output")


class Op(Expr):
    """The op of a Call: ``call.op.name == "relax.nn.conv2d"``. One instance per op."""

    __slots__ = ("name", "op_def")
    _instances: ClassVar[dict] = {}

    def __init__(self, op_def: OpDef):
        super().__init__(None)
        self._init(name=op_def.full_name, op_def=op_def)

    @staticmethod
    def get(name: str) -> Op:
        op_def = get_op(name)
        if op_def.name not in Op._instances:
            Op._instances[op_def.name] = Op(op_def)
        return Op._instances[op_def.name]

    def __repr__(self) -> str:
        return f'Op("{self.name}")'


def register(name: str, args, attrs=(), *, infer: Callable, family: str = "",
             normalize: Callable | None = None, builder: Callable | None = None,
             **traits) -> OpDef:
    """Declare an op with its traits (``pure=False``, ``view=True``, ... see TRAITS).
    Re-registering a name is an error (one record per op)."""
    if name in OPS:
        raise ValidationError(f"op {name!r} is registered twice", op=name)
    for a in args:
        if a.kind not in ARG_KINDS:
            raise ValidationError(f"unknown arg kind {a.kind!r}", op=name, param=a.name)
    for trait in traits:
        _check_trait(trait)
    op_def = OpDef(name, tuple(args), tuple(attrs), infer, family, normalize, builder,
                   **traits)
    OPS[name] = op_def
    return op_def


def get_op(name: str) -> OpDef:
    key = name.removeprefix("relax.")
    if key not in OPS:
        close = difflib.get_close_matches(key, OPS, n=3)
        raise UnsupportedOpError(f"unknown Relax op {name!r}", op=name,
                                 hint=f"did you mean {', '.join(close)}?" if close else
                                 "see msc.relax.op.registry.OPS for the supported ops")
    return OPS[key]


def attach(op_name: str, key: str, value) -> None:
    """Attach a consumer's fact to an op (e.g. the backend's kernel, a torch codegen row)."""
    get_op(op_name).facts[key] = value


def ops_missing(key: str) -> list[str]:
    """Names of ops that have no fact ``key`` (for completeness tests)."""
    return sorted(name for name, d in OPS.items() if key not in d.facts)


def _check_trait(trait: str) -> None:
    if trait not in TRAITS:
        close = difflib.get_close_matches(trait, TRAITS, n=1)
        raise ValidationError(f"unknown op trait {trait!r}", key=trait,
                              hint=f"did you mean {close[0]}?" if close else
                              f"the traits are {', '.join(TRAITS)}")


def ops_with(trait: str, value: Any = True) -> frozenset[str]:
    """Names of the ops whose ``trait`` is ``value`` (truthy for ``True``)::

        ops_with("view")                 # {"reshape", "flatten", ...}
        ops_with("pure", False)          # {"print", "assert_op", ...}
    """
    _check_trait(trait)
    if value is True:
        return frozenset(n for n, d in OPS.items() if getattr(d, trait))
    return frozenset(n for n, d in OPS.items() if getattr(d, trait) == value)


def ops_in(*families: str) -> frozenset[str]:
    """Names of the ops of the given families (the ``family`` of ``register``)::

        ops_in("unary")                  # {"abs", "exp", ..., "isnan"}
        ops_in("conv", "pool")           # both families
    """
    known = {d.family for d in OPS.values()}
    for family in families:
        if family not in known:
            close = difflib.get_close_matches(family, known, n=1)
            raise ValidationError(f"unknown op family {family!r}", key=family,
                                  hint=f"did you mean {close[0]}?" if close else
                                  f"the families are {', '.join(sorted(known))}")
    return frozenset(n for n, d in OPS.items() if d.family in families)


def ops_having(kind: str) -> frozenset[str]:
    """Names of the ops a consumer attached a fact ``kind`` to; a kind of facts.py's
    FACT_SOURCES is loaded first::

        ops_having("int8")               # {"nn.conv2d", "add", ...}: the backend's int8 kernels
    """
    if kind in FACT_SOURCES:
        load_facts(kind)
    return frozenset(n for n, d in OPS.items() if kind in d.facts)


def attrs_with_defaults(call: Call) -> Attrs:
    """A call's attrs with the op's AttrDef defaults filled in where the call lacks them (a
    call built by hand), so consumers never repeat a default::

        attrs_with_defaults(call)["training"]      # batch_norm's declared default if unset
    """
    given = call.attrs if call.attrs is not None else Attrs()
    return Attrs({**call.op.op_def.optional_defaults, **dict(given.items())})


# --------------------------------------------------------------------------------------------
# Building calls.

def signature(op_def: OpDef) -> inspect.Signature:
    """The op's Python signature (made once per op: every call binds its arguments to it)."""
    cached = _SIGNATURES.get(op_def.name)
    if cached is not None and cached[0] is op_def:
        return cached[1]
    params = [signature_param(a.name, a.default) for a in op_def.args]
    params += [signature_param(a.name, a.default) for a in op_def.attrs]
    sig = inspect.Signature(params)
    _SIGNATURES[op_def.name] = (op_def, sig)
    return sig


_SIGNATURES: dict = {}  # op name -> (its OpDef, signature)


def signature_param(name: str, default) -> inspect.Parameter:
    default = inspect.Parameter.empty if default is REQUIRED else default
    return inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default)


def make_call(name: str, *args, **kwargs) -> Call:
    """Build a Call to op ``name`` from TVM-style Python arguments (bound to the signature)."""
    op_def = get_op(name)
    values = _positional_values(op_def, args) if not kwargs else None
    if values is None:
        try:
            bound = signature(op_def).bind(*args, **kwargs)
        except TypeError as err:
            raise ValidationError(f"bad arguments for R.{op_def.name}: {err}", op=op_def.name,
                                  hint=f"signature: {op_def.name}{signature(op_def)}") from None
        bound.apply_defaults()
        values = bound.arguments
    exprs = [_convert_arg(op_def, a, values[a.name]) for a in op_def.args]
    exprs = _drop_trailing_none(op_def, exprs)
    attrs = {a.name: convert_attr(op_def, a, values[a.name]) for a in op_def.attrs}
    if op_def.normalize is not None:
        attrs = op_def.normalize(attrs, exprs)
    return Call(Op.get(op_def.name), exprs, Attrs(attrs) if op_def.attrs else None)


def _positional_values(op_def: OpDef, args: tuple) -> dict | None:
    """What ``signature(op_def).bind(*args)`` + ``apply_defaults()`` give for positional
    arguments that leave no required parameter out; None for any other call (bound the slow
    way, which also words the errors). Converters call ops this way once per node."""
    params = op_def.args + op_def.attrs
    if len(args) > len(params) or any(p.default is REQUIRED for p in params[len(args):]):
        return None
    values = {p.name: a for p, a in zip(params, args)}
    for p in params[len(args):]:
        values[p.name] = p.default
    return values


def _drop_trailing_none(op_def: OpDef, exprs: list) -> list:
    """Optional expression args left as None are omitted (TVM: strided_slice strides)."""
    while exprs and exprs[-1] is None:
        exprs.pop()
    if any(e is None for e in exprs):
        raise ValidationError("an optional argument before a given one is missing",
                              op=op_def.name)
    return exprs


def _convert_arg(op_def: OpDef, arg: Arg, value):
    if value is None and arg.default is None:
        return None
    try:
        return _ARG_CONVERTERS[arg.kind](value)
    except ValidationError as err:
        raise ValidationError(err.message, op=op_def.name, param=arg.name) from None


def _to_tensor(value) -> Expr:
    if isinstance(value, (int, float, bool)) and not isinstance(value, Expr):
        from ..expr import const

        return const(value)
    return convert_to_expr(value)


def _to_shape(value) -> Expr:
    if isinstance(value, Expr):
        return value
    if isinstance(value, (list, tuple)):
        return ShapeExpr(value)
    raise ValidationError(f"expected a shape (list of ints/PrimExprs), got {value!r}")


def _to_tensors(value) -> Expr:
    if isinstance(value, Expr):
        return value
    if isinstance(value, (list, tuple)):
        return Tuple([_to_tensor(v) for v in value])
    raise ValidationError(f"expected a tuple of tensors, got {value!r}")


_ARG_CONVERTERS = {
    "tensor": _to_tensor,
    "tensors": _to_tensors,
    "shape": _to_shape,
    "prim": convert_to_expr,
    "any": convert_to_expr,
}


def convert_attr(op_def: OpDef, attr: AttrDef, value):
    """Normalize an attr value to plain Python (tuples for lists, str for dtypes)."""
    if value is REQUIRED:
        raise ValidationError(f"missing required attribute {attr.name!r}", op=op_def.name,
                              param=attr.name)
    if value is None:
        return None
    try:
        return _ATTR_CONVERTERS[attr.type](value)
    except (TypeError, ValueError):
        raise ValidationError(f"attribute {attr.name}={value!r} is not a valid {attr.type}",
                              op=op_def.name, param=attr.name) from None


def _int(v) -> int:
    if isinstance(v, tir.IntImm):
        return v.value
    if isinstance(v, float) and not v.is_integer():
        raise ValueError(v)
    return int(v)


def _ints(v) -> tuple:
    if isinstance(v, (int, tir.IntImm)) and not isinstance(v, bool):
        return (_int(v),)
    return tuple(_int(x) if not isinstance(x, tir.PrimExpr) or x.is_const else x for x in v)


def _axes(v):
    return _int(v) if isinstance(v, (int, tir.IntImm)) else tuple(_int(x) for x in v)


_ATTR_CONVERTERS = {
    "int": _int,
    "float": lambda v: float(v.value if isinstance(v, tir.FloatImm) else v),
    "bool": lambda v: bool(v.value if isinstance(v, tir.IntImm) else v),
    "str": str,
    "dtype": normalize_dtype,
    "ints": _ints,
    "floats": lambda v: tuple(float(x) for x in ((v,) if isinstance(v, (int, float)) else v)),
    "axes": _axes,
    "any": lambda v: v,
}


def make_function(op_def: OpDef) -> Callable:
    """The user-facing builder ``relax.op.<name>(...)`` with TVM's signature."""
    if op_def.builder is not None:
        return op_def.builder
    sig = signature(op_def)

    def build(*args, **kwargs):
        return make_call(op_def.name, *args, **kwargs)

    build.__name__ = op_def.name.rsplit(".", 1)[-1]
    build.__qualname__ = build.__name__
    build.__signature__ = sig
    build.__doc__ = f"Build a call to relax.{op_def.name}{sig}."
    return build


def install(namespace: dict, prefix: str = "") -> None:
    """Put the builders of ops named ``<prefix>.<x>`` (or plain ``x``) into a module."""
    for name, op_def in OPS.items():
        head, _, tail = name.rpartition(".")
        if head == prefix:
            namespace[tail] = make_function(op_def)


# --------------------------------------------------------------------------------------------
# Inference entry point (used by the BlockBuilder).

@dataclass
class InferContext:
    """What an inference function sees: the call, its args' struct info and attrs."""

    call: Call
    op_def: OpDef
    sinfo: list

    @property
    def attrs(self) -> Attrs:
        return self.call.attrs if self.call.attrs is not None else Attrs()

    @property
    def args(self) -> tuple:
        return self.call.args

    def arg_name(self, i: int) -> str:
        return self.op_def.args[i].name if i < len(self.op_def.args) else f"arg{i}"

    def error(self, message: str, i: int | None = None, hint: str | None = None) -> ShapeError:
        param = self.arg_name(i) if i is not None else None
        return ShapeError(message, op=self.op_def.name, param=param, hint=hint)

    def tensor(self, i: int) -> TensorStructInfo:
        s = self.sinfo[i] if i < len(self.sinfo) else None
        if not isinstance(s, TensorStructInfo):
            raise self.error(f"expected a tensor, got {s}", i)
        return s

    def tensors(self, i: int) -> list:
        s = self.sinfo[i]
        if not isinstance(s, TupleStructInfo) or not all(
                isinstance(f, TensorStructInfo) for f in s.fields):
            raise self.error(f"expected a tuple of tensors, got {s}", i)
        return list(s.fields)

    def shape_values(self, i: int):
        """The values of a shape argument (ShapeExpr or shape-typed var), or None."""
        s = self.sinfo[i]
        if not isinstance(s, ShapeStructInfo):
            raise self.error(f"expected a shape, got {s}", i)
        return s.values

    def prim(self, i: int):
        s = self.sinfo[i]
        if not isinstance(s, PrimStructInfo):
            raise self.error(f"expected a scalar (R.prim_value), got {s}", i)
        return s.value


def infer_struct_info(call: Call) -> StructInfo:
    """Run the op's inference on a call whose args already carry struct info."""
    op_def = call.op.op_def
    sinfo = [a.struct_info for a in call.args]
    for i, s in enumerate(sinfo):
        if s is None and not isinstance(call.args[i], GlobalVar):  # call_tir's callee
            raise ValidationError("argument has no struct info; emit it through the "
                                  "BlockBuilder first", op=op_def.name,
                                  param=InferContext(call, op_def, sinfo).arg_name(i))
    return op_def.infer(InferContext(call, op_def, sinfo))
