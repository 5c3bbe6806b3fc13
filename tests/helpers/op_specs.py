"""Specs of the nn / image / msc.* op tests (tests/relax/op/test_op_nn.py, test_op_msc.py),
materialized for msc and for TVM 0.27, and struct-info summaries compared by value.

A case is written once as specs (``T`` tensors, ``S`` symbolic scalars over n, h, w, c);
expected dims are Python expressions over n, h, w, c, compared at a few bindings (``ENVS``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from msc import relax, tir

ENVS = [{"n": 2, "h": 9, "w": 12, "c": 8}, {"n": 5, "h": 16, "w": 7, "c": 4},
        {"n": 1, "h": 31, "w": 30, "c": 16}]


@dataclass(frozen=True)
class T:
    """A tensor argument: dims are ints or expressions over n, h, w, c; None is unknown."""

    shape: tuple | None = None
    dtype: str = "float32"
    ndim: int = -1


@dataclass(frozen=True)
class S:
    """A symbolic scalar argument, e.g. S("h * 2")."""

    text: str


@dataclass(frozen=True)
class Out:
    dims: tuple | None
    dtype: str = "float32"
    ndim: int = -1


# --------------------------------------------------------------------------------------------
# Materializing specs for msc and TVM, and summarizing struct info for comparison.

def materialize(value, make_tensor, syms, k=0):
    if isinstance(value, T):
        shape = None if value.shape is None else [_dim(d, syms) for d in value.shape]
        return make_tensor(f"x{k}", shape, value.dtype, value.ndim)
    if isinstance(value, S):
        return eval(value.text, {}, dict(syms))
    if isinstance(value, (list, tuple)):
        return type(value)(materialize(v, make_tensor, syms, k * 10 + j)
                           for j, v in enumerate(value))
    return value


def _dim(d, syms):
    return eval(d, {}, dict(syms)) if isinstance(d, str) else d


MSC_SYMS = {name: tir.Var(name, "int64") for name in "nhwc"}


def msc_tensor(name, shape, dtype, ndim):
    return relax.Var(name, relax.TensorStructInfo(shape, dtype, ndim))


def _builder(namespace, op):
    """``op`` is a dotted name under ``namespace`` (relax.op) or already a builder."""
    return functools.reduce(getattr, op.split("."), namespace) if isinstance(op, str) else op


def msc_call(op, args, kwargs):
    build = _builder(relax.op, op)
    args = [materialize(a, msc_tensor, MSC_SYMS, k) for k, a in enumerate(args)]
    kwargs = {k: materialize(v, msc_tensor, MSC_SYMS) for k, v in kwargs.items()}
    return relax.BlockBuilder().normalize(build(*args, **kwargs))


def _eval_dims(dims, evaluate):
    if dims is None:
        return None
    return tuple(tuple(int(evaluate(d, env)) for env in ENVS) for d in dims)


def expected_summary(out):
    if isinstance(out, tuple):
        return tuple(expected_summary(o) for o in out)
    ndim = out.ndim if out.dims is None else len(out.dims)
    return out.dtype, ndim, _eval_dims(out.dims, lambda d, env: _dim(d, env))


def msc_summary(sinfo):
    if isinstance(sinfo, relax.TupleStructInfo):
        return tuple(msc_summary(f) for f in sinfo.fields)
    return sinfo.dtype, sinfo.ndim, _eval_dims(sinfo.values, tir.evaluate)


def _tvm_parts(tvm):
    syms = {name: tvm.tirx.Var(name, "int64") for name in "nhwc"}

    def make_tensor(name, shape, dtype, ndim):
        return tvm.relax.Var(name, tvm.relax.TensorType(shape, dtype, ndim=ndim))
    return syms, make_tensor


def tvm_call(tvm, op, args, kwargs):
    syms, make_tensor = _tvm_parts(tvm)
    build = _builder(tvm.relax.op, op)
    args = [materialize(a, make_tensor, syms, k) for k, a in enumerate(args)]
    kwargs = {k: materialize(v, make_tensor, syms) for k, v in kwargs.items()}
    bb = tvm.relax.BlockBuilder()
    bb._begin_binding_block()  # a scope, so nested calls (msc.* patterns) get bound
    call = bb.normalize(build(*args, **kwargs))
    bb._end_block()
    return call, syms


def tvm_summary(tvm, sinfo, syms):
    if isinstance(sinfo, tvm.relax.TupleType):
        return tuple(tvm_summary(tvm, f, syms) for f in sinfo.fields)
    values = None if sinfo.shape is None else list(sinfo.shape.values)
    return str(sinfo.dtype), sinfo.ndim, _eval_dims(values, _tvm_evaluator(tvm, syms))


def _tvm_evaluator(tvm, syms):
    def evaluate(dim, env):
        analyzer = tvm.sym.Analyzer()
        for name, var in syms.items():
            analyzer.bind(var, env[name])
        return analyzer.simplify(dim).value
    return evaluate
