"""The TIR compiler: TVM's legalized prim funcs compile and agree with the interpreter, the
inline math is accurate to about an ulp, dtypes convert like numpy, bad arguments raise
ShapeError naming the param, kernels are cached, hostile inputs cannot crash the process."""

from __future__ import annotations

import math
import pathlib

import numpy as np
import pytest

from msc.backend.legalize import legalize_call
from msc.backend.legalize.testing import build_call, kernel_jit
from msc.backend.llvm.cache import KernelCache
from msc.backend.llvm.jit import JIT
from msc.backend.lowering.codegen import codegen, ir_text
from msc.backend.lowering.compile import compile_prim_func
from msc.errors import BuildError, RuntimeCallError, ShapeError
from msc.tir import expr as E
from msc.tir.interp import np_dtype, run_prim_func
from msc.tir.parser import parse_tir_text

DATA = pathlib.Path(__file__).parents[2] / "tir" / "data"


def _compile(func):
    return compile_prim_func(func, jit=kernel_jit())


def _script(text: str):
    funcs = parse_tir_text(text)
    return next(iter(funcs.values()))


def _golden():
    cases = []
    for path in sorted(DATA.glob("legalize_*.tvmscript")):
        for name, func in parse_tir_text(path.read_text()).items():
            cases.append(pytest.param(func, id=f"{path.stem}.{name}"))
    return cases


def _random_args(func, env, rng):
    args = []
    for p in func.params:
        shape = []
        for d in p.shape:
            for v in E.free_vars(d):
                env.setdefault(v.name, 3)
            shape.append(int(E.evaluate(d, env)))
        dt = np_dtype(p.dtype)
        if p.dtype == "bool":
            args.append(rng.integers(0, 2, shape).astype(bool))
        elif dt.kind in "iu":
            args.append(rng.integers(0, 3, shape).astype(dt))
        else:
            args.append(rng.standard_normal(shape).astype(dt))
    return args


@pytest.mark.parametrize("func", _golden())
def test_tvm_legalized_funcs_match_interpreter(func):
    kernel = _compile(func)
    args = _random_args(func, {}, np.random.default_rng(0))
    want = [a.copy() for a in args]
    got = [a.copy() for a in args]
    run_prim_func(func, *want)
    kernel(*got)
    for p, w, g in zip(func.params, want, got):
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=1e-4,
                                   atol=1e-5, err_msg=p.name)


# ---------------------------------------------------------------------------- inline math

def _ulp(got: np.ndarray, want: np.ndarray) -> float:
    keep = np.abs(want) > 1e-37
    spacing = np.spacing(np.abs(want[keep]).astype(np.float32)).astype(np.float64)
    return float((np.abs(got[keep].astype(np.float64) - want[keep]) / spacing).max())


def _unary_kernel(op: str, n: int):
    return _compile(legalize_call(build_call(op, [np.zeros(n, "float32")])))


_ERF = np.vectorize(math.erf)
MATH = {  # op: (inputs, float64 reference, max ulp)
    "exp": (np.linspace(-103, 88.7, 200001), np.exp, 1.0),
    "log": (np.exp(np.linspace(-100, 88, 200001)), np.log, 1.0),
    "tanh": (np.linspace(-10, 10, 200001), np.tanh, 1.5),
    "sigmoid": (np.linspace(-90, 90, 200001), lambda x: 1 / (1 + np.exp(-x)), 2.1),
    "erf": (np.linspace(-5, 5, 100001), _ERF, 1.2),
}


@pytest.mark.parametrize("op", sorted(MATH))
def test_inline_math_is_accurate(op):
    xs, ref, limit = MATH[op]
    x = xs.astype(np.float32)
    assert _ulp(_unary_kernel(op, x.size)(x), ref(x.astype(np.float64))) <= limit


SPECIALS = [np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-45, -1e-45, 88.73, -103.9, 1e30, -1e30]


@pytest.mark.parametrize("op, ref", [("exp", np.exp), ("log", np.log), ("tanh", np.tanh),
                                     ("erf", _ERF), ("sigmoid", lambda x: 1 / (1 + np.exp(-x)))])
def test_inline_math_special_values(op, ref):
    x = np.array(SPECIALS, "float32")
    with np.errstate(all="ignore"):
        want = ref(x.astype(np.float64)).astype(np.float32)
    np.testing.assert_allclose(_unary_kernel(op, x.size)(x), want, rtol=3e-7, atol=0)


# -------------------------------------------------------------------------------- dtypes

DTYPES = ["float32", "float64", "float16", "bfloat16", "int8", "uint8", "int32", "int64",
          "bool"]


def _values(dtype: str) -> np.ndarray:
    base = np.array([0, 1, -1, 2.5, -2.5, 3.75, 100.3, -7.5, 0.5, 127, 255.0, -128], "float64")
    if dtype == "uint8":
        base = np.abs(base)
    if dtype == "bool":
        return base.astype(bool)
    if np_dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        base = np.clip(np.trunc(base), info.min, info.max)
    return base.astype(np_dtype(dtype))


@pytest.mark.parametrize("src", DTYPES)
@pytest.mark.parametrize("dst", DTYPES)
def test_casts_match_numpy(src, dst):
    x = _values(src)
    if src in ("float32", "float64", "float16", "bfloat16") and dst in ("int8", "uint8"):
        x = x[np.abs(x.astype(np.float64)) < 100]  # out-of-range float -> int is undefined
        x = np.abs(x) if dst == "uint8" else x
    call = build_call("astype", [x], dst)
    got = _compile(legalize_call(call))(x)
    np.testing.assert_array_equal(got.astype(np.float64), x.astype(np_dtype(dst)).astype(np.float64))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_conversion_by_bits_matches_native(dtype):
    """The no-F16C path (bit manipulation) rounds exactly like numpy / ml_dtypes."""
    bits = np.arange(0, 1 << 16, dtype=np.uint16).view(np_dtype(dtype))
    x = bits.astype(np.float32)
    finite = np.isfinite(x)
    rng = np.random.default_rng(0)
    wide = np.concatenate([x[finite], rng.standard_normal(50000).astype(np.float32) * 100,
                           np.float32([1e-8, 6e-8, 65519.0, 65520.0, 1e6, -1e6])])
    func = legalize_call(build_call("astype", [wide], dtype))
    module, abi = codegen(func, "msc_test_half_by_bits_" + dtype, native_f16=False)
    lib = kernel_jit().compile(ir_text(module), [abi.symbol])
    import ctypes

    out = np.empty(wide.shape, np_dtype(dtype))
    fn = lib.cfunc(abi.symbol, ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p)
    fn(wide.ctypes.data, out.ctypes.data)
    with np.errstate(over="ignore"):
        want = wide.astype(np_dtype(dtype))
    np.testing.assert_array_equal(out.view(np.uint16), want.view(np.uint16))
    back = legalize_call(build_call("astype", [out], "float32"))
    module, abi = codegen(back, "msc_test_half_back_" + dtype, native_f16=False)
    lib = kernel_jit().compile(ir_text(module), [abi.symbol])
    restored = np.empty(wide.shape, np.float32)
    lib.cfunc(abi.symbol, ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p)(
        out.ctypes.data, restored.ctypes.data)
    np.testing.assert_array_equal(restored, out.astype(np.float32))


# ------------------------------------------------------------------------- calling checks

def _add_kernel():
    x = np.zeros((2, 3), "float32")
    return _compile(legalize_call(build_call("add", [x, x[:1]])))


@pytest.mark.parametrize("args, param, text", [
    ((np.zeros((2, 3), "float64"), np.zeros((1, 3), "float32")), "x", "dtype"),
    ((np.zeros((2, 4), "float32"), np.zeros((1, 3), "float32")), "x", "dim 1"),
    ((np.zeros((2, 3), "float32"), np.zeros((3,), "float32")), "y", "rank"),
    (([[0.0] * 3] * 2, np.zeros((1, 3), "float32")), "x", "numpy array"),
    ((np.zeros((2, 3), "float32"), np.zeros((1, 3), "float32"), np.zeros((2, 3), "int32")),
     "T_add", "dtype"),
])
def test_wrong_arguments_raise_shape_error_naming_the_param(args, param, text):
    with pytest.raises(ShapeError) as err:
        _add_kernel()(*args)
    assert err.value.context["param"] == param and text in str(err.value)


def test_outputs_must_be_writable_and_separate():
    k, x = _add_kernel(), np.ones((2, 3), "float32")
    frozen = np.zeros((2, 3), "float32")
    frozen.flags.writeable = False
    with pytest.raises(ShapeError, match="writable"):
        k(x, x[:1], frozen)
    with pytest.raises(ShapeError, match="overlaps"):
        k(x, x[:1], x)
    with pytest.raises(ShapeError, match="takes 3 arguments"):
        k(x, x[:1], x.copy(), x.copy())


def test_non_contiguous_inputs_are_copied():
    k = _add_kernel()
    x = np.arange(12, dtype="float32").reshape(3, 4)[:2, :3]
    np.testing.assert_array_equal(k(x, np.ones((1, 3), "float32")), x + 1)


def test_symbolic_dims_run_at_three_sizes():
    dyn = _compile(_script((DATA / "legalize_dyn_softmax.tvmscript").read_text()))
    for size in (1, 7, 33):
        a = np.random.default_rng(size).standard_normal((size, 5)).astype("float32")
        e = np.exp(a - a.max(1, keepdims=True))
        np.testing.assert_allclose(dyn(a), e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)
    with pytest.raises(ShapeError, match="n = 4"):
        dyn(np.zeros((4, 5), "float32"), np.zeros((3, 5), "float32"))


def test_symbolic_dim_bound_only_by_an_expression_is_reported():
    func = _script("""
@T.prim_func
def f(x: T.Buffer(("n * 2",), "float32"), y: T.Buffer(("n * 2",), "float32")):
    n = T.int64()
    for i in range(n * 2):
        y[i] = x[i]
""")
    with pytest.raises(ShapeError, match="not bound"):
        _compile(func)(np.zeros(4, "float32"), np.zeros(4, "float32"))


def test_recompiling_hits_the_memory_and_disk_caches(tmp_path):
    func = legalize_call(build_call("nn.relu", [np.zeros((3, 7), "float32")]))
    first = compile_prim_func(func, jit=JIT(KernelCache(tmp_path)))
    assert len(list(tmp_path.iterdir())) == 1  # optimized once, object stored on disk
    assert compile_prim_func(func, jit=first.library.jit) is first
    again = compile_prim_func(func, jit=JIT(KernelCache(tmp_path)))
    assert again.from_cache and again.library.jit.cache.stats.hits == 1
    x = np.linspace(-1, 1, 21, dtype="float32").reshape(3, 7)
    np.testing.assert_array_equal(again(x), np.maximum(x, 0))


# ---------------------------------------------------------------------------- statements

def test_scalar_params_lets_ifs_whiles_and_workspaces():
    func = _script("""
@T.prim_func
def f(x: T.Buffer((T.int64(40000),), "float32"), y: T.Buffer((T.int64(40000),), "float32"),
      scale: T.float32):
    tmp = T.alloc_buffer((T.int64(40000),))
    small = T.alloc_buffer((T.int64(4),), "int32")
    for i in range(T.int64(40000)):
        t: T.float32 = x[i] * scale
        if t > T.float32(0.0):
            tmp[i] = t
        else:
            tmp[i] = T.float32(0.0) - t
    small[0] = 0
    while small[0] < 3:
        small[0] = small[0] + 1
    for i in range(T.int64(40000)):
        y[i] = tmp[i] + T.Cast("float32", small[0])
""")
    x = np.linspace(-2, 2, 40000, dtype="float32")
    y = np.empty_like(x)
    _compile(func)(x, y, 1.5)
    np.testing.assert_allclose(y, np.abs(x * 1.5) + 3, rtol=1e-6)


def test_unsupported_constructs_raise_build_error():
    gpu = _script("""
@T.prim_func
def f(x: T.Buffer((T.int64(4),), "float32")):
    for i in T.thread_binding(T.int64(4), thread="threadIdx.x"):
        x[i] = T.float32(0.0)
""")
    with pytest.raises(BuildError, match="GPU"):
        _compile(gpu)
    fp8 = _script("""
@T.prim_func
def f(x: T.Buffer((T.int64(4),), "float8_e4m3fn")):
    for i in range(T.int64(4)):
        x[i] = x[i]
""")
    with pytest.raises(BuildError, match="float8"):
        _compile(fp8)


# ------------------------------------------------------------------------------- safety

def test_out_of_range_gather_indices_are_clamped_and_refused():
    x = np.arange(10, dtype="float32")
    call = build_call("take", [x, np.zeros(4, "int64")], axis=0)
    k = _compile(legalize_call(call))
    np.testing.assert_array_equal(k(x, np.array([3, 0, 9, -1], "int64")), [3, 0, 9, 9])
    for bad in (10, 10**12, -10**12, -11, 2**63 - 1, -(2**63)):
        with pytest.raises(RuntimeCallError, match="out of range"):
            k(x, np.array([3, bad, 0, -1], "int64"))


@pytest.mark.parametrize("op", ["divide", "floor_divide", "floor_mod", "mod"])
def test_integer_division_by_zero_or_minus_one_does_not_trap(op):
    a = np.array([7, -7, np.iinfo(np.int32).min, 5], "int32")
    b = np.array([0, 0, -1, 2], "int32")
    got = _compile(legalize_call(build_call(op, [a, b])))(a, b)
    assert got[0] == 0 and got[1] == 0 and got[3] in (2, 1)


def test_padded_loads_split_the_loop_and_stay_exact():
    rng = np.random.default_rng(1)
    for shape in [(1, 3, 5, 1), (2, 2, 9, 17), (1, 1, 2, 2)]:
        x = rng.standard_normal(shape).astype("float32")
        call = build_call("nn.pad", [x], [0, 0, 0, 0, 2, 1, 3, 2], pad_value=-1.0)
        got = _compile(legalize_call(call))(x)
        want = np.pad(x, [(0, 0), (0, 0), (2, 1), (3, 2)], constant_values=-1.0)
        np.testing.assert_array_equal(got, want)


def test_an_llvm_crash_is_a_build_error_not_a_dead_process(tmp_path, monkeypatch):
    import os

    jit = JIT(KernelCache(tmp_path))
    monkeypatch.setattr(jit, "_codegen", lambda *args: os.abort())
    # Threads an earlier test in this worker left alive (torch's exporter, a pool) would make
    # compile skip the isolating fork, and the abort would take the test process with it.
    monkeypatch.setattr("msc.backend.lowering.compile._foreign_threads", lambda: False)
    func = legalize_call(build_call("exp", [np.zeros(5, "float32")]))
    with pytest.raises(BuildError, match="LLVM crashed"):
        compile_prim_func(func, jit=jit)
