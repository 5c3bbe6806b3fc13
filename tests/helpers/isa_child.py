"""Run a test's child script with the host's instruction set capped (``$MSC_CPU_ISA``), as a
CPU without those features would build it, and read the JSON report it prints last."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[2])  # the checkout, for the child's sys.path


def capped_report(code: str, isa: str, cache_dir, timeout: float = 600) -> dict:
    """Run ``code`` in a fresh interpreter under ``MSC_CPU_ISA=isa`` with its own kernel cache
    (a capped build must never reuse the host's kernels); the child must exit 0 and print one
    JSON object on its last line."""
    env = dict(os.environ, MSC_CPU_ISA=isa, MSC_CACHE_DIR=str(cache_dir))
    out = subprocess.run([sys.executable, "-c", code], check=False, env=env,
                         capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])
