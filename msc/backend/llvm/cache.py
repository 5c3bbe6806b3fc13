"""On-disk cache of compiled kernel object code.

A kernel is identified by the sha256 of its LLVM IR text plus everything that changes the
machine code for the same text (target triple, CPU name, CPU features, llvmlite and LLVM
versions, optimisation level); see :func:`cache_key`. The value is the object file that LLVM
emitted, so a warm build skips parsing, optimisation and code generation entirely::

    cache = KernelCache()                 # $MSC_CACHE_DIR or ~/.cache/msc/kernels
    data = cache.load(key)                # bytes, or None on a miss (or a damaged entry)
    cache.store(key, data)                # atomic: temp file + os.replace
    cache.stats.hits, cache.stats.misses
    cache.size_bytes(); cache.prune(50 << 20); cache.clear()

``$MSC_CACHE_MAX_MB`` bounds the directory: after each write the least recently used entries
(a hit refreshes an entry's mtime) are removed until the entries fit. Unset means unbounded.

Entries carry a header (magic, payload length, payload sha256). A truncated or otherwise damaged
entry is reported as a miss and rewritten by the caller, because feeding bad bytes to the JIT
would crash the process instead of raising.
"""

from __future__ import annotations

import hashlib
import os
import re
import struct
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

from ...errors import ValidationError

__all__ = ["CacheStats", "KernelCache", "cache_key", "default_cache_dir", "default_max_bytes"]

_MAGIC = b"MSCKOBJ1"
_HEADER = struct.Struct("<8sQ32s")  # magic, payload length, sha256(payload)
_KEY = re.compile(r"[0-9a-f]{64}")
_SUFFIX = ".mscobj"


def default_cache_dir() -> Path:
    """``$MSC_CACHE_DIR`` if set and non-empty, else ``~/.cache/msc/kernels``."""
    env = os.environ.get("MSC_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "msc" / "kernels"


def default_max_bytes() -> int | None:
    """``$MSC_CACHE_MAX_MB`` in bytes, or None (unbounded) when unset or empty."""
    env = os.environ.get("MSC_CACHE_MAX_MB", "").strip()
    if not env:
        return None
    try:
        mb = float(env)
    except ValueError:
        mb = -1.0
    if not mb >= 0:
        raise ValidationError(f"MSC_CACHE_MAX_MB must be a number of megabytes >= 0, got "
                              f"{env!r}", key="MSC_CACHE_MAX_MB", hint="e.g. 500, or unset it")
    return int(mb * (1 << 20))


def cache_key(ir_text: str, *target: str) -> str:
    """sha256 over the IR text and the target description, NUL-separated so parts can't merge."""
    digest = hashlib.sha256()
    for part in (ir_text, *target):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


@dataclass
class CacheStats:
    """Lookup counters; ``corrupt`` entries are also counted as misses."""

    hits: int = 0
    misses: int = 0
    corrupt: int = 0
    writes: int = 0
    write_errors: int = 0
    evicted: int = 0


class KernelCache:
    """Directory of ``<key>.mscobj`` files, safe to share between concurrent processes."""

    def __init__(self, directory: str | os.PathLike | None = None,
                 max_bytes: int | None = None):
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        self.max_bytes = max_bytes if max_bytes is not None else default_max_bytes()
        self.stats = CacheStats()

    def __repr__(self) -> str:
        return f"KernelCache({str(self.directory)!r}, {self.stats})"

    def path(self, key: str) -> Path:
        if not _KEY.fullmatch(key):
            raise ValidationError("cache key must be 64 lowercase hex digits", key=key,
                                  hint="build keys with msc.backend.cache.cache_key")
        return self.directory / (key + _SUFFIX)

    def load(self, key: str) -> bytes | None:
        """The stored object code, or None when the entry is missing or fails its checks."""
        payload = self._payload(key)
        if payload is None:
            self.stats.misses += 1
            return None
        self.stats.hits += 1
        _touch(self.path(key))
        return payload

    def valid(self, key: str) -> bool:
        """Whether a complete, undamaged entry is stored (not counted as a lookup; a damaged
        one counts as ``corrupt``)."""
        return self._payload(key) is not None

    def _payload(self, key: str) -> bytes | None:
        """The entry's checked payload; None when missing or damaged (counted as corrupt)."""
        try:
            blob = self.path(key).read_bytes()
        except OSError:
            return None
        payload = _unwrap(blob)
        if payload is None:
            self.stats.corrupt += 1
        return payload

    def store(self, key: str, data: bytes) -> None:
        """Write atomically; a cache that cannot be written only costs speed, so warn once."""
        target = self.path(key)
        try:
            _atomic_write(target, _wrap(data))
        except OSError as exc:
            if not self.stats.write_errors:
                warnings.warn(f"msc kernel cache: cannot write {target}: {exc}", RuntimeWarning,
                              stacklevel=2)
            self.stats.write_errors += 1
            return
        self.stats.writes += 1
        if self.max_bytes is not None:
            self.prune(self.max_bytes)

    def _entries(self) -> list[tuple[float, int, Path]]:
        """(mtime, size, path) of every entry, entries removed meanwhile skipped."""
        found = []
        for entry in self.directory.glob("*" + _SUFFIX):
            try:
                st = entry.stat()
            except OSError:
                continue
            found.append((st.st_mtime, st.st_size, entry))
        return found

    def size_bytes(self) -> int:
        """Total size of the entries on disk."""
        return sum(size for _, size, _ in self._entries())

    def count(self) -> int:
        """How many entries are on disk (``msc cache`` shows it)."""
        return len(self._entries())

    def prune(self, max_bytes: int) -> int:
        """Remove the least recently used entries until the rest fit in ``max_bytes``; returns
        how many were removed. Safe while other processes use the cache: a reader holds its
        bytes already, and a removed entry is only a miss for the next one."""
        entries = sorted(self._entries())
        total = sum(size for _, size, _ in entries)
        removed = 0
        for _, size, path in entries:
            if total <= max_bytes:
                break
            path.unlink(missing_ok=True)
            total -= size
            removed += 1
        self.stats.evicted += removed
        return removed

    def clear(self) -> int:
        """Remove every entry and leftover temp file (not foreign files); returns how many
        entries were removed."""
        removed = 0
        for entry in self.directory.glob("*" + _SUFFIX):
            entry.unlink(missing_ok=True)
            removed += 1
        for tmp in self.directory.glob(".*.tmp"):
            tmp.unlink(missing_ok=True)
        return removed


def _touch(path: Path) -> None:
    # a hit makes the entry the most recently used for prune (best effort: read-only caches)
    try:
        os.utime(path)
    except OSError:
        pass


def _wrap(data: bytes) -> bytes:
    return _HEADER.pack(_MAGIC, len(data), hashlib.sha256(data).digest()) + data


def _unwrap(blob: bytes) -> bytes | None:
    if len(blob) < _HEADER.size:
        return None
    magic, length, digest = _HEADER.unpack_from(blob)
    payload = blob[_HEADER.size:]
    if magic != _MAGIC or length != len(payload) or hashlib.sha256(payload).digest() != digest:
        return None
    return payload


def _atomic_write(target: Path, blob: bytes) -> None:
    # Readers see either the old entry or the complete new one: the temp file lives in the
    # same directory (same file system) and os.replace is atomic there. No fsync: after a
    # crash a half-written entry fails its checksum and is simply rebuilt.
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix="." + target.stem[:16], suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(blob)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
