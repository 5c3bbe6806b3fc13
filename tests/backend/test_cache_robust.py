"""The kernel cache under damage and contention: damaged entries of a real build are detected
and rebuilt (never loaded), two processes building the same model at once both succeed and
leave a valid cache, and ``$MSC_CACHE_MAX_MB`` / ``prune`` / ``clear`` bound it.

Builds run in child processes: a damaged entry handed to LLVM would crash the process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from msc.backend import KernelCache
from msc.backend.llvm.cache import _unwrap, cache_key, default_max_bytes
from msc.errors import ValidationError

ROOT = Path(__file__).resolve().parents[2]

# Builds a small model (native GEMM, TIR take and relu), checks its result against numpy and
# prints the process's cache counters.
CHILD = """
import json, numpy as np
from msc import relax
from msc.backend.llvm.jit import get_jit
from msc.relax.op.registry import make_call
x = relax.Var("x", relax.TensorStructInfo((4, 16), "float32"))
w = relax.Var("w", relax.TensorStructInfo((16, 8), "float32"))
i = relax.Var("i", relax.TensorStructInfo((3,), "int64"))
bb = relax.BlockBuilder()
with bb.function("main", [x, w, i]):
    with bb.dataflow():
        y = bb.emit(make_call("matmul", x, w))
        y = bb.emit(make_call("nn.relu", y))
        out = bb.emit_output(make_call("take", y, i, axis=1))
    bb.emit_func_output(out)
f = relax.VirtualMachine(relax.build(bb.get()), relax.cpu())["main"]
rng = np.random.default_rng(0)
X, W = rng.standard_normal((4, 16), "float32"), rng.standard_normal((16, 8), "float32")
I = np.array([7, 0, -1])
np.testing.assert_allclose(f(X, W, I).numpy(), np.maximum(X @ W, 0)[:, I], rtol=1e-5)
print(json.dumps(vars(get_jit().cache.stats)))
"""


def _spawn(cache_dir: Path) -> subprocess.Popen:
    env = {**os.environ, "MSC_CACHE_DIR": str(cache_dir), "PYTHONFAULTHANDLER": "1"}
    env.pop("MSC_CACHE_MAX_MB", None)
    return subprocess.Popen([sys.executable, "-c", CHILD], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _finish(proc: subprocess.Popen) -> dict:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, f"child died ({proc.returncode}):\n{err[-3000:]}"
    return json.loads(out.strip().splitlines()[-1])


def _assert_valid(cache_dir: Path) -> list[Path]:
    entries = sorted(cache_dir.glob("*.mscobj"))
    assert entries, "the build stored nothing"
    assert all(_unwrap(e.read_bytes()) is not None for e in entries)
    assert not list(cache_dir.glob(".*.tmp")), "a temp file was left behind"
    return entries


DAMAGE = {
    "truncated": lambda blob: blob[: len(blob) // 2],
    "header only": lambda blob: blob[:48],
    "flipped byte": lambda blob: blob[:-9] + bytes([blob[-9] ^ 0xFF]) + blob[-8:],
    "wrong magic": lambda blob: b"XXXXXXXX" + blob[8:],
    "empty": lambda blob: b"",
}


def test_damaged_entries_of_a_build_are_rebuilt(tmp_path):
    """Every kind of damage, spread over the build's entries in two rounds."""
    cold = _finish(_spawn(tmp_path))
    entries = _assert_valid(tmp_path)
    assert cold["corrupt"] == 0
    kinds = sorted(DAMAGE)
    for start in range(0, len(kinds), len(entries)):
        for n, entry in enumerate(entries):
            entry.write_bytes(DAMAGE[kinds[(start + n) % len(kinds)]](entry.read_bytes()))
        again = _finish(_spawn(tmp_path))
        assert again["corrupt"] == len(entries)
        assert _assert_valid(tmp_path) == entries
    warm = _finish(_spawn(tmp_path))
    assert (warm["hits"], warm["misses"], warm["corrupt"]) == (len(entries), 0, 0)


def test_two_processes_build_the_same_model_at_once(tmp_path):
    procs = [_spawn(tmp_path) for _ in range(2)]
    stats = [_finish(p) for p in procs]
    entries = _assert_valid(tmp_path)
    assert all(s["corrupt"] == 0 for s in stats)
    assert all(s["hits"] + s["misses"] == len(entries) for s in stats)
    warm = _finish(_spawn(tmp_path))
    assert warm["hits"] == len(entries) and warm["misses"] == 0


# ---------------------------------------------------------------------------- size bound

def _fill(cache: KernelCache, count: int, size: int = 1000) -> list[str]:
    keys = []
    for n in range(count):
        key = cache_key(f"ir{n}", "cpu")
        cache.store(key, bytes([n]) * size)
        os.utime(cache.path(key), (time.time() - 100 + n,) * 2)  # distinct ages
        keys.append(key)
    return keys


def test_prune_removes_the_least_recently_used(tmp_path):
    cache = KernelCache(tmp_path)
    keys = _fill(cache, 5)
    assert cache.load(keys[0]) is not None  # a hit: keys[0] becomes the most recent
    entry = cache.path(keys[0]).stat().st_size
    assert cache.size_bytes() == 5 * entry
    assert cache.prune(3 * entry) == 2
    assert [cache.load(k) is not None for k in keys] == [True, False, False, True, True]
    assert cache.stats.evicted == 2


def test_max_bytes_bounds_every_store(tmp_path, monkeypatch):
    monkeypatch.setenv("MSC_CACHE_MAX_MB", str(3.5 * 1040 / (1 << 20)))
    cache = KernelCache(tmp_path)
    keys = _fill(cache, 6)
    assert cache.size_bytes() <= cache.max_bytes
    assert cache.load(keys[-1]) is not None and cache.load(keys[0]) is None


@pytest.mark.parametrize("value, want", [("", None), ("0", 0), ("2", 2 << 20),
                                         ("0.5", 1 << 19)])
def test_max_bytes_from_env(monkeypatch, value, want):
    monkeypatch.setenv("MSC_CACHE_MAX_MB", value)
    assert default_max_bytes() == want


@pytest.mark.parametrize("value", ["-1", "lots", "nan"])
def test_bad_max_bytes_names_the_variable(monkeypatch, value):
    monkeypatch.setenv("MSC_CACHE_MAX_MB", value)
    with pytest.raises(ValidationError, match="MSC_CACHE_MAX_MB"):
        default_max_bytes()


def test_clear_removes_entries_and_temp_files_only(tmp_path):
    cache = KernelCache(tmp_path)
    _fill(cache, 3)
    (tmp_path / ".abc123.tmp").write_bytes(b"half")
    (tmp_path / "notes.txt").write_text("mine")
    assert cache.clear() == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
    assert cache.size_bytes() == 0
