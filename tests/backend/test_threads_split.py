"""The kernels' thread splits (msc/backend/runtime/threads.py): native task lists, pools,
elementwise and affine passes, depthwise convs, direct convs split by output channels, groups
and input channels. Every split must be bitwise equal to one thread; the size thresholds are
set to 0, so small shapes take the split paths, and a spy on the task lists checks they did.
"""

import threading

import numpy as np
import pytest

from msc import relax
from msc.backend.kernels import conv as conv_kernels
from msc.backend.kernels import direct_conv, direct_conv_plan
from msc.backend.kernels import elementwise as ew_kernels
from msc.backend.kernels import pool as pool_kernels
from msc.backend.kernels.direct_conv import DirectConv2d
from msc.backend.runtime import native_run, threads
from msc.backend.runtime.threads import NativeTasks, num_threads, parallel_calls, split_range
from msc.relax import op as R
from tests.helpers.concurrency import run_on_threads
from tests.helpers.relax_modules import one_function_module

RNG = np.random.default_rng(7)
TOL = {"rtol": 1e-4, "atol": 1e-4}  # against torch: another summation order


def _rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("total, parts, align", [(10, 3, 1), (100, 4, 16), (5, 8, 1), (0, 2, 1),
                                                 (33, 2, 16), (7, 1, 4)])
def test_split_range_covers_in_order(total, parts, align):
    ranges = split_range(total, parts, align)
    assert [i for lo, hi in ranges for i in range(lo, hi)] == list(range(total))
    assert len(ranges) <= parts and all(lo % align == 0 for lo, _ in ranges)


@pytest.fixture
def tasks_run(monkeypatch):
    """Thresholds off; records the task count of every native task list a kernel runs."""
    counts, launch = [], NativeTasks.launch

    def recording(self, first, bases, count=None):
        counts.append(self.n)
        return launch(self, first, bases, count)

    monkeypatch.setattr(NativeTasks, "launch", recording)
    monkeypatch.setattr(native_run, "split_step", lambda *args: None)  # kernel objects split
    monkeypatch.setattr(ew_kernels, "_PARALLEL_ELEMENTS", 1)
    monkeypatch.setattr(pool_kernels, "_PARALLEL_READS", 0)
    monkeypatch.setattr(conv_kernels, "_DEPTHWISE_PARALLEL", 0)
    monkeypatch.setattr(direct_conv, "_PARALLEL_MACS", 0)
    monkeypatch.setattr(direct_conv_plan, "_PARALLEL_PREP", 0)
    return counts


def _elementwise_entry():
    return ew_kernels._kernels()["add"]


@pytest.mark.parametrize("count", [1, 2, 3])
def test_native_task_list_runs_every_call_once(count):
    # task i adds 1 to out[i * 16 : (i + 1) * 16] (out = out + ones): twice would show as 2
    n, ones = 37, np.ones(16, np.float32)
    out = np.zeros(n * 16, np.float32)
    args = np.array([(out.ctypes.data + 64 * i, ones.ctypes.data, out.ctypes.data + 64 * i, 16,
                      0) for i in range(n)], np.int64)
    with num_threads(count):
        parallel_calls(threads.native_address(_elementwise_entry()), args)
    assert np.array_equal(out, np.ones_like(out))


def test_one_task_list_from_concurrent_callers():
    # callers that find the list busy work on a copy: no call is lost or done twice
    outs = [np.zeros(64 * 16, np.float32) for _ in range(4)]
    ones = np.ones(16, np.float32)
    tasks = NativeTasks(64)
    tasks.records[:, 0] = threads.native_address(_elementwise_entry())
    tasks.records[:, 4:6] = (16, 0)
    lock = threading.Lock()

    def caller(c):
        base = outs[c].ctypes.data
        rows = np.array([(base + 64 * i, ones.ctypes.data, base + 64 * i) for i in range(64)])
        with num_threads(2):
            for _ in range(20):
                tasks.call(1, rows)
        with lock:
            assert np.array_equal(outs[c], np.full_like(outs[c], 20))

    assert run_on_threads(caller, 4, timeout=60) == []


def _one_and_more(params, body, *inputs):
    f = relax.VirtualMachine(relax.build(one_function_module(params, body)), relax.cpu())["main"]
    outs = []
    for count in (1, 2, 3):
        with num_threads(count):
            outs.append(f(*inputs).numpy().copy())
    for more in outs[1:]:
        assert np.array_equal(outs[0], more)
    return outs[0]


def _var(shape):
    return relax.Var("x", relax.TensorStructInfo(shape, "float32"))


@pytest.mark.parametrize("shape", [(1, 5, 7, 9), (3, 4, 6, 6), (2, 1000)])
def test_elementwise_splits_equal_one_thread(tasks_run, shape):
    a, b = _rand(*shape), _rand(*shape)
    x, y = _var(shape), relax.Var("y", relax.TensorStructInfo(shape, "float32"))
    out = _one_and_more([x, y], lambda bb, x, y: R.nn.relu(bb.emit(R.add(x, y))), a, b)
    np.testing.assert_array_equal(out, np.maximum(a + b, 0))
    # a per-channel constant: channel ranges of one image, whole images, or rows (last axis)
    c = _rand(shape[1], *(1,) * (len(shape) - 2))
    out = _one_and_more([x], lambda bb, x: R.multiply(x, relax.const(c)), a)
    np.testing.assert_allclose(out, a * c, rtol=1e-6)
    assert tasks_run and all(n > 1 for n in tasks_run), tasks_run


@pytest.mark.parametrize("shape", [(1, 5, 13, 13), (3, 4, 9, 11)])
def test_pools_and_depthwise_split_equal_one_thread(tasks_run, shape):
    torch = pytest.importorskip("torch")
    a = _rand(*shape)
    t = torch.from_numpy(a)
    out = _one_and_more([_var(shape)], lambda bb, x: R.nn.max_pool2d(x, 3, 2, 1), a)
    np.testing.assert_array_equal(out, torch.nn.functional.max_pool2d(t, 3, 2, 1).numpy())
    out = _one_and_more([_var(shape)], lambda bb, x: R.nn.avg_pool2d(x, 3, 1, 1), a)
    want = torch.nn.functional.avg_pool2d(t, 3, 1, 1, count_include_pad=False).numpy()
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    w = _rand(2 * shape[1], 1, 3, 3)  # channel multiplier 2, each task pads its own planes
    out = _one_and_more([_var(shape)], lambda bb, x: R.nn.conv2d(
        x, relax.const(w), padding=1, groups=shape[1]), a)
    want = torch.conv2d(t, torch.from_numpy(w), padding=1, groups=shape[1]).numpy()
    np.testing.assert_allclose(out, want, **TOL)
    assert len(tasks_run) >= 4 and all(n > 1 for n in tasks_run), tasks_run


DIRECT_CASES = [  # c, h, o, k, stride, groups, pad: how the output splits across 2 threads
    (32, 6, 200, 1, 1, 1, 0),   # channel blocks (the weights outweigh the input)
    (8, 12, 64, 3, 1, 1, 1),    # channel blocks (12 rows < 2 x 4 parts)
    (64, 5, 64, 1, 1, 16, 0),   # groups
    (6, 15, 8, 3, 2, 2, 1),     # groups, strided: phase planes split by input channel
    (16, 20, 24, 3, 1, 1, 1),   # row bands (3 channel blocks), input padded by 2 tasks
    (6, 15, 8, 3, 2, 1, 1),     # row bands, strided
]


@pytest.mark.parametrize("c, h, o, k, stride, groups, pad", DIRECT_CASES)
def test_direct_conv_splits_equal_one_thread(tasks_run, c, h, o, k, stride, groups, pad):
    torch = pytest.importorskip("torch")
    w, b, x = _rand(o, c // groups, k, k), _rand(o), _rand(1, c, h, h)
    attrs = {"strides": (stride, stride), "padding": (pad,) * 4, "dilation": (1, 1)}
    kernel = DirectConv2d("nn.conv2d", w, b, True, groups, attrs)
    oh = (h + 2 * pad - k) // stride + 1
    outs = []
    for count in (1, 2, 3):
        out = np.full((1, o, oh, oh), np.nan, np.float32)
        with num_threads(count):
            kernel(x, out)
        outs.append(out)
    assert all(np.array_equal(outs[0], more) for more in outs[1:])
    want = torch.relu(torch.conv2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b),
                                   stride=stride, padding=pad, groups=groups)).numpy()
    np.testing.assert_allclose(outs[0], want, **TOL)
    plan = kernel._plans[x.shape]
    prep, parts = plan.split(2, kernel.address)
    by_address = {arr.ctypes.data: values for values, arr in plan._parts.items()}
    chosen = [by_address[address] for address in parts.records[:, 8]]
    by_units = all(r1 - r0 == oh for _, r0, r1, *_ in chosen)
    assert by_units == (DIRECT_CASES.index((c, h, o, k, stride, groups, pad)) < 4), chosen
    assert (prep is None) == (pad == 0 and stride == 1)
    assert tasks_run and all(n > 1 for n in tasks_run), tasks_run


@pytest.mark.parametrize("shape, axes", [((1, 4, 34, 7, 7), (0, 2, 1, 3, 4)),  # channel shuffle
                                         ((3, 5, 7), (1, 0, 2)), ((5, 3, 4, 6), (2, 0, 1, 3))])
def test_permute_splits_equal_one_thread(tasks_run, monkeypatch, shape, axes):
    from msc.backend.kernels import layout

    monkeypatch.setattr(layout, "_PARALLEL_ELEMENTS", 1)
    x = _rand(*shape)
    out = _one_and_more([_var(shape)], lambda bb, x: R.permute_dims(x, axes), x)
    np.testing.assert_array_equal(out, x.transpose(axes))
    assert tasks_run and all(n > 1 for n in tasks_run), tasks_run


@pytest.mark.parametrize("shape, dtype", [((1000, 37), np.float32), ((3, 5), np.int64),
                                          ((70001,), np.uint8)])
def test_copy_into_splits_large_copies(tasks_run, monkeypatch, shape, dtype):
    monkeypatch.setattr(threads, "_COPY_PARALLEL", 1)
    src = (np.arange(np.prod(shape)) % 251).astype(dtype).reshape(shape)
    for count in (1, 2, 3):
        dst = np.zeros_like(src)
        with num_threads(count):
            threads.copy_into(dst, src)
        assert np.array_equal(dst, src)
    strided = np.zeros((shape[0], 2 * shape[-1]), dtype)[:, ::2] if len(shape) == 2 else None
    if strided is not None:  # not contiguous: numpy copies it
        with num_threads(2):
            threads.copy_into(strided, src)
        assert np.array_equal(strided, src)
    assert tasks_run and all(n > 1 for n in tasks_run), tasks_run


def test_densenet_style_concat_copies_on_threads(monkeypatch):
    # the second concat's first input is the first concat's result, not its own slice: copied
    monkeypatch.setattr(threads, "_COPY_PARALLEL", 1)
    shape = (1, 16, 8, 8)
    a, b, c = _rand(*shape), _rand(*shape), _rand(*shape)
    params = [relax.Var(n, relax.TensorStructInfo(shape, "float32")) for n in "abc"]

    def body(bb, x, y, z):
        first = bb.emit(R.concat([bb.emit(R.nn.relu(x)), bb.emit(R.nn.relu(y))], axis=1))
        return R.concat([first, bb.emit(R.nn.relu(z))], axis=1)

    out = _one_and_more(params, body, a, b, c)
    np.testing.assert_array_equal(out, np.maximum(np.concatenate([a, b, c], axis=1), 0))
