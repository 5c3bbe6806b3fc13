"""``msc cache``: size, prune (least recently used first) and clear of the kernel cache, on a
cache folder of the test's own; only the cache's entries are ever removed."""

from __future__ import annotations

import json
import os

import pytest

from msc.backend.llvm.cache import KernelCache, cache_key
from msc.cli.main import main


@pytest.fixture
def cache(tmp_path):
    """Three entries of 1, 2 and 3 KiB, used in that order (the first is the least recent),
    and a foreign file that no command may touch."""
    kc = KernelCache(tmp_path / "kernels")
    for i, size in enumerate((1, 2, 3)):
        key = cache_key(f"kernel {i}")
        kc.store(key, bytes(size << 10))
        os.utime(kc.path(key), (1000 + i, 1000 + i))
    (tmp_path / "kernels" / "notes.txt").write_text("mine")
    return kc


def _report(capsys, *argv) -> dict:
    assert main(["cache", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_size_counts_entries_and_bytes(cache, capsys):
    report = _report(capsys, "--dir", str(cache.directory))
    assert report["entries"] == 3 and report["bytes"] == cache.size_bytes() > 6 << 10


def test_prune_drops_least_recently_used(cache, capsys):
    newest = cache.path(cache_key("kernel 2")).stat().st_size
    report = _report(capsys, "prune", "--dir", str(cache.directory), "--max-mb",
                     str(newest / (1 << 20)))
    assert report["removed"] == 2 and report["entries"] == 1
    assert cache.valid(cache_key("kernel 2")) and not cache.valid(cache_key("kernel 0"))


def test_prune_takes_the_size_from_the_environment(cache, capsys, monkeypatch):
    monkeypatch.setenv("MSC_CACHE_MAX_MB", "0")
    assert _report(capsys, "prune", "--dir", str(cache.directory))["entries"] == 0


def test_clear_keeps_foreign_files(cache, capsys):
    report = _report(capsys, "clear", "--dir", str(cache.directory))
    assert report["removed"] == 3 and report["entries"] == 0 and report["freed_bytes"] > 0
    assert (cache.directory / "notes.txt").read_text() == "mine"


def test_default_folder_is_msc_cache_dir(cache, capsys, monkeypatch):
    monkeypatch.setenv("MSC_CACHE_DIR", str(cache.directory))
    assert main(["cache"]) == 0
    assert capsys.readouterr().out.startswith(f"{cache.directory}: 3 kernels, 0.0 MB")


@pytest.mark.parametrize("argv, words", [
    (["prune"], "prune needs a size"), (["prune", "--max-mb", "-1"], "'-1' is not a number"),
    (["prune", "--max-mb", "nan"], "'nan'"), (["wipe"], "invalid choice: 'wipe'")])
def test_bad_arguments_exit_2(cache, capsys, monkeypatch, argv, words):
    monkeypatch.delenv("MSC_CACHE_MAX_MB", raising=False)
    assert main(["cache", *argv, "--dir", str(cache.directory)]) == 2
    assert words in capsys.readouterr().err
    assert cache.count() == 3
