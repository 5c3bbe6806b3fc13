"""Demo step: the ``msc`` command on a small ONNX net, as a new user types it."""

from __future__ import annotations

import os

from .shared import banner, run_msc, tiny_cnn_onnx


def _msc(argv: list[str], want: int) -> str:
    """Run ``msc ARGV``; its output, or SystemExit when the exit status is wrong."""
    proc = run_msc(argv)
    print(f"$ msc {' '.join(argv)}    # exit {proc.returncode}")
    if proc.returncode != want:
        raise SystemExit(f"demo: msc {argv[0]} exited {proc.returncode}, expected {want}: "
                         f"{proc.stderr[-500:]}")
    return proc.stdout + proc.stderr


def step_cli(out: str) -> None:
    """inspect, run --check against onnxruntime, export, diff, and a bad input (exit 2)."""
    import onnx

    folder = os.path.join(out, "cli")
    os.makedirs(folder, exist_ok=True)
    model = os.path.join(folder, "tiny_cnn.onnx")
    onnx.save(tiny_cnn_onnx(), model)
    banner("The msc command: inspect, run --check, export, diff, exit statuses")
    print(_msc(["inspect", model], 0).split("\n", 1)[1].rstrip())
    print(_msc(["run", model, "--dim", "N=2", "--check", "-q"], 0).rstrip())
    graph = os.path.join(folder, "tiny_cnn.json")
    print(_msc(["export", model, "-o", graph, "--force"], 0).rstrip())
    print(_msc(["diff", model, graph], 0).splitlines()[-1])
    print(_msc(["run", model, "--input", "x:2,3,15,16"], 2).rstrip())
