"""Build time of resnet50 (onnx light zoo): msc cold / warm vs TVM 0.27 ``relax.build``.

Each measurement runs in a fresh Python process so nothing is cached in memory:
- msc cold: an empty kernel cache directory (``MSC_CACHE_DIR``), so every kernel compiles;
- msc warm: the same directory again (kernels load from the disk cache);
- TVM: ``from_onnx``, then the ``"zero"`` pipeline (legalize, fold constants, fuse) and
  ``relax.build(mod, target="llvm")``; the same build benchmarks/backend.py times.
Only the build is timed (not the import of the model). ``build_times`` is what
benchmarks/backend.py --builds calls. Usage::

    .venv/bin/python benchmarks/build_time.py [--model light_resnet50] [--repeats 3]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the msc subprocess imports frontends from here

MSC_BUILD = r"""
import json, os, sys, time, onnx, onnx.backend.test
from msc.frontends.onnx.api import from_onnx
from msc import relax
root = os.path.join(os.path.dirname(onnx.backend.test.__file__), "data", "light")
mod, _ = from_onnx(onnx.load(os.path.join(root, sys.argv[1] + ".onnx")), as_msc=False)
t0 = time.perf_counter()
relax.build(mod)
print(json.dumps({"seconds": time.perf_counter() - t0}))
"""

TVM_BUILD = r"""
import json, os, sys, time, onnx, onnx.backend.test
import tvm
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx
root = os.path.join(os.path.dirname(onnx.backend.test.__file__), "data", "light")
mod = from_onnx(onnx.load(os.path.join(root, sys.argv[1] + ".onnx")), keep_params_in_input=False)
t0 = time.perf_counter()
target = tvm.target.Target("llvm")
with target:
    mod = relax.get_pipeline("zero")(mod)
relax.build(mod, target=target)
print(json.dumps({"seconds": time.perf_counter() - t0}))
"""


def _run(code: str, model: str, env: dict, timeout: float = 1800) -> float | None:
    """Seconds the child reports; None (and a note on stderr) if it fails or times out."""
    try:
        proc = subprocess.run([sys.executable, "-c", code, model], capture_output=True,
                              text=True, env=env, timeout=timeout, check=False, cwd=ROOT)
    except subprocess.TimeoutExpired:
        print(f"  (timed out after {timeout:.0f} s)", file=sys.stderr)
        return None
    if proc.returncode != 0:
        print(f"  (failed: {proc.stderr.strip().splitlines()[-1:]})", file=sys.stderr)
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])["seconds"]


def tvm_installed() -> bool:
    return importlib.util.find_spec("tvm") is not None


def build_times(model: str = "light_resnet50", repeats: int = 3,
                threads: int = 1) -> dict[str, float | None]:
    """Best seconds of each build ("msc cold", "msc warm", "tvm"); None where it failed or TVM
    is not installed. Every build is a fresh process."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "TVM_NUM_THREADS": str(threads),
           "MSC_NUM_THREADS": str(threads)}
    rows = {"msc cold": [], "msc warm": [], "tvm": []}
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as cache:
            cache_env = {**env, "MSC_CACHE_DIR": cache}
            rows["msc cold"].append(_run(MSC_BUILD, model, cache_env))
            rows["msc warm"].append(_run(MSC_BUILD, model, cache_env))
        if tvm_installed():
            rows["tvm"].append(_run(TVM_BUILD, model, env))
    return {k: min((v for v in vals if v is not None), default=None) for k, vals in rows.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="light_resnet50")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if not tvm_installed():
        print("(TVM not installed: no TVM column)")
    best = build_times(args.model, args.repeats)
    print(f"build time of {args.model} (best of {args.repeats}, fresh process each):")
    for name, value in best.items():
        print(f"  {name:9s} {value:7.2f} s" if value is not None else f"  {name:9s}     n/a")
    if best["tvm"] and best["msc cold"]:
        print(f"  msc cold / tvm = {best['msc cold'] / best['tvm']:.2f}x, "
              f"msc warm = {best['msc warm']:.2f} s (target < 0.5 s)")


if __name__ == "__main__":
    main()
