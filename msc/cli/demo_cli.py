"""Demo step: the ``msc`` command on a small ONNX net, as a new user types it."""

from __future__ import annotations

import contextlib
import io
import os

from .demo import _banner, _tiny_cnn_onnx


def _msc(argv: list[str], want: int) -> str:
    """Run ``msc ARGV`` in-process; its output, or SystemExit when the exit status is wrong."""
    from .main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)
    print(f"$ msc {' '.join(argv)}    # exit {status}")
    if status != want:
        raise SystemExit(f"demo: msc {argv[0]} exited {status}, expected {want}: "
                         f"{err.getvalue()[-500:]}")
    return out.getvalue() + err.getvalue()


def step_cli(out: str) -> None:
    """inspect, run --check against onnxruntime, export, diff, and a bad input (exit 2)."""
    import onnx

    folder = os.path.join(out, "cli")
    os.makedirs(folder, exist_ok=True)
    model = os.path.join(folder, "tiny_cnn.onnx")
    onnx.save(_tiny_cnn_onnx(), model)
    _banner("The msc command: inspect, run --check, export, diff, exit statuses")
    print(_msc(["inspect", model], 0).split("\n", 1)[1].rstrip())
    print(_msc(["run", model, "--dim", "N=2", "--check", "-q"], 0).rstrip())
    graph = os.path.join(folder, "tiny_cnn.json")
    print(_msc(["export", model, "-o", graph, "--force"], 0).rstrip())
    print(_msc(["diff", model, graph], 0).splitlines()[-1])
    print(_msc(["run", model, "--input", "x:2,3,15,16"], 2).rstrip())
