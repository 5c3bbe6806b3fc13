"""int8 quantization of one corpus model (tests/helpers/corpus.py): msc and onnxruntime's
``quantize_static`` on the same ONNX export, the same calibration batches and the same
held-out batches.

Each corpus model is exported to ONNX (the corpus's own ``onnx`` path: TorchScript exporter,
the dynamo one when that refuses). Then:

- ``msc``: ``from_onnx`` -> ``compression.quantize`` (QDQ, per-channel int8 weights, uint8
  activations, the default placement) -> ``to_onnx``: the QDQ file, run by onnxruntime;
- ``msc@msc``: the same QDQ file read back by msc (``from_onnx`` -> ``to_relax`` ->
  ``relax.build``), so it runs on msc's int8 kernels (``int8_patterns``: the Q/DQ patterns
  the build folded into them); ``agree`` is its SQNR against onnxruntime's run of that file
  (int8 rounding differs by a step here and there: > 30 dB), ``agree_ref`` against
  onnxruntime with its optimizer off (``qdq_ref``: the QDQ graph as written, float ops between
  Q and DQ), the arbiter when onnxruntime's own int8 kernels drift from the QDQ semantics;
- ``ort:<method>``: ``quantize_static`` (QDQ, ``per_channel=True``, QUInt8 activations,
  QInt8 weights) with each calibration method, run by onnxruntime.

Every SQNR is against the float export run by onnxruntime, over all held-out batches.

    >>> row = quantize_model("repvgg", calib=8, held_out=4)      # doctest: +SKIP
    >>> row["msc"]["sqnr"], row["ort:MinMax"]["sqnr"], row["agree"]   # doctest: +SKIP
"""

from __future__ import annotations

import math
import tempfile
import warnings
from pathlib import Path

import numpy as np
import torch

from msc import relax
from msc.codegen import to_onnx, to_relax
from msc.compression.quantize import quantize
from msc.compression.quantize.testing import sqnr
from msc.frontends import translate
from tests.helpers.corpus import MODELS, VOCAB

ORT_METHODS = ("MinMax", "Percentile", "Entropy")
MSC_DEFAULTS = {"per_layer": False, "report_batches": 2}


def export(name: str, folder: Path):
    """``(onnx ModelProto, one corpus input)`` of corpus model ``name``."""
    import onnx

    model, _, inputs = MODELS[name]()
    path = folder / f"{name}.onnx"
    args = tuple(torch.from_numpy(x) for x in inputs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            torch.onnx.export(model, args, str(path), dynamo=False)
        except Exception:  # noqa: BLE001  (the TorchScript exporter is gone or refuses)
            torch.onnx.export(MODELS[name]()[0], args, str(path), dynamo=True,
                              external_data=False)
    return onnx.load(str(path)), inputs[0]


def draws(example: np.ndarray, count: int, seed: int) -> list[np.ndarray]:
    """``count`` inputs like ``example``: token ids in the vocabulary, else N(0, 1)."""
    rng = np.random.default_rng(seed)
    if example.dtype.kind == "i":
        return [rng.integers(0, VOCAB, example.shape).astype(example.dtype)
                for _ in range(count)]
    return [rng.standard_normal(example.shape).astype(example.dtype) for _ in range(count)]


def ort_run(model, data: list, optimize: bool = True) -> list[np.ndarray]:
    """``model`` on onnxruntime; ``optimize=False`` turns its graph optimizer off, so a QDQ
    model runs as written (float ops between Q/DQ: the QDQ semantics, no int8 kernels)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    if not optimize:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    return [sess.run(None, {name: x})[0] for x in data]


def msc_backend_run(model, data: list, stats: dict | None = None) -> list[np.ndarray]:
    """An ONNX model on msc's backend: ``from_onnx`` -> ``to_relax`` -> ``relax.build``;
    ``stats`` gets the build's ``ex.stats["fused"]`` (the Q/DQ patterns run by int8 kernels)."""
    graph, weights = translate.from_onnx(model)
    with tempfile.TemporaryDirectory(prefix="msc_qc_") as folder:
        mod = to_relax(graph, weights, build_folder=folder)
    ex = relax.build(mod, target="llvm")
    if stats is not None:
        stats.update(ex.stats["fused"])
    vm = relax.VirtualMachine(ex, relax.cpu())
    outs = []
    for x in data:
        got = vm["main"](x)
        got = got[0] if isinstance(got, (tuple, list)) else got
        outs.append(got.numpy())
    return outs


def msc_qdq(model, calib: list, config: dict | None = None):
    """``(QDQ ModelProto, report)``: msc's quantization of an ONNX model, written by to_onnx."""
    graph, weights = translate.from_onnx(model)
    qgraph, qweights, report = quantize(graph, weights, calib, {**MSC_DEFAULTS, **(config or {})})
    return to_onnx(qgraph, qweights), report


def ort_qdq(model, calib: list, method: str):
    """onnxruntime's ``quantize_static`` QDQ model (per channel, QUInt8 / QInt8)."""
    from tests.helpers.qdq_models import ort_quantize

    name = model.graph.input[0].name
    with tempfile.TemporaryDirectory(prefix="msc_qc_ort_") as folder:
        return ort_quantize(model, calib, Path(folder), name, method)


def _cell(fn, reference: list) -> dict:
    """``{"ran", "sqnr", "outputs", "message"}`` of ``fn()`` against ``reference``."""
    try:
        outputs = fn()
    except Exception as err:  # noqa: BLE001  (a failure is a cell of the table)
        line = (str(err).strip().splitlines() or [""])[0][:200]
        return {"ran": False, "sqnr": math.nan, "outputs": None,
                "message": f"{type(err).__name__}: {line}"}
    return {"ran": True, "sqnr": sqnr(reference, outputs), "outputs": outputs, "message": ""}


def _smooth_variant(model, calib: list, config: dict, info: dict):
    """msc with SmoothQuant's alpha search: the QDQ file; ``info`` gets the alpha."""
    qdq, report = msc_qdq(model, calib, {**config, "smooth": "search"})
    info["alpha"] = report.smoothing["alpha"]
    return qdq


def _excludes_variant(model, calib: list, config: dict, info: dict):
    """msc with the report's suggested excludes (the per-layer sensitivity search to
    ``target_sqnr``) kept float: the QDQ file; ``info`` gets the list."""
    _, report = msc_qdq(model, calib, {**config, "per_layer": True})
    info["excluded"] = report.suggested_excludes
    return msc_qdq(model, calib, {**config, "exclude": info["excluded"]})[0]


VARIANTS = {"smooth": _smooth_variant, "excludes": _excludes_variant}


def quantize_model(name: str, calib: int = 8, held_out: int = 4, methods=ORT_METHODS,
                   config: dict | None = None, folder: Path | None = None,
                   variants=()) -> dict:
    """``{"msc", "msc@msc", "ort:<method>"...: cell, "agree": dB}`` for corpus model ``name``
    (cells as ``_cell``; ``agree``: msc's backend against onnxruntime on msc's QDQ file).
    ``variants`` (names of ``VARIANTS``) add a cell ``msc+<variant>`` each (run by
    onnxruntime) and ``<variant>_info`` (the alpha chosen, the layers kept float)."""
    folder = Path(folder or tempfile.mkdtemp(prefix=f"msc_qc_{name}_"))
    model, example = export(name, folder)
    calib_data = draws(example, calib, seed=10)
    test_data = draws(example, held_out, seed=20)
    reference = ort_run(model, test_data)
    holder = {}

    def msc_file():
        holder["qdq"], holder["report"] = msc_qdq(model, calib_data, config)
        return ort_run(holder["qdq"], test_data)
    row = {"msc": _cell(msc_file, reference)}
    fused: dict = {}
    row["msc@msc"] = _cell(lambda: msc_backend_run(holder["qdq"], test_data, fused),
                           reference) if "qdq" in holder else {**row["msc"], "ran": False}
    row["qdq_ref"] = _cell(lambda: ort_run(holder["qdq"], test_data, optimize=False),
                           reference) if "qdq" in holder else {**row["msc"], "ran": False}
    for method in methods:
        row[f"ort:{method}"] = _cell(
            lambda m=method: ort_run(ort_qdq(model, calib_data, m), test_data), reference)
    for variant in variants:
        info: dict = {}
        row[f"msc+{variant}"] = _cell(lambda v=variant, i=info: ort_run(
            VARIANTS[v](model, calib_data, config or {}, i), test_data), reference)
        row[f"{variant}_info"] = info
    row["agree"] = _agree(row["msc"], row["msc@msc"])
    row["agree_ref"] = _agree(row["qdq_ref"], row["msc@msc"])
    row["int8_patterns"] = sum(n for key, n in fused.items() if key.startswith("qdq:"))
    row["report"] = holder.get("report")
    return row


def _agree(ref: dict, got: dict) -> float:
    return sqnr(ref["outputs"], got["outputs"]) if ref["ran"] and got["ran"] else math.nan
