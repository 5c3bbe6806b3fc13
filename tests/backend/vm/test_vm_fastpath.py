"""The VM's fast path: TIR kernels checked once per plan, chains of them in one native call,
the plan as generated Python, and VirtualMachine(num_threads=...)."""


import numpy as np
import pytest

from msc import relax
from msc.backend.lowering.compile import compile_prim_func
from msc.backend.runtime import packed, threads
from msc.backend.runtime import plan as plan_mod
from msc.backend.runtime.native_run import ArgSpec, native_step
from msc.errors import RuntimeCallError, ShapeError, ValidationError
from msc.relax import op as R
from msc.tir import expr as tir
from tests.helpers.concurrency import run_on_threads
from tests.helpers.relax_modules import one_function_module as _module
from tests.helpers.relax_modules import tensor as _tensor

F32 = "float32"
RNG = np.random.default_rng(0)
TOL = {"rtol": 1e-5, "atol": 1e-6}  # TIR exp/tanh/sigmoid are <= 2.1 ulp, cos / sin libm's




def _chain(bb, x, n=12):
    """cos / sin / negative / abs: no native kernel, so TIR under legalize="prefer" (exp,
    tanh and sigmoid have one, kernels/activation.py)."""
    h = x
    for i in range(n):
        h = bb.emit(getattr(R, ("cos", "sin", "negative", "abs")[i % 4])(h))
    return h


def _plan(ex, fn: str = "main"):
    (plan,) = [p for (name, _), p in ex._plans.items() if name == fn]
    return plan


def _ref(mod, *args):
    """The numpy facts' result (legalize="never")."""
    out = relax.VirtualMachine(relax.build(mod, legalize="never"))["main"](*args)
    return out.numpy() if hasattr(out, "numpy") else out


def test_chain_is_one_native_call_and_matches_numpy():
    x = relax.Var("x", _tensor((4, 8)))
    mod = _module([x], lambda bb, x: _chain(bb, x))
    ex = relax.build(mod, legalize="prefer")
    assert ex.stats["kernels"]["tir"] == 12 and ex.stats["kernels"]["numpy"] == 0
    plan = _plan(ex)
    assert plan.stats["native_steps"] == 12 and plan.stats["chains"] == 1
    assert plan.runner.source.count("C0(TA)") == 1  # twelve kernels, one ctypes call
    xv = RNG.standard_normal((4, 8), F32)
    out = relax.VirtualMachine(ex)["main"](xv).numpy()
    np.testing.assert_allclose(out, _ref(mod, xv), **TOL)


@pytest.mark.parametrize("native, chains", [(False, False), (True, False), (True, True)])
def test_plan_variants_agree(native, chains):
    """Checked Python entry, one native call per step, chains: same results."""
    x, y = relax.Var("x", _tensor((3, 5))), relax.Var("y", _tensor((5,)))

    def body(bb, x, y):  # the broadcast add has no native kernel: TIR with a param input
        h = bb.emit(R.add(_chain(bb, x, 3), y))
        return bb.emit(R.multiply(_chain(bb, h, 2), R.sqrt(relax.const(np.float32(2)))))

    mod = _module([x, y], body)
    ex = relax.build(mod, legalize="prefer")
    f = relax.VirtualMachine(ex)["main"]
    xv, yv = RNG.standard_normal((3, 5), F32), RNG.standard_normal(5).astype(F32)
    values, env = f.check_args([xv, yv])
    plan = plan_mod.make_plan(ex.programs["main"], env, native=native, chains=chains)
    # 5 TIR kernels + the broadcast add (TIR) + the multiply (a kernel object called natively)
    assert plan.stats["native_steps"] == (7 if native else 0)
    regs = plan.new_registers()
    regs[plan_mod.REGS], regs[plan_mod.ENV] = regs, env
    for reg, value in zip(plan.params, values):
        regs[reg] = value
    plan.runner.fn(regs)
    np.testing.assert_allclose(regs[plan.result], _ref(mod, xv, yv), **TOL)


def test_wrong_shape_input_raises_before_native_code():
    x = relax.Var("x", _tensor((4, 8)))
    f = relax.VirtualMachine(relax.build(_module([x], lambda bb, x: _chain(bb, x)),
                                         legalize="prefer"))["main"]
    with pytest.raises(ShapeError) as info:
        f(np.zeros((4, 9), F32))
    assert info.value.context["param"] == "x"
    with pytest.raises(ShapeError) as info:
        f(np.zeros((4, 8), "float64"))
    assert info.value.context["param"] == "x"


def test_native_step_guards_its_buffers():
    """Called directly (If branches do), a step checks what it gets; the plan-time check
    refuses specs that do not fit the kernel."""
    x = relax.Var("x", _tensor((4, 8)))
    mod = relax.transform.LegalizeOps()(_module([x], lambda bb, x: R.exp(x)))
    func = next(f for gv, f in mod.functions.items() if gv.name_hint.startswith("exp"))
    kernel = compile_prim_func(func)
    a, b = (p.name for p in func.params)
    specs = [ArgSpec(a, (4, 8), np.dtype(F32), False), ArgSpec(b, (4, 8), np.dtype(F32), True)]
    step = native_step(kernel, specs, 1, True, "y = exp(...)")
    out = np.empty((4, 8), F32)
    xv = RNG.standard_normal((4, 8), F32)
    assert step(xv, out) is out
    np.testing.assert_allclose(out, np.exp(xv), **TOL)
    with pytest.raises(ShapeError) as info:
        step(np.zeros((4, 7), F32), out)
    assert (info.value.context["op"], info.value.context["param"]) == (func.name, a)
    with pytest.raises(ShapeError):
        step(xv.astype("float64"), out)
    step(np.asfortranarray(xv), out)  # strided: copied
    np.testing.assert_allclose(out, np.exp(xv), **TOL)
    bad = [ArgSpec(a, (4, 9), np.dtype(F32), False), specs[1]]
    assert native_step(kernel, bad, 1, True, "") is None


@pytest.fixture
def packed_funcs():
    names = []

    def register(name, f):
        names.append(name)
        return relax.register_func(name, f, override=True)

    yield register
    for name in names:
        packed.remove_global_func(name)


def test_untrusted_values_are_guarded(packed_funcs):
    """A packed result may be strided or lie about a symbolic dim: the step copies the first
    and raises ShapeError naming op and param for the second, before native code runs."""
    n = tir.Var("n", "int64")
    x = relax.Var("x", _tensor((n, 6)))
    result = {"f": lambda v: v.T.copy().T}  # a strided view of the right shape
    packed_funcs("test_fastpath.view", lambda v: result["f"](v))
    mod = _module([x], lambda bb, x: R.exp(bb.emit(R.call_pure_packed(
        "test_fastpath.view", x, sinfo_args=_tensor((n, 6))))))
    f = relax.VirtualMachine(relax.build(mod, legalize="prefer"))["main"]
    xv = RNG.standard_normal((3, 6), F32)
    np.testing.assert_allclose(f(xv).numpy(), np.exp(xv), **TOL)
    assert _plan(f.vm.executable).stats["native_steps"] == 1
    result["f"] = lambda v: np.zeros((v.shape[0] + 1, 6), F32)  # n + 1 rows: wrong
    with pytest.raises(ShapeError) as info:
        f(xv)
    assert info.value.context["op"].startswith("exp") and "lv" in str(info.value)


def test_symbolic_dims_get_a_native_plan_per_signature():
    n = tir.Var("n", "int64")
    x = relax.Var("x", _tensor((n, 8)))
    mod = _module([x], lambda bb, x: R.sum(_chain(bb, x, 4), axis=[1]))
    ex = relax.build(mod, legalize="prefer")
    f = relax.VirtualMachine(ex)["main"]
    for rows in (2, 5, 2):
        xv = RNG.standard_normal((rows, 8), F32)
        np.testing.assert_allclose(f(xv).numpy(), _ref(mod, xv), rtol=1e-5, atol=1e-5)
    assert len(ex.plans()) == 2
    assert all(s["native_steps"] == 5 for s in ex.plans().values())


def test_tuple_inputs_constants_and_multiple_outputs():
    """stack of a tuple, a constant operand, split's two outputs (int32: no native kernel)."""
    x, y = relax.Var("x", _tensor((2, 4), "int32")), relax.Var("y", _tensor((2, 4), "int32"))
    c = RNG.integers(-5, 5, (2, 2, 4)).astype("int32")

    def body(bb, x, y):
        cat = bb.emit(R.stack(relax.Tuple([x, y]), axis=1))
        parts = bb.emit(R.split(bb.emit(R.subtract(cat, relax.const(c))), 2, axis=1))
        return bb.emit(R.multiply(relax.TupleGetItem(parts, 0), relax.TupleGetItem(parts, 1)))

    mod = _module([x, y], body)
    ex = relax.build(mod, legalize="prefer")
    assert ex.stats["ops"]["stack"] == {"tir": 1} and ex.stats["ops"]["split"] == {"tir": 1}
    assert _plan(ex).stats["native_steps"] == 4
    xv, yv = (RNG.integers(-9, 9, (2, 4)).astype("int32") for _ in range(2))
    out = relax.VirtualMachine(ex)["main"](xv, yv).numpy()
    d = np.stack([xv, yv], axis=1) - c
    np.testing.assert_array_equal(out, d[:, :1] * d[:, 1:])
    np.testing.assert_array_equal(out, _ref(mod, xv, yv))


def test_if_branches_run_native_steps_checked():
    c, x = relax.Var("c", _tensor((), "bool")), relax.Var("x", _tensor((3,)))
    bb = relax.BlockBuilder()
    with bb.function("main", [c, x]):
        then = relax.SeqExpr([], bb.normalize(R.cos(x)))
        other = relax.SeqExpr([], bb.normalize(R.sin(x)))
        y = relax.Var("y", _tensor((3,)))
        bb.emit_normalized(relax.VarBinding(y, relax.If(c, then, other)))
        bb.emit_func_output(bb.emit(R.abs(y)))
    ex = relax.build(bb.get(), legalize="prefer")
    assert ex.stats["kernels"]["tir"] == 3
    f = relax.VirtualMachine(ex)["main"]
    xv = RNG.standard_normal(3).astype(F32)
    np.testing.assert_allclose(f(np.array(True), xv).numpy(), np.abs(np.cos(xv)), **TOL)
    np.testing.assert_allclose(f(np.array(False), xv).numpy(), np.abs(np.sin(xv)), **TOL)


def test_concurrent_calls_use_their_own_tables():
    x = relax.Var("x", _tensor((16, 16)))
    mod = _module([x], lambda bb, x: _chain(bb, x, 8))
    f = relax.VirtualMachine(relax.build(mod, legalize="prefer"))["main"]
    inputs = [RNG.standard_normal((16, 16), F32) for _ in range(4)]
    refs = [_ref(mod, v) for v in inputs]

    def work(k):
        for _ in range(50):
            np.testing.assert_allclose(f(inputs[k]).numpy(), refs[k], **TOL)

    assert run_on_threads(work, 4) == []


def test_errors_name_the_binding(packed_funcs):
    def boom(v):
        raise ValueError("boom")

    packed_funcs("test_fastpath.boom", boom)
    x = relax.Var("x", _tensor((3,)))
    mod = _module([x], lambda bb, x: R.exp(bb.emit(R.call_pure_packed(
        "test_fastpath.boom", bb.emit(R.tanh(x)), sinfo_args=_tensor((3,))))))
    f = relax.VirtualMachine(relax.build(mod, legalize="prefer"))["main"]
    with pytest.raises(RuntimeCallError, match="boom") as info:
        f(np.ones(3, F32))
    assert any("test_fastpath.boom" in note for note in info.value.__notes__)


def test_num_threads_is_set_for_each_call(packed_funcs):
    seen = []
    packed_funcs("test_fastpath.threads", lambda v: seen.append(threads.get_num_threads()) or v)
    x = relax.Var("x", _tensor((3,)))
    mod = _module([x], lambda bb, x: R.call_pure_packed("test_fastpath.threads", x,
                                                        sinfo_args=_tensor((3,))))
    ex = relax.build(mod)
    before = threads.get_num_threads()
    relax.VirtualMachine(ex, num_threads=3)["main"](np.ones(3, F32))
    relax.VirtualMachine(ex)["main"](np.ones(3, F32))
    assert seen == [3, before] and threads.get_num_threads() == before
    for bad in (0, -1, 2.5, "2"):
        with pytest.raises(ValidationError, match="num_threads"):
            relax.VirtualMachine(ex, num_threads=bad)


@pytest.mark.parametrize("make", [
    lambda: np.arange(24, dtype=np.float32),
    lambda: np.arange(24, dtype=np.float32).reshape(4, 6)[1:, 2:],  # a view at an offset
    lambda: np.empty((0, 3), np.float64),
    lambda: np.zeros((2, 3), np.int8).T,
    lambda: np.lib.stride_tricks.as_strided(np.ones(4), (2, 2), (8, 8)),
])
def test_data_address_reads_what_ctypes_reads(make):
    """The VM's fast address read (runtime/arrays.py) is ``.ctypes.data``, for any array."""
    from msc.backend.runtime.arrays import data_address

    a = make()
    assert data_address(a) == a.ctypes.data
