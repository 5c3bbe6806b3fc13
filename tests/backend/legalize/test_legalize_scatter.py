"""Legalized index / scatter / creation gap ops (index_tensor, index_put, slice_scatter,
dynamic_strided_slice, reverse_sequence, layout_transform, meshgrid, hamming_window) against
the numpy facts and the TIR interpreter, and the native nonzero kernel against its numpy fact;
then each op through relax.build(legalize="prefer") + VirtualMachine with ex.stats checked."""

from __future__ import annotations

import numpy as np
import pytest

from msc import relax
from msc.backend.kernels.base import Site
from msc.backend.kernels.nonzero import NonzeroFact, NonzeroKernel
from msc.backend.legalize import legalize_call
from msc.backend.legalize.index import (
    _index_put,
    _index_tensor,
    _reverse_sequence,
    _slice_scatter,
)
from msc.backend.legalize.testing import (
    assert_close,
    build_call,
    check_call,
    check_op,
    kernel_jit,
    reference,
)
from msc.backend.lowering.compile import compile_prim_func
from msc.errors import RuntimeCallError, ShapeError, UnsupportedOpError
from msc.relax.block_builder import BlockBuilder
from msc.relax.op.registry import make_call
from msc.relax.struct_info import TensorStructInfo
from msc.tir import expr as tir

RNG = np.random.default_rng(0)
DTYPES = ["float32", "float16", "int32", "int64", "bool"]


def _data(shape, dtype="float32"):
    x = RNG.standard_normal(shape) * 4
    return (x > 0) if dtype == "bool" else x.astype(dtype)


def _ints(lo, hi, shape, dtype="int64"):
    return RNG.integers(lo, hi, shape).astype(dtype)


def _kernel(call):
    return compile_prim_func(legalize_call(call), jit=kernel_jit())


# --------------------------------------------------------------------------------- index_tensor

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
def test_index_tensor_broadcast_negative(dtype, index_dtype):
    x = _data((4, 3, 5), dtype)
    i0 = _ints(-4, 4, (2, 1), index_dtype)      # broadcasts against i1
    i1 = _ints(-3, 3, (3,), index_dtype)
    got, _ = check_op("index_tensor", [x, [i0, i1]])
    assert got.shape == (2, 3, 5)


@pytest.mark.parametrize("shapes", [[(5,)], [(2, 2), (2, 2), (2, 2)], [(1,), (1,)], [(0,)],
                                    [(3, 1, 2), (1, 4, 1)], []], ids=str)
def test_index_tensor_edge_shapes(shapes):
    x = _data((4, 1, 3))
    idx = [_ints(-d, d, s) for s, d in zip(shapes, x.shape)]
    check_op("index_tensor", [x, idx])


def test_index_tensor_refuses_masks_and_mismatched_indices():
    x = _data((4, 3))
    assert legalize_call(build_call("index_tensor", [x, [x > 0]])) is None
    call = build_call("index_tensor", [x, [_ints(0, 3, (3,)), _ints(0, 3, (3,))]])
    assert legalize_call(call) is not None
    with pytest.raises(UnsupportedOpError, match="boolean masks"):
        _index_tensor(build_call("index_tensor", [x, [x > 0]]))


# ------------------------------------------------------------------------------------ index_put

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_repeated_negative(dtype, accumulate):
    data = _data((4, 5), dtype)
    if accumulate:  # repeated positions add up (numpy's add.at), in both index forms
        i0, i1 = np.array([0, -4, 2, 2, -1]), np.array([1, 1, -1, 4, 0])
    else:
        i0, i1 = np.array([0, -1, 2]), np.array([1, 3, -2])
    values = _data(i0.shape, dtype)
    got, _ = check_op("index_put", [data, [i0, i1], values], accumulate=accumulate)
    if accumulate and dtype != "bool":
        assert got[0, 1] == (data[0, 1] + values[0] + values[1]).astype(dtype)


@pytest.mark.parametrize("idx_shapes, value_shape", [
    ([(3,), (3,)], (1,)),              # one value broadcast to every position
    ([(2, 1), (3,)], (3,)),            # indices broadcast, values along the last dim
    ([(2, 1), (1, 3)], (2, 1)),        # values broadcast along the last dim
    ([(0,), (0,)], (0,)),              # nothing to put
], ids=str)
@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_broadcast(idx_shapes, value_shape, accumulate):
    data = _data((3, 4))
    idx = [_ints(-d, d, s) for s, d in zip(idx_shapes, data.shape)]
    check_op("index_put", [data, idx, _data(value_shape)], accumulate=accumulate)


def test_index_put_values_with_a_leading_1():
    """``out[idx] = values`` drops leading 1s of values (np.add.at refuses them)."""
    data = _data((3, 4))
    check_op("index_put", [data, [_ints(0, 3, (2, 1)), _ints(0, 4, (1, 3))], _data((1, 2, 3))])


def test_index_put_rank1_and_size1_dims():
    check_op("index_put", [_data((6,), "int32"), [np.array([5, -6, 5])],
                           np.array([1, 2, 3], "int32")], accumulate=True)
    check_op("index_put", [_data((1, 1, 4)), [np.zeros(2, "int64"), np.array([0, -1]),
                                              np.array([3, 3])], _data((2,))], accumulate=True)


def test_index_put_refuses_out_of_range_writes():
    """numpy raises on these, so does the kernel; it never writes outside the output (or an
    empty one: the compiler sends such an access to a spare slot)."""
    data = _data((3, 4))
    i0, i1, values = np.array([0, 7, -9, 2]), np.array([1, 1, 0, 9]), _data((4,))
    kernel = _kernel(build_call("index_put", [data, [i0, i1], values]))
    with pytest.raises(RuntimeCallError, match="out of range") as err:
        kernel(data, i0, i1, values)
    assert err.value.context["op"] == "index_put"
    empty = np.zeros((0, 4), "float32")
    with pytest.raises(RuntimeCallError, match="out of range"):
        _kernel(build_call("index_put", [empty, [i0, i1], values]))(empty, i0, i1, values)


def test_index_put_refuses_values_that_do_not_broadcast():
    data = _data((3, 4))
    call = build_call("index_put", [data, [_ints(0, 3, (3,)), _ints(0, 4, (3,))], _data((2,))])
    assert legalize_call(call) is None
    with pytest.raises(ShapeError, match="values"):
        _index_put(call)


# -------------------------------------------------------------------------------- slice_scatter

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("axis, start, end, step", [
    (0, 1, 4, 1), (1, 0, 7, 2), (1, -5, -1, 3), (-1, 5, 0, -2), (0, 2, 2, 1), (1, 0, 100, 1),
])
def test_slice_scatter(dtype, axis, start, end, step):
    data = _data((5, 7, 3), dtype)
    index = [slice(None)] * 3
    index[axis] = slice(start, end, step)
    src = _data(data[tuple(index)].shape, dtype)
    check_op("slice_scatter", [data, src], start, end, step, axis=axis)


def test_slice_scatter_checks_src_and_step():
    data = _data((5, 4))
    with pytest.raises(ShapeError, match="src"):
        _slice_scatter(build_call("slice_scatter", [data, _data((3, 4))], 0, 2, 1))
    with pytest.raises(ShapeError, match="step"):
        _slice_scatter(build_call("slice_scatter", [data, _data((0, 4))], 0, 2, 0))


# ------------------------------------------------------------------------ dynamic_strided_slice

def _dss_call(x, begin, end, strides):
    """A dynamic_strided_slice call whose output shape is known (inference leaves it unknown)."""
    args = [relax.Var(n, TensorStructInfo(a.shape, str(a.dtype)))
            for n, a in zip("xbes", (x, begin, end, strides))]
    call = BlockBuilder().normalize(make_call("dynamic_strided_slice", *args))
    shape = reference(call, [x, begin, end, strides]).shape
    known = relax.Call(call.op, call.args, call.attrs)
    known._set_struct_info(TensorStructInfo(shape, str(x.dtype)))
    return call, known


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("begin, end, strides", [
    ([0, 1, 0], [4, 3, 5], [1, 1, 2]), ([-1, 0, 4], [-5, 3, -6], [-1, 2, -2]),
    ([-100, 2], [100, 3], [3, 1]), ([1], [3], [1]), ([2, 2, 2], [2, 2, 2], [1, 1, 1]),
])
def test_dynamic_strided_slice_known_output(dtype, begin, end, strides):
    x = _data((4, 3, 6), dtype)
    tensors = [x] + [np.array(v, "int64") for v in (begin, end, strides)]
    call, known = _dss_call(*tensors)
    assert legalize_call(call) is None  # unknown output shape: stays on its numpy path
    check_call(known, tensors)


# ----------------------------------------------------------------------------- reverse_sequence

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, seq_axis, batch_axis", [
    ((3, 5), 1, 0), ((5, 3, 2), 0, 1), ((2, 4, 6), 2, 0), ((1, 1), 1, 0)])
def test_reverse_sequence(dtype, shape, seq_axis, batch_axis):
    x = _data(shape, dtype)
    n = shape[seq_axis]
    lengths = _ints(-n - 1, n + 2, (shape[batch_axis],), "int32")
    lengths[0] = n
    check_op("reverse_sequence", [x, lengths], seq_axis=seq_axis, batch_axis=batch_axis)


def test_reverse_sequence_checks_lengths():
    with pytest.raises(ShapeError, match="seq_lengths"):
        _reverse_sequence(build_call("reverse_sequence", [_data((3, 5)), _ints(0, 5, (2,))]))


# ----------------------------------------------------------------------------- layout_transform

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, index_map, pad", [
    ((1, 2, 3, 4), lambda n, c, h, w: (n, h, w, c), None),
    ((2, 8, 3, 3), lambda n, c, h, w: (n, c // 4, h, w, c % 4), None),
    ((1, 6, 2, 3), lambda n, c, h, w: (n, c // 4, h, w, c % 4), 1.0),
    ((2, 6), lambda n, c: (n, c // 4, c % 4), None),
    ((5, 3), lambda a, b: (b % 2, a, b // 2), 0.0),
], ids=["nhwc", "packed", "padded", "split", "split-permuted"])
def test_layout_transform(dtype, shape, index_map, pad):
    check_op("layout_transform", [_data(shape, dtype)], index_map=index_map, pad_value=pad)


def test_layout_transform_refuses_other_maps():
    x = _data((2, 3, 4))
    for index_map in (lambda a, b, c: (a, b + c, c), lambda a, b, c: (a, b // 2, c),
                      lambda a, b, c: (a, a, c)):
        assert legalize_call(build_call("layout_transform", [x], index_map=index_map)) is None


# ------------------------------------------------------------------------- meshgrid / hamming

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("indexing", ["ij", "xy"])
@pytest.mark.parametrize("sizes", [(3,), (3, 4), (2, 1, 5), (0, 2)], ids=str)
def test_meshgrid(dtype, indexing, sizes):
    got, want = check_op("meshgrid", [[_data((n,), dtype) for n in sizes]], indexing=indexing)
    assert len(want) == len(sizes) and (len(got) == len(sizes) or len(sizes) == 1)


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
@pytest.mark.parametrize("size", [1, 2, 5, 16])
@pytest.mark.parametrize("periodic", [True, False])
def test_hamming_window(dtype, size, periodic):
    call = BlockBuilder().normalize(make_call("hamming_window", size, periodic, 0.54, 0.46,
                                              dtype=dtype))
    got, _ = check_call(call, [])
    assert got.shape == (size,) and got.dtype == np.dtype(dtype)


# ------------------------------------------------------------------------------------- nonzero

def _site(x):
    return Site("nonzero", None, [_Arg(TensorStructInfo(x.shape, str(x.dtype)))],
                TensorStructInfo(None, "int64", ndim=2))


class _Arg:
    def __init__(self, sinfo):
        self.sinfo, self.const, self.id = sinfo, None, 0


@pytest.mark.parametrize("dtype", DTYPES + ["uint8", "float64", "int8", "int16"])
@pytest.mark.parametrize("shape", [(9,), (3, 4, 5), (2, 1, 3, 7), (0, 3), (4, 0), (1,)], ids=str)
def test_nonzero_kernel(dtype, shape):
    x = _data(shape, dtype)
    x[x < 0.5 if dtype != "bool" else x] = 0 if dtype != "bool" else False
    if dtype.startswith("float") and x.size > 1:
        x.flat[0], x.flat[1] = -0.0, np.nan  # -0.0 is zero, NaN is not
    got = NonzeroKernel(dtype)(x)
    want = reference(build_call("nonzero", [x]), [x])
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want)


def test_nonzero_kernel_checks_its_input():
    kernel = NonzeroKernel("float32")
    with pytest.raises(ShapeError, match="nonzero"):
        kernel(np.zeros(3, "int32"))
    with pytest.raises(ShapeError, match="0-d"):
        kernel(np.zeros((), "float32"))
    assert not NonzeroFact().match(_site(np.zeros((), "float32")))


# ------------------------------------------------------------------------- relax.build + VM

def _build(params, body, legalize="prefer"):
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(body(*params))
        bb.emit_func_output(out)
    ex = relax.build(bb.get(), legalize=legalize)
    return ex, relax.VirtualMachine(ex)["main"]


def _var(name, a):
    return relax.Var(name, TensorStructInfo(a.shape, str(a.dtype)))


def _numpy(v):
    return tuple(_numpy(f) for f in v) if isinstance(v, (tuple, list)) else np.asarray(v.numpy())


_VM_CASES = {
    "index_tensor": ([_data((4, 5)), np.array([-1, 0, 2]), np.array([4, -5, 0])],
                     lambda x, i, j: make_call("index_tensor", x, relax.Tuple([i, j])), {}),
    "index_put": ([_data((4, 5)), np.array([1, 1, -1]), np.array([2, 2, 0]), _data((3,))],
                  lambda x, i, j, v: make_call("index_put", x, relax.Tuple([i, j]), v,
                                               accumulate=True), {}),
    "slice_scatter": ([_data((6, 4)), _data((2, 4))],
                      lambda x, s: make_call("slice_scatter", x, s, 1, 5, 2), {}),
    "reverse_sequence": ([_data((3, 6)), np.array([6, 2, 0], "int32")],
                         lambda x, n: make_call("reverse_sequence", x, n), {}),
    "layout_transform": ([_data((1, 6, 2, 2))], lambda x: make_call(
        "layout_transform", x, index_map=lambda n, c, h, w: (n, c // 4, h, w, c % 4),
        pad_value=0.0), {}),
    "meshgrid": ([_data((3,)), _data((2,))],
                 lambda x, y: make_call("meshgrid", relax.Tuple([x, y]), indexing="xy"), {}),
    "hamming_window": ([_data((7,))], lambda x: make_call(  # sized by x: not folded
        "hamming_window", x.struct_info.values[0], True, 0.54, 0.46, dtype="float32"), {}),
}


@pytest.mark.parametrize("op", sorted(_VM_CASES))
def test_vm_runs_the_legalized_kernel(op):
    arrays, body, _ = _VM_CASES[op]
    params = [_var(f"a{k}", a) for k, a in enumerate(arrays)]
    if op == "hamming_window":
        params = [relax.Var("x", TensorStructInfo((tir.Var("n", "int64"),), "float32"))]
    ex, fn = _build(params, body)
    assert ex.stats["ops"][op] == {"tir": 1}
    _, ref = _build(params, body, legalize="never")
    assert_close(_numpy(fn(*arrays)), _numpy(ref(*arrays)), "float32", op)


def test_vm_dynamic_strided_slice_stays_on_numpy():
    """Its output shape depends on begin / end / strides: nothing to plan a kernel for."""
    x, begin, end, strides = _data((5, 4)), np.array([4, 0]), np.array([0, 4]), np.array([-2, 3])
    params = [_var(n, a) for n, a in zip("xbes", (x, begin, end, strides))]
    ex, fn = _build(params, lambda *a: make_call("dynamic_strided_slice", *a))
    assert ex.stats["ops"]["dynamic_strided_slice"] == {"numpy": 1}
    np.testing.assert_array_equal(fn(x, begin, end, strides).numpy(), x[4:0:-2, 0:4:3])


def test_vm_nonzero_runs_natively():
    x = _data((3, 4, 5))
    x[x < 1] = 0
    ex, fn = _build([_var("x", x)], lambda x: make_call("nonzero", x), legalize="prefer")
    assert ex.stats["ops"]["nonzero"] == {"native": 1}
    np.testing.assert_array_equal(fn(x).numpy(), np.stack(np.nonzero(x)))
    np.testing.assert_array_equal(fn(np.zeros_like(x)).numpy(), np.zeros((3, 0), np.int64))
