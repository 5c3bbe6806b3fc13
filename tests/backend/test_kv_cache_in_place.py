"""index_copy (a KV cache append): its numpy fact and TIR legalization against torch's
index_copy, and the build's in-place rewrite (backend/fuse/patterns/cache.py): a cache parameter
that only the append reads is written in place; any other reader keeps the copy."""

import numpy as np
import pytest
import torch

from msc import relax, tir
from msc.errors import RuntimeCallError
from msc.relax.op import make_call
from msc.relax.op.facts import load_facts
from msc.relax.op.registry import OPS

SHAPE, NEW = (1, 2, 8, 4), (1, 2, 3, 4)
RNG = np.random.default_rng(0)
CACHE = RNG.standard_normal(SHAPE).astype(np.float32)
ROWS = RNG.standard_normal(NEW).astype(np.float32)
AT = np.array([5, 2, 6], dtype=np.int64)


def _expected(cache=CACHE, rows=ROWS, at=AT) -> np.ndarray:
    return torch.index_copy(torch.tensor(cache), 2, torch.tensor(at), torch.tensor(rows)).numpy()


def _step(also_read: bool):
    """main(cache, at, rows) -> (index_copy(cache, at, rows) * 2, [cache + 1])."""
    cache = relax.Var("cache", relax.TensorStructInfo(SHAPE, "float32"))
    n = tir.Var("n", "int64")  # the new rows: a prompt, then one token per step
    at = relax.Var("at", relax.TensorStructInfo((n,), "int64"))
    rows = relax.Var("rows", relax.TensorStructInfo((1, 2, n, 4), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [cache, at, rows]):
        with bb.dataflow():
            present = bb.emit(make_call("index_copy", cache, at, rows, axis=2))
            fields = [present]
            if also_read:
                fields.append(bb.emit(make_call("add", cache, relax.const(1.0, "float32"))))
            out = bb.emit_output(relax.Tuple(fields))
        bb.emit_func_output(out)
    return relax.build(bb.get())


def test_numpy_fact_is_torch_index_copy_and_leaves_data_alone():
    load_facts("numpy")
    before = CACHE.copy()
    out = OPS["index_copy"].facts["numpy"]([CACHE, AT, ROWS], {"axis": 2})
    np.testing.assert_array_equal(out, _expected())
    np.testing.assert_array_equal(CACHE, before)


def test_legalized_kernel_is_torch_index_copy():
    ex = relax.build(_step(also_read=True).mod, fuse=False)  # no rewrite: the TIR kernel
    assert ex.stats["ops"]["index_copy"] == {"tir": 1}
    cache = CACHE.copy()
    out = relax.VirtualMachine(ex, relax.cpu())["main"](cache, AT, ROWS)
    np.testing.assert_array_equal(out[0].numpy(), _expected())
    np.testing.assert_array_equal(cache, CACHE)  # functional: the caller's array is kept


def test_a_cache_only_the_append_reads_is_written_in_place():
    ex = _step(also_read=False)
    assert ex.stats["fused"] == {"kv_cache_in_place": 1}
    vm = relax.VirtualMachine(ex, relax.cpu())["main"]
    cache = CACHE.copy()
    present = vm(cache, AT, ROWS)[0].numpy()
    assert np.shares_memory(present, cache)  # no copy of the cache
    np.testing.assert_array_equal(cache, _expected())
    # a shorter append on the next step (the decode loop's n = 1)
    vm(cache, np.array([7]), ROWS[:, :, :1])
    np.testing.assert_array_equal(cache[:, :, 7], ROWS[:, :, 0])


def test_a_cache_another_op_reads_is_copied():
    ex = _step(also_read=True)
    assert "kv_cache_in_place" not in ex.stats["fused"]
    cache = CACHE.copy()
    present, plus_one = relax.VirtualMachine(ex, relax.cpu())["main"](cache, AT, ROWS)
    np.testing.assert_array_equal(present.numpy(), _expected())
    np.testing.assert_array_equal(plus_one.numpy(), CACHE + 1)  # read before any write
    np.testing.assert_array_equal(cache, CACHE)


def test_two_caches_sharing_memory_are_refused():
    k = relax.Var("k", relax.TensorStructInfo(SHAPE, "float32"))
    v = relax.Var("v", relax.TensorStructInfo(SHAPE, "float32"))
    at = relax.Var("at", relax.TensorStructInfo((3,), "int64"))
    rows = relax.Var("rows", relax.TensorStructInfo(NEW, "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [k, v, at, rows]):
        with bb.dataflow():
            outs = [bb.emit(make_call("index_copy", c, at, rows, axis=2)) for c in (k, v)]
            out = bb.emit_output(relax.Tuple(outs))
        bb.emit_func_output(out)
    vm = relax.VirtualMachine(relax.build(bb.get()), relax.cpu())["main"]
    shared = CACHE.copy()
    with pytest.raises(RuntimeCallError, match="'k' and 'v' share memory"):
        vm(shared, shared, AT, ROWS)
