"""Tensor-expression workloads under the names of TVM's ``meta_schedule.testing.te_workload``:
each returns the tensors ``(inputs..., output)`` that ``te.create_prim_func`` turns into a
TensorIR function, with TVM's stage names (``C``, ``Z``, ``PadInput``, ``conv2d_nhwc``)::

    func = te.create_prim_func(te_workload.matmul(512, 512, 512))   # blocks: C
"""

from __future__ import annotations

from ... import te
from ...tir import expr as E

__all__ = ["batch_matmul_nkkm", "conv2d_nhwc", "matmul", "matmul_relu"]


def matmul(n: int, m: int, k: int, in_dtype: str = "float32", out_dtype: str = "float32"):
    """``C[i, j] = sum_k A[i, k] * B[k, j]``, the products in ``out_dtype``."""
    a = te.placeholder((n, k), in_dtype, name="A")
    b = te.placeholder((k, m), in_dtype, name="B")
    r = te.reduce_axis((0, k), "k")
    c = te.compute((n, m), lambda i, j: te.sum(_as(a[i, r], out_dtype) * _as(b[r, j], out_dtype),
                                               axis=[r]), name="C")
    return a, b, c


def matmul_relu(n: int, m: int, k: int, in_dtype: str = "float32", out_dtype: str = "float32"):
    """:func:`matmul` followed by ``D = max(C, 0)``."""
    a, b, c = matmul(n, m, k, in_dtype, out_dtype)
    d = te.compute((n, m), lambda i, j: te.max(c[i, j], E.const(0, out_dtype)), name="D")
    return a, b, d


def batch_matmul_nkkm(b: int, n: int, m: int, k: int, in_dtype: str = "float32",
                      out_dtype: str = "float32"):
    """``Z[b, i, j] = sum_k X[b, i, k] * Y[b, k, j]``."""
    x = te.placeholder((b, n, k), in_dtype, name="X")
    y = te.placeholder((b, k, m), in_dtype, name="Y")
    r = te.reduce_axis((0, k), "k")
    z = te.compute((b, n, m), lambda v, i, j: te.sum(
        _as(x[v, i, r], out_dtype) * _as(y[v, r, j], out_dtype), axis=[r]), name="Z")
    return x, y, z


def conv2d_nhwc(n: int, h: int, w: int, ci: int, co: int, kernel_size: int, stride: int = 1,
                padding: int = 0, dilation: int = 1, groups: int = 1,
                in_dtype: str = "float32", out_dtype: str = "float32"):
    """A zero-padded NHWC convolution with an HWIO weight (``groups`` 1)."""
    if groups != 1:
        raise NotImplementedError("conv2d_nhwc workloads here have groups=1")
    inputs = te.placeholder((n, h, w, ci), in_dtype, name="inputs")
    weight = te.placeholder((kernel_size, kernel_size, ci, co), in_dtype, name="weight")
    padded = te.compute((n, h + 2 * padding, w + 2 * padding, ci),
                        lambda b, y, x, c: _padded(inputs, b, y, x, c, padding, h, w),
                        name="PadInput")
    out_h = (h + 2 * padding - dilation * (kernel_size - 1) - 1) // stride + 1
    out_w = (w + 2 * padding - dilation * (kernel_size - 1) - 1) // stride + 1
    rh = te.reduce_axis((0, kernel_size), "rh")
    rw = te.reduce_axis((0, kernel_size), "rw")
    rc = te.reduce_axis((0, ci), "rc")
    out = te.compute((n, out_h, out_w, co), lambda b, y, x, f: te.sum(
        _as(padded[b, y * stride + rh * dilation, x * stride + rw * dilation, rc], out_dtype)
        * _as(weight[rh, rw, rc, f], out_dtype), axis=[rh, rw, rc]), name="conv2d_nhwc")
    return inputs, weight, out


def _padded(inputs, b, y, x, c, pad: int, h: int, w: int):
    if pad == 0:
        return inputs[b, y, x, c]
    inside = E.binary("And", E.binary("And", E.binary("LE", pad, y), E.binary("LT", y, h + pad)),
                      E.binary("And", E.binary("LE", pad, x), E.binary("LT", x, w + pad)))
    return E.if_then_else(inside, inputs[b, y - pad, x - pad, c], E.const(0, inputs.dtype))


def _as(value, dtype: str):
    return value if value.dtype == dtype else E.Cast(dtype, value)
