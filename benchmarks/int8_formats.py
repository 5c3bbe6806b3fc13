"""msc's int8 output against onnxruntime's on the real corpus, in the formats onnxruntime's
``quantize_static`` writes: QDQ with uint8 or int8 activations, per-channel or per-tensor
weights, and the QOperator format (QLinearConv / QLinearMatMul and onnxruntime's
com.microsoft QLinear* ops).

    .venv/bin/python benchmarks/int8_formats.py                       # every model, every format
    .venv/bin/python benchmarks/int8_formats.py --models resnet,bert --formats qdq-u8s8,qop

Each model of tests/helpers/corpus.py (the vision and text families of
benchmarks/corpus_speed.py) is exported to ONNX at batch 1, quantized by onnxruntime
(calibrated on the input), and run by msc (the user's path) and by onnxruntime *as written*:
graph optimizations off, so a QDQ file is every DequantizeLinear -> op -> QuantizeLinear
computed as the file says (onnxruntime's optimized session fuses them into kernels that round
their own way), and a QOperator file is onnxruntime's own QLinear kernels. Each cell is
``max|msc - ORT| / max|ORT|``: 0 is equal to the bit. A failure says who failed (onnxruntime's
quantizer, onnxruntime, or msc). No timing.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]
sys.path.insert(0, str(ROOT))

from benchmarks.common import msc_executable
from benchmarks.corpus_speed import FAMILY_OF, batched, export, msc_call, ort_runner
from tests.helpers.corpus import MODELS

# name -> (activation type, weight type, per channel, QOperator format)
FORMATS = {
    "qdq-u8s8": ("QUInt8", "QInt8", True, False),
    "qdq-s8s8": ("QInt8", "QInt8", True, False),
    "qdq-u8s8-tensor": ("QUInt8", "QInt8", False, False),
    "qdq-u8u8": ("QUInt8", "QUInt8", True, False),
    "qop": ("QUInt8", "QInt8", True, True),
}


def quantized(model, inputs: list, folder: Path, fmt: str):
    """onnxruntime's ``quantize_static`` of ``model`` in format ``fmt``, calibrated on
    ``inputs``."""
    from tests.helpers.qdq_models import ort_quantize

    activation, weight, per_channel, qop = FORMATS[fmt]
    out = folder / fmt
    out.mkdir(exist_ok=True)
    return ort_quantize(model, inputs[:1], out, model.graph.input[0].name,
                        activation=activation, weight=weight, per_channel=per_channel,
                        qoperator=qop)


def cell(model, inputs: list, folder: Path, fmt: str) -> str:
    """``max|msc - ORT| / max|ORT|`` as text, or who failed."""
    try:
        qmodel = quantized(model, inputs, folder, fmt)
    except Exception as err:  # noqa: BLE001  (every failure is a cell)
        return f"quantizer fails ({type(err).__name__})"
    try:
        want = ort_runner(qmodel, inputs, 1, literal=True)()
    except Exception as err:  # noqa: BLE001
        return f"onnxruntime fails ({type(err).__name__})"
    try:
        got = msc_call(msc_executable(qmodel), inputs, 1)()
    except Exception as err:  # noqa: BLE001
        return f"msc fails ({type(err).__name__}: {str(err)[:60]})"
    got = got[0] if isinstance(got, (list, tuple)) else got
    got = np.asarray(got.numpy() if hasattr(got, "numpy") else got, np.float64)
    scale = max(float(np.abs(want).max()), 1e-30)
    return f"{float(np.abs(got - want).max()) / scale:.4f}"


def table(rows: dict, formats: list) -> list[str]:
    """Markdown rows, then how many cells are equal to the bit per format."""
    lines = ["| model | " + " | ".join(formats) + " |", "|---|" + "---|" * len(formats)]
    lines += [f"| {name} | " + " | ".join(cells[f] for f in formats) + " |"
              for name, cells in rows.items()]
    lines.append("")
    for f in formats:
        values = [cells[f] for cells in rows.values()]
        measured = [v for v in values if not v.endswith(")")]
        equal = sum(float(v) == 0 for v in measured)
        lines.append(f"{f}: equal to the bit on {equal} of {len(measured)} models run by both "
                     f"({len(values) - len(measured)} failed, named above)")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", help="comma-separated names (default: all)")
    parser.add_argument("--formats", default=",".join(FORMATS),
                        help=f"comma-separated: {', '.join(FORMATS)}")
    args = parser.parse_args(argv)
    names = [n for n in MODELS if n in FAMILY_OF]
    if args.models:
        names = [n for n in names if n in args.models.split(",")]
    formats = args.formats.split(",")
    bad = [f for f in formats if f not in FORMATS]
    if bad:
        raise SystemExit(f"unknown format {bad[0]!r}: one of {', '.join(FORMATS)}")
    warnings.simplefilter("ignore")
    logging.getLogger().setLevel(logging.ERROR)
    rows = {}
    with tempfile.TemporaryDirectory(prefix="msc_int8_formats_") as tmp:
        for name in names:
            module, _, inputs = MODELS[name]()
            inputs = batched(inputs, 1)
            folder = Path(tmp) / name
            folder.mkdir()
            model = export(module, inputs, folder / "export.onnx")
            rows[name] = {f: cell(model, inputs, folder, f) for f in formats}
            print(f"{name}: " + ", ".join(f"{f} {v}" for f, v in rows[name].items()),
                  file=sys.stderr, flush=True)
    print("\n".join(table(rows, formats)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
