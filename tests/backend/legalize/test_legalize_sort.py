"""The sort-family rules (msc/backend/legalize/sort.py): sort, argsort, topk, median and
bucketize compiled to native code, equal to the op's numpy fact bit for bit (ties, NaN,
descending, every axis) and to the TIR interpreter; the print -> parse -> print fixed point
is checked by check_op."""

from __future__ import annotations

import numpy as np
import pytest

from msc import relax
from msc.backend.legalize import legalize_call
from msc.backend.legalize.testing import build_call, check_call, check_op, kernel_jit
from msc.backend.lowering.compile import compile_prim_func
from msc.errors import ShapeError
from msc.relax import op as R
from msc.relax.op.facts import load_facts
from msc.relax.op.registry import make_call
from msc.tir import expr as tir

RNG = np.random.default_rng(7)
DTYPES = ["float32", "float64", "float16", "int32", "int64"]
LENGTHS = [1, 2, 7, 64, 1000]
FLOATS = ["float32", "float64", "float16"]


def _ties(shape, dtype):
    """Data with many equal elements (so a stable order is observable)."""
    n = shape[-1] if shape else 1
    if np.dtype(dtype).kind == "f":
        return (np.round(RNG.standard_normal(shape) * 4) / 4).astype(dtype)
    return RNG.integers(-(n // 4) - 2, n // 4 + 2, shape).astype(dtype)


def _special(n, dtype):
    """NaN, +-inf, +-0.0 and duplicates mixed into ordinary values."""
    pool = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.5, -1.5, 2.0, np.nan, 0.0], dtype)
    return RNG.choice(pool, n).astype(dtype)


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(f"u{a.itemsize}") if a.dtype.kind == "f" else a


def _exact(got, want, bits=True):
    """Kernel == numpy fact bit for bit (NaN payloads and signed zeros included)."""
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w).astype(g.dtype)
        assert g.shape == w.shape
        np.testing.assert_array_equal(_bits(g) if bits else g, _bits(w) if bits else w)


def _check(op, arrays, *args, interp=True, bits=True, **attrs):
    _exact(*check_op(op, arrays, *args, interp=interp, **attrs), bits=bits)


# ------------------------------------------------------------------------ sort / argsort

@pytest.mark.parametrize("op", ["sort", "argsort"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("descending", [False, True])
def test_sort_rows(op, dtype, n, descending):
    rows = 1 if n == 1000 else 3
    interp = n <= 64 or dtype == "float32"  # the interpreter takes ~0.4 s per 1000-row
    _check(op, [_ties((rows, n), dtype)], axis=-1, descending=descending, interp=interp)


@pytest.mark.parametrize("op", ["sort", "argsort"])
@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2, -3])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_axes(op, axis, descending):
    _check(op, [_ties((4, 19, 5), "float32")], axis=axis, descending=descending)


@pytest.mark.parametrize("op", ["sort", "argsort"])
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("n", [7, 37, 300])
def test_sort_nan_inf_zeros(op, dtype, descending, n):
    _check(op, [_special(n, dtype).reshape(1, n)], descending=descending, interp=n < 300)


@pytest.mark.parametrize("op", ["sort", "argsort"])
@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint8", "bool"])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_int_extremes(op, dtype, descending):
    """-INT_MIN wraps in the fact's key -x: the smallest int comes first in argsort
    descending; bools are never negated."""
    if dtype.startswith("uint") and descending and op == "argsort":
        call = build_call(op, [np.zeros((2, 3), dtype)], descending=True)
        assert legalize_call(call) is None  # -x of uints wraps to a nonsense key: numpy runs
        return
    if dtype == "bool":
        x = RNG.integers(0, 2, (3, 40)).astype(bool)
    else:
        info = np.iinfo(dtype)
        x = RNG.choice(np.array([info.min, info.max, 0, 1, -1 if info.min else 2, info.min],
                                dtype), (3, 40))
    _check(op, [x], descending=descending)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_argsort_index_dtype(dtype):
    got, _ = check_op("argsort", [_ties((3, 50), "float32")], axis=0, dtype=dtype)
    assert got.dtype == dtype


def test_sort_presorted_and_reversed():
    """The already-ordered merge shortcut and the longest merges."""
    up = np.arange(1000, dtype="float32").reshape(1, -1)
    for x in (up, up[:, ::-1].copy(), np.repeat(up[:, :10], 100, axis=1)):
        for descending in (False, True):
            _check("argsort", [x], descending=descending, interp=False)


def test_sort_symbolic_length():
    """One kernel for every row length n (workspaces allocated per call)."""
    n = tir.Var("n")
    x = relax.Var("x", relax.TensorStructInfo((3, n), "float32"))
    call = relax.BlockBuilder().normalize(make_call("argsort", x, descending=True))
    kernel = compile_prim_func(legalize_call(call), jit=kernel_jit())
    for length in (1, 2, 17, 1000, 5000):
        data = _ties((3, length), "float32")
        want = np.argsort(-data, axis=-1, kind="stable").astype("int32")
        out = np.empty((3, length), "int32")
        kernel(data, out)
        np.testing.assert_array_equal(out, want)


def test_sort_checks_its_arguments():
    kernel = compile_prim_func(legalize_call(build_call("sort", [np.zeros((2, 5), "float32")])),
                               jit=kernel_jit())
    with pytest.raises(ShapeError, match="x"):
        kernel(np.zeros((2, 6), "float32"), np.empty((2, 5), "float32"))
    with pytest.raises(ShapeError, match="T_sort"):
        kernel(np.zeros((2, 5), "float32"), np.empty((2, 5), "float64"))


# ---------------------------------------------------------------------------------- topk

@pytest.mark.parametrize("ret_type", ["both", "values", "indices"])
@pytest.mark.parametrize("largest", [True, False])
def test_topk(ret_type, largest):
    for k in (1, 3, 7):
        _check("topk", [_ties((4, 7), "float32")], k=k, ret_type=ret_type, largest=largest)
    _check("topk", [_ties((7, 3), "float32")], k=2, axis=0, ret_type=ret_type,
           largest=largest, dtype="int64")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("largest", [True, False])
def test_topk_dtypes(dtype, largest):
    for k in (1, 9):
        _check("topk", [_ties((5, 9), dtype)], k=k, largest=largest)


@pytest.mark.parametrize("k", [1, 1000])
@pytest.mark.parametrize("largest", [True, False])
def test_topk_long_rows(k, largest):
    _check("topk", [_ties((2, 1000), "float32")], k=k, largest=largest, interp=False)


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dtype", FLOATS)
def test_topk_nan(largest, dtype):
    """The fact sorts -x: NaN is last whether largest or not."""
    _check("topk", [_special(40, dtype).reshape(2, 20)], k=5, largest=largest)


# -------------------------------------------------------------------------------- median

@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("dtype", DTYPES)
def test_median(axis, dtype):
    """Over all axes the fact sorts with numpy's unstable quicksort: -0.0 and 0.0 may swap,
    so values compare equal there rather than bit for bit."""
    for shape in ((6, 7), (5, 8)):
        _check("median", [_ties(shape, dtype)], axis=axis, bits=axis is not None)


@pytest.mark.parametrize("axis", [None, 0, -1])
def test_median_keepdims(axis):
    for shape in ((6, 7), (1, 1)):
        _check("median", [_ties(shape, "float32")], axis=axis, keepdims=True,
               bits=axis is not None)


@pytest.mark.parametrize("axis", [None, 1])
def test_median_nan_and_long_rows(axis):
    bits = axis is not None
    _check("median", [_special(60, "float32").reshape(3, 20)], axis=axis, bits=bits)
    _check("median", [_ties((2, 1001), "float64")], axis=axis, interp=False, bits=bits)


def test_median_of_several_axes_is_not_legalized():
    """The numpy fact takes one axis; TVM reduces all: no rule rather than a guess."""
    assert legalize_call(build_call("median", [np.zeros((2, 3, 4), "float32")],
                                    axis=[0, 2])) is None


# ----------------------------------------------------------------------------- bucketize

@pytest.mark.parametrize("right", [False, True])
@pytest.mark.parametrize("out_int32", [False, True])
@pytest.mark.parametrize("m", [0, 1, 2, 7, 1000])
def test_bucketize(right, out_int32, m):
    bounds = np.sort(_ties((m,), "float32"))
    x = np.concatenate([RNG.choice(bounds, 20) if m else np.zeros(20, "float32"),
                        _ties((25,), "float32")]).reshape(5, 9)
    _check("bucketize", [x, bounds], right=right, out_int32=out_int32, interp=m < 1000)


@pytest.mark.parametrize("right", [False, True])
def test_bucketize_nan(right):
    """numpy's searchsorted orders NaN last, in the data and in the boundaries."""
    bounds = np.array([-np.inf, -1, 0, 0, 2.5, np.inf, np.nan, np.nan], "float64")
    x = _special(30, "float64")
    _check("bucketize", [x, bounds], right=right)


@pytest.mark.parametrize("x_dtype,b_dtype", [("int32", "float32"), ("float16", "float32"),
                                             ("int64", "int32"), ("float32", "int64")])
def test_bucketize_mixed_dtypes(x_dtype, b_dtype):
    """Compared in numpy's common dtype: 2 is not below the boundary 2.5 cast to int."""
    bounds = np.array([-3, -0.5, 1, 2.5, 2.5, 7], b_dtype)
    x = np.array([-4, -3, -1, 0, 1, 2, 3, 7, 8], x_dtype)
    _check("bucketize", [x, bounds], right=False)
    _check("bucketize", [x, bounds], right=True)


# --------------------------------------------------------------------------------- build

def test_vm_runs_argsort_through_tir():
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((8, 300), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(R.argsort(x, axis=-1, descending=True, dtype="int64"))
        bb.emit_func_output(out)
    ex = relax.build(bb.get(), legalize="prefer")
    assert ex.stats["ops"]["argsort"] == {"tir": 1}
    data = _ties((8, 300), "float32")
    got = relax.VirtualMachine(ex)["main"](data).numpy()
    np.testing.assert_array_equal(got, np.argsort(-data, axis=-1, kind="stable"))


def test_check_call_on_a_tuple_output():
    """topk's two outputs come back as a tuple from the compiled kernel."""
    x = _ties((3, 9), "float32")
    call = build_call("topk", [x], k=4)
    got, want = check_call(call, [x])
    assert isinstance(got, tuple) and len(got) == 2
    _exact(got, want)


# -------------------------------------------------------------------------------- unique

def _unique_site(x, *flags):
    from msc.backend.kernels.base import Site
    from msc.backend.runtime.program import Value

    call = build_call("unique", [x], *flags)
    args = [Value(i, a.struct_info) for i, a in enumerate(call.args)]
    return Site("unique", call.attrs, args, call.struct_info, call=call), call


@pytest.mark.parametrize("dtype", DTYPES + ["uint8", "bool"])
@pytest.mark.parametrize("is_sorted", [True, False])
@pytest.mark.parametrize("flags", [(False, False, False), (True, True, True),
                                   (True, False, True), (False, True, False)], ids=str)
@pytest.mark.parametrize("n", [0, 1, 7, 1000])
def test_unique_kernel(dtype, is_sorted, flags, n):
    """unique's outputs are sized by the data: a native kernel returning fresh arrays (its
    inverse is flat, as the op's struct info says; numpy 2 shapes it like the input)."""
    from msc.backend.kernels.unique import UniqueFact

    if dtype == "bool":
        x = RNG.integers(0, 2, (n,)).astype(bool)
    elif dtype in FLOATS:
        x = np.where(RNG.random(n) < 0.2, _special(n, dtype), _ties((n,), dtype))
    else:
        x = _ties((n,), dtype)
    x = x.reshape((5, n // 5) if n % 5 == 0 and n else (n,))
    site, call = _unique_site(x, is_sorted, *flags)
    fact = UniqueFact()
    assert fact.match(site)
    got = fact.make(site)(x)
    want = check_reference(call, x)
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(want)
    for g, w in zip(got, want):  # -0.0 / 0.0 compare equal: the fact may sort unstably
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w.reshape(-1))


def check_reference(call, x):
    from msc.backend.legalize.testing import reference

    want = reference(call, [x])
    return tuple(np.asarray(w) for w in (want if isinstance(want, tuple) else (want,)))


def test_unique_kernel_checks_its_input():
    from msc.backend.kernels.unique import UniqueFact

    x = np.zeros(4, "float32")
    site, _ = _unique_site(x, True, False, False, False)
    kernel = UniqueFact().make(site)
    with pytest.raises(ShapeError, match="x"):
        kernel(np.zeros(4, "float64"))


def test_unique_with_an_axis_uses_the_numpy_fact():
    from msc.backend.kernels.unique import UniqueFact

    x = np.zeros((2, 3), "float32")
    site, _ = _unique_site(x, True, False, False, False, 0)
    assert not UniqueFact().match(site)


def test_vm_runs_unique_natively():
    """Once its kernel fact is loaded, the VM runs unique without numpy."""
    load_facts("kernel")

    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((6, 50), "int32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(make_call("unique", x, False, True, True, True))
        bb.emit_func_output(out)
    ex = relax.build(bb.get())
    assert ex.stats["ops"]["unique"] == {"native": 1}
    data = _ties((6, 50), "int32")
    got = relax.VirtualMachine(ex)["main"](data)
    values, first, counts = np.unique(data, return_index=True, return_counts=True)
    order = np.argsort(first, kind="stable")
    for g, w in zip(got, (values[order], first[order], None, counts[order])):
        if w is not None:
            np.testing.assert_array_equal(g.numpy(), w)
    np.testing.assert_array_equal(got[0].numpy()[got[2].numpy()], data.reshape(-1))
