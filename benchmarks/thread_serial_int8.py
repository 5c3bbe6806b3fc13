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

import onnx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import int8, speed, thread_serial

MODELS = ["squeezenet", "inception_v2", "resnet50", "densenet121"]


def qdq_model(name: str, cache: str | None):
    path = Path(cache) / f"{name}.int8.onnx" if cache else None
    if path is not None and path.exists():
        return onnx.load(path)
    case = speed.zoo_case(name, False)
    model = case["float"]
    qmodel = int8.ort_qdq(model, model.graph.input[0].name,
                          case["draw"](speed.CALIBRATION, 1))
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        onnx.save(qmodel, path)
    return qmodel


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=MODELS, help=f"zoo models: {MODELS}")
    parser.add_argument("--cache", help="folder for the quantized models")
    parser.add_argument("--top", type=int, default=3, help="largest serial calls to list")
    args = parser.parse_args()
    import msc.backend.qdq_fold  # the int8 kernel classes, for _instrument
    import msc.backend.qdq_lut  # noqa: F401

    thread_serial._instrument()
    print(thread_serial.HEADER)
    for name in args.models:
        qmodel = qdq_model(name, args.cache)
        shape = [d.dim_value for d in qmodel.graph.input[0].type.tensor_type.shape.dim]
        x = speed.batches(shape, 1, 2, True)[0]
        r = thread_serial.share_of(int8.msc_runner(int8.msc_executable(qmodel), None), x)
        print(thread_serial.table_row(name, r, args.top), flush=True)


if __name__ == "__main__":
    main()
