"""What stays serial at 2 threads in msc's int8 CNNs (thread_serial.py's measure, in CPU time,
which other processes' load does not distort), on the QDQ model onnxruntime's
quantize_static makes (speed.py's int8 column; benchmarks/int8.py).

    .venv/bin/python benchmarks/thread_serial_int8.py [--models squeezenet resnet50 ...]
        [--cache DIR]     # keep the quantized models there (quantizing takes ~10-60 s each)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import speed, thread_serial
from benchmarks.common import (
    batches,
    cached_model,
    input_shape,
    msc_executable,
    ort_qdq,
    print_table,
)

MODELS = ["squeezenet", "inception_v2", "resnet50", "densenet121"]


def qdq_model(name: str, cache: str | None):
    """onnxruntime's QDQ model of speed.py's zoo model ``name``, kept in ``cache``."""
    def make():
        case = speed.zoo_case(name, False)
        model = case["float"]
        return ort_qdq(model, model.graph.input[0].name, case["draw"](speed.CALIBRATION, 1))
    return cached_model(Path(cache) / f"{name}.int8.onnx" if cache else None, make)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=MODELS, help=f"zoo models: {MODELS}")
    parser.add_argument("--cache", help="folder for the quantized models")
    parser.add_argument("--top", type=int, default=3, help="largest serial calls to list")
    args = parser.parse_args()
    rows = (thread_serial.cells(name, serial_share(name, args.cache), args.top)
            for name in args.models)
    print_table(thread_serial.COLUMNS, rows, flush=True)


def serial_share(name: str, cache: str | None) -> dict:
    """thread_serial.share_of on the QDQ model of ``name``, run by msc's int8 kernels."""
    qmodel = qdq_model(name, cache)
    x = batches(input_shape(qmodel), 1, 2, True)[0]
    from msc import relax

    fn = relax.VirtualMachine(msc_executable(qmodel), relax.cpu())["main"]
    return thread_serial.share_of(fn, x)


if __name__ == "__main__":
    main()
