"""The harness of the tensor op family tests (manipulate, create, reduce, index, linalg,
special, quant): ``tests/relax/op/test_op_<family>.py`` hold the per-op cases. A case builds one call with ``relax.op`` inside a BlockBuilder and states the
inferred struct info explicitly; where TVM 0.27 is installed, the same call is built with TVM
and both inferences are compared (dims evaluated at a few sizes, dtypes, ranks, attr order)::

    Case("reshape_flat", lambda R, x: R.reshape(x, [-1]), [t("n", 4)], "(n * 4,) float32")
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pytest

from msc import relax, tir
from msc.errors import ShapeError

# Symbolic dims are compared with TVM's at these sizes.
ENVS = ({"n": 5, "m": 3}, {"n": 8, "m": 2}, {"n": 1, "m": 7})
SYMBOLS = ("n", "m")

_TVM: dict = {}


def tvm_modules():
    """(tvm, tvm.relax) imported once per session; the test skips without TVM."""
    if not _TVM:
        tvm = pytest.importorskip("tvm")
        from tvm import relax as tvm_relax

        _TVM.update(tvm=tvm, relax=tvm_relax)
    return _TVM["tvm"], _TVM["relax"]


# --------------------------------------------------------------------------------------------
# Inputs and the two front ends a case is built with.

@dataclass(frozen=True)
class TensorSpec:
    dims: tuple | None  # ints and symbol names; None: unknown shape of rank ``ndim``
    dtype: str = "float32"
    ndim: int = -1


def t(*dims, dtype: str = "float32") -> TensorSpec:
    """An input tensor: ``t("n", 4)``, ``t(3, dtype="int64")``; ``t()`` is a scalar."""
    return TensorSpec(tuple(dims), dtype)


def t_any(ndim: int, dtype: str = "float32") -> TensorSpec:
    """An input tensor of rank ``ndim`` whose dims are unknown."""
    return TensorSpec(None, dtype, ndim)


class MscFrontend:
    """``R`` in a case under msc: ``R.<op>``, ``R.n``, ``R.const``, ``R.prim``, ``R.sinfo``."""

    op = relax.op
    TensorType = relax.TensorStructInfo

    def __init__(self):
        self.symbols = {name: tir.Var(name, "int64") for name in SYMBOLS}

    def __getattr__(self, name):
        if name in SYMBOLS:
            return self.symbols[name]
        return getattr(self.op, name)

    def dim(self, d):
        return self.symbols[d] if isinstance(d, str) else d

    def const(self, value, dtype=None):
        return relax.const(np.asarray(value, dtype) if dtype else value, dtype)

    def prim(self, value, dtype=None):
        """A scalar arg; ``dtype`` pins its type (Python floats differ: msc float32, TVM
        float64)."""
        if dtype is None:
            return relax.PrimValue(value)
        scalar = tir.IntImm if "int" in dtype else tir.FloatImm
        return relax.PrimValue(scalar(value, dtype))

    def sinfo(self, dims, dtype="float32"):
        return self.TensorType([self.dim(d) for d in dims], dtype)

    def gvar(self, name):
        return relax.GlobalVar(name)

    def var(self, name, spec: TensorSpec):
        return relax.Var(name, self.tensor_type(spec))

    def tensor_type(self, spec: TensorSpec):
        if spec.dims is None:
            return self.TensorType(None, spec.dtype, ndim=spec.ndim)
        return self.TensorType([self.dim(d) for d in spec.dims], spec.dtype)

    def build(self, body, specs):
        """(output var, call) of ``body(R, *inputs)`` emitted in a function."""
        params = [self.var(f"x{i}", s) for i, s in enumerate(specs)]
        bb = self.block_builder()
        with bb.function("main", params):
            with bb.dataflow():
                call = body(self, *params)
                out = bb.emit_output(call)
            bb.emit_func_output(out)
        return out, call

    def block_builder(self):
        return relax.BlockBuilder()


class TvmFrontend(MscFrontend):
    """The same names on TVM 0.27."""

    def __init__(self):
        tvm, tvm_relax = tvm_modules()
        self.tvm, self.relax = tvm, tvm_relax
        self.op, self.TensorType = tvm_relax.op, tvm_relax.TensorType
        self.symbols = {name: tvm.tirx.Var(name, "int64") for name in SYMBOLS}

    def const(self, value, dtype=None):
        return self.relax.const(np.asarray(value, dtype) if dtype else value, dtype)

    def prim(self, value, dtype=None):
        return self.relax.prim_value(self.tvm.tirx.const(value, dtype) if dtype else value)

    def gvar(self, name):
        return self.tvm.ir.GlobalVar(name)

    def var(self, name, spec: TensorSpec):
        return self.relax.Var(name, self.tensor_type(spec))

    def block_builder(self):
        return self.relax.BlockBuilder()


# --------------------------------------------------------------------------------------------
# Printing and comparing struct info.

def fmt(sinfo) -> str:
    """Compact text of an msc struct info: ``(n * 4,) float32``, ``ndim=2 int64``, ``[a, b]``."""
    if isinstance(sinfo, relax.TupleStructInfo):
        return "[" + ", ".join(fmt(f) for f in sinfo.fields) + "]"
    if isinstance(sinfo, relax.TensorStructInfo):
        if sinfo.values is None:
            return f"ndim={sinfo.ndim} {sinfo.dtype}"
        return f"{_dims(sinfo.values)} {sinfo.dtype}"
    if isinstance(sinfo, relax.ShapeStructInfo):
        return f"shape{_dims(sinfo.values)}" if sinfo.values is not None else \
            f"shape(ndim={sinfo.ndim})"
    return type(sinfo).__name__


def _dims(values) -> str:
    inner = ", ".join(tir.to_str(v) for v in values)
    return f"({inner},)" if len(values) == 1 else f"({inner})"


def msc_summary(sinfo, env: dict):
    """A framework-neutral summary of struct info, dims evaluated with ``env``."""
    if isinstance(sinfo, relax.TupleStructInfo):
        return [msc_summary(f, env) for f in sinfo.fields]
    if isinstance(sinfo, relax.TensorStructInfo):
        dims = None if sinfo.values is None else [tir.evaluate(v, env) for v in sinfo.values]
        return ("tensor", dims, sinfo.ndim, sinfo.dtype)
    if isinstance(sinfo, relax.ShapeStructInfo):
        dims = None if sinfo.values is None else [tir.evaluate(v, env) for v in sinfo.values]
        return ("shape", dims, sinfo.ndim)
    return "object"


def tvm_summary(front: TvmFrontend, ty, env: dict):
    relax_ = front.relax
    if isinstance(ty, relax_.TupleType):
        return [tvm_summary(front, f, env) for f in ty.fields]
    if isinstance(ty, relax_.TensorType):
        dims = None if ty.shape is None else [_tvm_eval(front, v, env) for v in ty.shape.values]
        return ("tensor", dims, ty.ndim, str(ty.dtype))
    if isinstance(ty, relax_.ShapeType):
        dims = None if ty.values is None else [_tvm_eval(front, v, env) for v in ty.values]
        return ("shape", dims, ty.ndim)
    return "object"


def _tvm_eval(front: TvmFrontend, dim, env: dict) -> int:
    analyzer = front.tvm.sym.Analyzer()
    for name, value in env.items():
        analyzer.bind(front.symbols[name], front.tvm.tirx.IntImm("int64", value))
    return int(analyzer.simplify(dim))


def attr_names(call) -> list:
    return list(call.attrs.keys()) if call.attrs is not None else []


def tvm_attr_names(call) -> list:
    if call.attrs is None:
        return []
    return re.findall(r"(?:\(|, )(\w+)=", str(call.attrs))


# --------------------------------------------------------------------------------------------
# Cases.

@dataclass
class Case:
    """One call: ``build(R, *inputs)`` must infer ``expected``; ``tvm`` says whether TVM 0.27
    infers the same (False, with a comment, where msc deliberately differs)."""

    id: str
    build: object
    inputs: list
    expected: str
    tvm: bool = True
    envs: tuple = field(default=ENVS)

    def __str__(self) -> str:
        return self.id

    def check(self) -> None:
        out, _ = MscFrontend().build(self.build, self.inputs)
        assert fmt(out.struct_info) == self.expected

    def check_tvm(self) -> None:
        front = TvmFrontend()
        theirs, their_call = front.build(self.build, self.inputs)
        ours, our_call = MscFrontend().build(self.build, self.inputs)
        assert attr_names(our_call) == tvm_attr_names(their_call)
        for env in self.envs:
            assert msc_summary(ours.struct_info, env) == tvm_summary(front, theirs.ty, env), env


@dataclass
class Err:
    """A call msc must reject with a ShapeError naming the op (and TVM rejects too, unless
    ``tvm`` is False); ``match`` is a regex over the message."""

    id: str
    build: object
    inputs: list
    match: str
    tvm: bool = True

    def __str__(self) -> str:
        return self.id

    def check(self) -> None:
        with pytest.raises(ShapeError, match=self.match) as info:
            MscFrontend().build(self.build, self.inputs)
        assert info.value.context.get("op"), "the error must name the op"

    def check_tvm(self) -> None:
        front = TvmFrontend()
        with pytest.raises(Exception) as info:  # TVM raises several types
            front.build(self.build, self.inputs)
        assert not isinstance(info.value, (AttributeError, NameError)), "a broken case"


def family_tests(cases: list, errors: list) -> tuple:
    """The parametrized tests of a family file, bound to module names there::

        test_infer, test_same_as_tvm, test_error, test_tvm_rejects_too = family_tests(C, E)
    """

    @pytest.mark.parametrize("case", cases, ids=str)
    def test_infer(case):
        case.check()

    # Cases where msc deliberately differs from TVM (each has a comment) are not compared.
    @pytest.mark.parametrize("case", [c for c in cases if c.tvm], ids=str)
    def test_same_as_tvm(case):
        case.check_tvm()

    @pytest.mark.parametrize("case", errors, ids=str)
    def test_error(case):
        case.check()

    @pytest.mark.parametrize("case", [e for e in errors if e.tvm], ids=str)
    def test_tvm_rejects_too(case):
        case.check_tvm()

    return test_infer, test_same_as_tvm, test_error, test_tvm_rejects_too
