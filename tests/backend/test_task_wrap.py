"""Wrapped native tasks (msc/backend/runtime/task_wrap.py): an entry taking floats, doubles,
narrow ints and more arguments than a task record holds gets every argument bit-exact, on one
and on two threads, with bases added to its first arguments; a type it cannot pass is refused."""

import ctypes

import numpy as np
import pytest

from msc.backend.llvm.jit import get_jit
from msc.backend.runtime.task_wrap import wrapped_tasks
from msc.backend.runtime.threads import num_threads
from msc.errors import BuildError

# out[0..] = a, b, c, d, e + j, l, k: each argument lands in its own double
_PROBE_IR = """
define void @msc_test_wrap_probe(i64 %out, i32 %a, float %b, i8 %c, double %d, i64 %e, i64 %f,
                                 i64 %g, i64 %h, i64 %i, i64 %j, float %l, i32 %k) {
  %p = inttoptr i64 %out to double*
  %fa = sitofp i32 %a to double
  %fb = fpext float %b to double
  %fc = sitofp i8 %c to double
  %ej = add i64 %e, %j
  %fe = sitofp i64 %ej to double
  %fl = fpext float %l to double
  %fk = sitofp i32 %k to double
  %p1 = getelementptr double, double* %p, i64 1
  %p2 = getelementptr double, double* %p, i64 2
  %p3 = getelementptr double, double* %p, i64 3
  %p4 = getelementptr double, double* %p, i64 4
  %p5 = getelementptr double, double* %p, i64 5
  %p6 = getelementptr double, double* %p, i64 6
  store double %fa, double* %p
  store double %fb, double* %p1
  store double %fc, double* %p2
  store double %d, double* %p3
  store double %fe, double* %p4
  store double %fl, double* %p5
  store double %fk, double* %p6
  ret void
}
"""
_I64, _F32 = ctypes.c_int64, ctypes.c_float


def _probe():
    lib = get_jit().compile(_PROBE_IR, ["msc_test_wrap_probe"], name="msc_test_wrap_probe")
    return lib.cfunc("msc_test_wrap_probe", None, ctypes.c_void_p, ctypes.c_int32, _F32,
                     ctypes.c_int8, ctypes.c_double, _I64, _I64, _I64, _I64, _I64, _I64, _F32,
                     ctypes.c_int32)


@pytest.mark.parametrize("threads", [1, 2])
def test_every_argument_arrives_exactly(threads):
    rows = [(64 * i, -5 - i, 0.1 * (i + 1), -3 + i, 1e300 / (i + 1), 2**40 + i, 0, 0, 0, 0,
             -7 * i, -2.5e-7 * i, -(2**31) + i) for i in range(5)]
    out = np.full((5, 8), np.nan)
    with num_threads(threads):
        wrapped_tasks(_probe(), rows).launch(1, (out.ctypes.data,))
    for i, (_, a, b, c, d, e, *_, j, l, k) in enumerate(rows):
        assert out[i, :7].tolist() == [a, float(np.float32(b)), c, d, e + j,
                                       float(np.float32(l)), k]
    assert np.isnan(out[:, 7]).all()  # nothing written past the seven results


def test_a_type_without_a_conversion_is_refused():
    fn = ctypes.CFUNCTYPE(None, ctypes.c_char_p)(1)
    with pytest.raises(BuildError, match="c_char_p"):
        wrapped_tasks(fn, [(0,)])
    with pytest.raises(BuildError, match="2 arguments"):
        wrapped_tasks(_probe(), [(0, 1)])
