"""Kernel cache on disk, and the JIT that reads and fills it."""

import ctypes
import gc
import threading

import numpy as np
import pytest

from msc.backend import JIT, KernelCache
from msc.backend.kernels import Gemm
from msc.backend.llvm.cache import cache_key, default_cache_dir
from msc.errors import BuildError, ValidationError

ADD = """
define i64 @msc_test_add(i64 %a, i64 %b) {
  %s = add i64 %a, %b
  ret i64 %s
}
"""
KEY = cache_key("ir", "cpu")


def _add(library):
    return library.cfunc("msc_test_add", ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)


def _entries(directory):
    return sorted(directory.glob("*.mscobj"))


def test_key_covers_ir_and_target():
    assert cache_key("ir", "cpu") == KEY
    assert len({KEY, cache_key("ir2", "cpu"), cache_key("ir", "cpu2"), cache_key("irc", "pu")}) == 4


def test_store_then_load(tmp_path):
    cache = KernelCache(tmp_path)
    assert cache.load(KEY) is None
    cache.store(KEY, b"object code")
    assert cache.load(KEY) == b"object code"
    assert (cache.stats.misses, cache.stats.hits, cache.stats.writes) == (1, 1, 1)


@pytest.mark.parametrize("damage", [
    lambda blob: blob[: len(blob) // 2],          # truncated payload
    lambda blob: blob[:10],                        # truncated header
    lambda blob: blob[:-1] + b"X",                 # flipped byte
    lambda blob: b"garbage" + blob[7:],            # wrong magic
])
def test_damaged_entry_is_a_miss(tmp_path, damage):
    cache = KernelCache(tmp_path)
    cache.store(KEY, b"object code " * 10)
    path = cache.path(KEY)
    path.write_bytes(damage(path.read_bytes()))
    assert cache.load(KEY) is None
    assert (cache.stats.corrupt, cache.stats.misses) == (1, 1)


def test_cache_dir_from_env(tmp_path, monkeypatch):
    monkeypatch.setenv("MSC_CACHE_DIR", str(tmp_path / "kernels"))
    cache = KernelCache()
    cache.store(KEY, b"x")
    assert cache.directory == tmp_path / "kernels" and _entries(tmp_path / "kernels")
    monkeypatch.delenv("MSC_CACHE_DIR")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_cache_dir() == tmp_path / ".cache" / "msc" / "kernels"


def test_unwritable_cache_warns_and_goes_on(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    cache = KernelCache(blocker)
    with pytest.warns(RuntimeWarning, match="cannot write"):
        cache.store(KEY, b"x")
    assert cache.stats.write_errors == 1 and cache.load(KEY) is None


def test_bad_key_is_rejected(tmp_path):
    with pytest.raises(ValidationError):
        KernelCache(tmp_path).load("../../etc/passwd")


def test_concurrent_writers_never_expose_partial_entries(tmp_path):
    payloads = [bytes([i]) * 200_000 for i in range(4)]
    seen = []

    def write(data):
        cache = KernelCache(tmp_path)
        for _ in range(20):
            cache.store(KEY, data)
            seen.append(cache.load(KEY))

    threads = [threading.Thread(target=write, args=(p,)) for p in payloads]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(s in payloads for s in seen)
    assert not list(tmp_path.glob("*.tmp"))


def test_jit_miss_then_hit_in_a_fresh_engine(tmp_path):
    first = JIT(KernelCache(tmp_path))
    library = first.compile(ADD, ["msc_test_add"])
    assert not library.from_cache and _add(library)(2, 3) == 5
    assert first.compile(ADD, ["msc_test_add"]) is library  # same IR, same JIT: no lookup
    assert (first.cache.stats.misses, first.cache.stats.hits) == (1, 0)

    second = JIT(KernelCache(tmp_path))
    again = second.compile(ADD, ["msc_test_add"])
    assert again.from_cache and _add(again)(40, 2) == 42
    assert (second.cache.stats.hits, second.cache.stats.misses) == (1, 0)


def test_jit_rebuilds_a_truncated_entry(tmp_path):
    JIT(KernelCache(tmp_path)).compile(ADD, ["msc_test_add"])
    (entry,) = _entries(tmp_path)
    entry.write_bytes(entry.read_bytes()[:40])

    jit = JIT(KernelCache(tmp_path))
    library = jit.compile(ADD, ["msc_test_add"])
    assert not library.from_cache and _add(library)(7, 8) == 15
    assert (jit.cache.stats.corrupt, jit.cache.stats.writes) == (1, 1)
    assert JIT(KernelCache(tmp_path)).compile(ADD, ["msc_test_add"]).from_cache


def test_gemm_kernel_comes_from_the_cache(tmp_path):
    rng = np.random.default_rng(0)
    a, b = rng.random((10, 20), dtype=np.float32), rng.random((20, 30), dtype=np.float32)
    for hits in (0, 1):
        jit = JIT(KernelCache(tmp_path))
        out = Gemm(b, relu=True, jit=jit)(a)
        np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
        assert jit.cache.stats.hits == hits


@pytest.mark.parametrize("source,entries,words", [
    ("define i64 @f( {", ["f"], "invalid LLVM IR"),
    (ADD + "define void @helper() { ret void }", ["msc_test_add"], "exported but not entry"),
    (ADD, ["msc_test_missing"], "no entry point"),
    (ADD, [], "non-empty"),
    (ADD, "msc_test_add", "non-empty"),
])
def test_jit_build_errors(source, entries, words):
    with pytest.raises(BuildError, match=words):
        JIT(cache=None).compile(source, entries)


def test_entry_points_are_unique_per_engine():
    jit = JIT(cache=None)
    jit.compile(ADD, ["msc_test_add"])
    with pytest.raises(BuildError, match="already defined"):
        jit.compile(ADD.replace("add i64", "sub i64"), ["msc_test_add"])


def test_library_keeps_its_engine_alive():
    add = _add(JIT(cache=None).compile(ADD, ["msc_test_add"]))  # the JIT itself is dropped
    gc.collect()
    assert add(1, 2) == 3
