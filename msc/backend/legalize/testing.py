"""Helpers for testing legalization rules against the op's numpy reference and the TIR
interpreter (the tests of ``tests/backend/legalize/test_legalize_*.py`` are one line each on top
of these)::

    got, ref = check_op("nn.softmax", [x], axis=1)      # raises AssertionError on mismatch

Kernels compile into one JIT per process whose disk cache is a fresh temporary directory.
"""

from __future__ import annotations

import tempfile

import numpy as np

from ...relax.block_builder import BlockBuilder
from ...relax.expr import Tuple, Var
from ...relax.op import numpy_ref
from ...relax.op.registry import make_call
from ...relax.struct_info import TensorStructInfo, TupleStructInfo
from ...tir.interp import run_prim_func
from ..llvm.jit import JIT
from . import legalize_call

__all__ = ["TOLERANCE", "assert_close", "build_call", "check_op", "kernel_jit"]

# dtype -> (rtol, atol) of compiled kernels against the references.
TOLERANCE = {"float32": (1e-5, 1e-6), "float64": (1e-9, 1e-12), "float16": (4e-3, 4e-3),
             "bfloat16": (3e-2, 3e-2)}
_jit: list = []


def kernel_jit() -> JIT:
    """A JIT whose kernel cache lives in a temporary directory (one per process)."""
    if not _jit:
        from ..llvm.cache import KernelCache

        _jit.append(JIT(KernelCache(tempfile.mkdtemp(prefix="msc-test-kernels-"))))
    return _jit[0]


def dtype_name(a: np.ndarray) -> str:
    return "bfloat16" if a.dtype.name == "bfloat16" else str(a.dtype)


def build_call(op: str, tensors, *args, **attrs):
    """A normalized call of ``op`` on Vars shaped like ``tensors`` (a list in an arg position
    becomes a Tuple of Vars), followed by the other args."""
    names = iter("xyzwuvabcdefgh")

    def var(a):
        return Var(next(names), TensorStructInfo(a.shape, dtype_name(a)))
    exprs = [Tuple([var(t) for t in a]) if isinstance(a, (list, tuple)) else var(a)
             for a in tensors]
    return BlockBuilder().normalize(make_call(op, *exprs, *args, **attrs))


def _flat(arrays) -> list:
    out = []
    for a in arrays:
        out.extend(a) if isinstance(a, (list, tuple)) else out.append(a)
    return out


def reference(call, tensors):
    """The numpy fact's result for ``call`` on ``tensors`` (non-tensor args from the call)."""
    values, it = [], iter(tensors)
    for arg in call.args:
        s = arg.struct_info
        if isinstance(s, TensorStructInfo) or (isinstance(s, TupleStructInfo) and all(
                isinstance(f, TensorStructInfo) for f in s.fields)):
            values.append(next(it))
        else:
            values.append(numpy_ref.expr_value(arg))
    return numpy_ref.evaluate_call(call, values)


def assert_close(got, want, dtype: str, what: str = "", scale: float = 1.0) -> None:
    rtol, atol = TOLERANCE.get(dtype, (0, 0))
    got_t = got if isinstance(got, tuple) else (got,)
    want_t = want if isinstance(want, tuple) else (want,)
    assert len(got_t) == len(want_t), what
    for g, w in zip(got_t, want_t):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape, f"{what}: shape {g.shape} != {w.shape}"
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol * scale,
                                   atol=atol * scale, equal_nan=True, err_msg=what)


def assert_round_trip(func) -> None:
    """The printed func parses back to a func that prints the same (a fixed point).
    Funcs with 0-d buffers are skipped: msc.tir.printer prints ``y[]`` where TVMScript
    needs ``y[()]`` (the parser reads the latter)."""
    from ...tir.parser import parse_tir_text

    if any(not p.shape for p in func.buffers):
        return
    text = func.script()
    again = parse_tir_text(text)[func.name]
    assert again.script() == text, f"{func.name}: print -> parse -> print changed the text"


def check_op(op: str, tensors, *args, interp: bool = True, scale: float = 1.0, **attrs):
    """Legalize ``op`` on ``tensors``, compile it, and compare the kernel with the numpy
    reference and (``interp``) the TIR interpreter. Returns (kernel result, reference)."""
    return check_call(build_call(op, tensors, *args, **attrs), tensors, interp=interp,
                      scale=scale)


def check_call(call, tensors, *, interp: bool = True, scale: float = 1.0):
    """:func:`check_op` for a call built by the caller (``tensors``: its tensor args)."""
    op = call.op.name
    func = legalize_call(call)
    assert func is not None, f"{op} did not legalize"
    assert_round_trip(func)
    from ..lowering.compile import compile_prim_func

    kernel = compile_prim_func(func, jit=kernel_jit())
    flat = _flat(tensors)
    got = kernel(*flat)
    want = reference(call, tensors)
    dtype = dtype_name(flat[0]) if flat else call.struct_info.dtype
    assert_close(got, want, dtype, f"{op} vs numpy", scale)
    if interp:
        assert_close(got, run_prim_func(func, *flat), dtype, f"{op} vs TIR interpreter", scale)
    return got, want
