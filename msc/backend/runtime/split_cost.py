"""What a split across threads costs on this host, measured once and kept beside the kernel
cache: the split decision of the chains' parallel steps (chain_split.py) comes from here, not
from constants tuned on one CPU.

    costs = host_costs()              # {"dispatch_s": ..., "serial_s": ..., "rates": {...}}
    worth_splitting(40e-6, 2)         # True when half of 40 us saves more than a round trip
    unit_seconds("direct_conv", macs, probe)   # macs x this host's measured seconds per MAC

``dispatch_s`` is one native-pool round trip at two threads beyond the same tasks run on the
calling thread (two empty tasks, median of many back-to-back calls: the hand-off between two
kernels of one model call, the worker still polling). ``rates`` holds seconds per unit of work
of each kernel kind, measured by a probe the kernel module passes on first use (one call of a
representative shape, fastest of a few).

The file (``<kernel cache dir>/split_cost.json``, written atomically) names the CPU it was
measured on (LLVM's CPU name and features, /proc/cpuinfo's model name, the threads). On
reading it is checked: a file that does not parse, of another version or another CPU, or
holding a value that is not a finite positive number, is ignored with a warning and measured
again; it is never trusted. ``$MSC_SPLIT=always`` splits every step that can split (tests run
the parallel path on small models this way), ``never`` none; unset or ``measured``: the
break-even.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import statistics
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path

from ...errors import ValidationError

__all__ = ["SPLIT_ENV", "cost_file", "cpu_identity", "describe", "host_costs", "split_mode",
           "unit_seconds", "worth_splitting"]

VERSION = 1
SPLIT_ENV = "MSC_SPLIT"
_MODES = ("measured", "always", "never")
# a split must save this many round trips: the parts' imbalance, the first touch of the
# other core's cache and the odd late wake-up are not in the empty round trip
MARGIN = 3.0
_lock = threading.RLock()
_costs: dict = {}


def split_mode() -> str:
    """``$MSC_SPLIT``: measured (default), always or never."""
    mode = os.environ.get(SPLIT_ENV, "").strip().lower() or "measured"
    if mode not in _MODES:
        raise ValidationError(f"{SPLIT_ENV} must be one of {', '.join(_MODES)}, got {mode!r}",
                              key=SPLIT_ENV, hint="unset it to split by the measured cost")
    return mode


def cost_file() -> Path:
    """Where this host's costs are kept: beside the kernel cache's entries."""
    from ..llvm.cache import default_cache_dir

    return default_cache_dir() / "split_cost.json"


@functools.cache
def cpu_identity() -> dict:
    """What the measurements depend on: a file from another CPU is not this host's."""
    from ..llvm.jit import host_target
    from .threads import cpu_threads

    target = host_target()
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f
                          if line.startswith("model name")), "")
    except OSError:
        pass
    features = hashlib.sha256(target.features.encode()).hexdigest()[:16]
    return {"cpu": target.cpu, "features": features, "model": model, "threads": cpu_threads()}


def host_costs() -> dict:
    """This host's costs: read from the file when it is valid, else measured (and saved)."""
    with _lock:
        if not _costs:
            _costs.update(_read(cost_file()) or _measure_host())
        return _costs


def worth_splitting(seconds: float, threads: int) -> bool:
    """Whether work of ``seconds`` on one thread saves more, split over ``threads``, than
    the pool's round trip costs (``MARGIN`` times over); ``$MSC_SPLIT`` overrides."""
    mode = split_mode()
    if mode != "measured":
        return mode == "always"
    if threads < 2:
        return False
    saved = seconds * (1.0 - 1.0 / threads)
    return saved > MARGIN * host_costs()["dispatch_s"]


def describe(costs: dict) -> str:
    """One line of the costs, for benchmarks and reports."""
    rates = ", ".join(f"{k} {v * 1e12:.1f} ps/unit" for k, v in sorted(costs["rates"].items()))
    return (f"round trip {costs['dispatch_s'] * 1e6:.2f} us beyond {costs['serial_s'] * 1e6:.2f}"
            f" us serial" + (f"; {rates}" if rates else ""))


def unit_seconds(kind: str, work: float, probe: Callable[[], tuple]) -> float:
    """``work`` units of kernel kind ``kind`` in seconds on one thread, at this host's rate:
    ``probe()`` -> (seconds, units) of one representative call, run once per host (its
    result is saved with the other costs)."""
    with _lock:
        rates = host_costs().setdefault("rates", {})
        if kind not in rates:
            seconds, units = probe()
            rates[kind] = max(seconds, 1e-9) / max(units, 1)
            _write(cost_file(), host_costs())
        return work * rates[kind]


# ---------------------------------------------------------------------------------------------
# Measuring


_NOOP_IR = "define void @msc_split_cost_noop(i64 %a) {\nentry:\n  ret void\n}\n"


def _measure_host(calls: int = 400) -> dict:
    """The round trip of two empty tasks on the pool at two threads, less the same on this
    thread (medians of ``calls`` calls after a warm-up)."""
    from ..llvm.jit import get_jit
    from .native_pool import get_pool, serial_runner
    from .threads import NativeTasks

    library = get_jit().compile(_NOOP_IR, ["msc_split_cost_noop"], name="msc_split_cost")
    tasks = NativeTasks(2)
    tasks.records[:, 0] = library.address("msc_split_cost_noop")
    ptr, zeros = tasks.records.ctypes.data, (0,) * 8
    serial = serial_runner()
    pool = get_pool()
    serial_s = statistics.median(_times(lambda: serial(ptr, 2, 1, *zeros), calls))
    if pool is None:  # no native pool: a split goes through Python (about 20 us)
        dispatch_s = 20e-6
    else:
        pool.run(ptr, 2, 2)
        dispatch_s = max(statistics.median(_times(lambda: pool.run(ptr, 2, 2), calls))
                         - serial_s, 1e-7)
    costs = {"dispatch_s": dispatch_s, "serial_s": serial_s, "rates": {}}
    _write(cost_file(), costs)
    return costs


def _times(fn, calls: int) -> list:
    for _ in range(20):
        fn()
    out = []
    for _ in range(calls):
        before = time.perf_counter()
        fn()
        out.append(time.perf_counter() - before)
    return out


# ---------------------------------------------------------------------------------------------
# The file


def _read(path: Path) -> dict | None:
    """The costs in ``path`` if it is a valid file of this version and this CPU, else None
    (a warning says why, unless the file does not exist)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as error:
        return _ignored(path, f"it cannot be read ({error})")
    try:
        data = json.loads(text)
    except ValueError:
        return _ignored(path, "it is not JSON")
    if not isinstance(data, dict) or data.get("version") != VERSION:
        return _ignored(path, f"it is not version {VERSION}")
    if data.get("host") != cpu_identity():
        return _ignored(path, "it was measured on another CPU")
    costs = data.get("costs")
    if not _valid_costs(costs):
        return _ignored(path, "its values are not finite positive numbers")
    return costs


def _valid_costs(costs) -> bool:
    if not isinstance(costs, dict) or not isinstance(costs.get("rates"), dict):
        return False
    values = [costs.get("dispatch_s"), costs.get("serial_s"), *costs["rates"].values()]
    return all(type(v) is float and math.isfinite(v) and 0 < v < 1 for v in values)


def _ignored(path: Path, why: str) -> None:
    warnings.warn(f"msc: ignoring the split costs in {path}: {why}; measuring them again",
                  RuntimeWarning, stacklevel=3)


def _write(path: Path, costs: dict) -> None:
    """Atomically (temp file, rename); a read-only cache directory only loses the file."""
    data = {"version": VERSION, "host": cpu_identity(), "costs": costs}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".split_cost.", suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1)
        os.replace(tmp, path)
    except OSError:
        pass
