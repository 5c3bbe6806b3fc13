"""Who runs a model for ``msc run`` / ``bench`` / ``codegen --test``: msc and the references.

Every runner is ``fn(arrays: dict) -> list[np.ndarray]``, inputs keyed by the graph's input
aliases, outputs flat in the graph's output order:

- ``msc_runner``: the graph written by ``codegen.to_relax`` and compiled by ``relax.build``,
  run on the VM. The codegen path works for every model kind (an MSC JSON graph has no Relax
  module of its own), and it is the path users ship.
- ``reference_runner``: onnxruntime on the ONNX file, or the user's torch module in eval mode;
  None for graph JSON and TVMScript, which have no independent runtime.
"""

from __future__ import annotations

import contextlib
import functools
import os
import tempfile

import numpy as np

from ..errors import RuntimeCallError, SerializationError, ValidationError

__all__ = ["check_weights", "compare", "msc_runner", "onnxruntime_runner", "reference_name",
           "reference_runner"]

# The reference runtime of each model kind (``msc run --check``, ``msc bench``).
REFERENCES = {"onnx": "onnxruntime", "torch": "torch"}


def flatten(value) -> list[np.ndarray]:
    """Outputs as a flat list of arrays (VM tuples, torch tensors / tuples / dicts)."""
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [a for item in value for a in flatten(item)]
    if hasattr(value, "detach"):
        return [value.detach().cpu().numpy()]
    if hasattr(value, "numpy"):
        return [np.asarray(value.numpy())]
    return [np.asarray(value)]


def check_weights(model) -> None:
    """A graph that holds weights needs their data (a JSON graph takes them from a sibling)."""
    names = [(w.name, w.alias) for w in model.graph.get_weights()]
    missing = [n for n, alias in names if n not in model.weights and alias not in model.weights]
    if missing:
        stem = os.path.splitext(os.path.basename(model.path))[0]
        raise SerializationError(
            f"{len(missing)} of the graph's {len(names)} weights have no data "
            f"(first: {missing[0]!r})", file=model.path,
            hint=f"put {stem}.npz next to it (`msc export MODEL -o {stem}.json` writes both)")


def msc_runner(model, threads: int | None = None, build_folder: str | None = None):
    """Compile the model with msc's backend; ``(run, executable)``."""
    from msc.codegen import to_relax

    from .. import relax

    check_weights(model)
    config = {"need_test": False}
    with contextlib.ExitStack() as stack:
        folder = build_folder or stack.enter_context(tempfile.TemporaryDirectory())
        mod = to_relax(model.graph, model.weights, codegen_config=config, build_folder=folder)
    executable = relax.build(mod)
    fn = relax.VirtualMachine(executable, relax.cpu(), num_threads=threads)["main"]
    keys = [t.alias or t.name for t in model.graph.get_inputs()]
    return (lambda arrays: flatten(fn(*[arrays[k] for k in keys]))), executable


# QDQ models are checked against the model as written: onnxruntime's graph optimizations fuse
# DequantizeLinear -> op -> QuantizeLinear into its int8 kernels, which round differently
# (5-25 % of the output's max on random-weight ViTs and EfficientNets)
QDQ_OPS = {"QuantizeLinear", "DequantizeLinear"}
LITERAL = "onnxruntime, graph optimizations off (the quantized model as written)"


def is_qdq(path: str) -> bool:
    """True when the ONNX file at ``path`` has QuantizeLinear / DequantizeLinear nodes at
    its top level (weights are not loaded): a QDQ model, or a QOperator one (its QLinear ops
    are onnxruntime's own kernels either way). Read once per file version."""
    try:
        return _has_qdq(path, os.stat(path).st_mtime_ns)
    except OSError:
        return False


@functools.lru_cache(maxsize=8)
def _has_qdq(path: str, version: int) -> bool:
    import onnx

    try:
        proto = onnx.load(path, load_external_data=False)
    except Exception:  # noqa: BLE001 - the loader has already named a bad file
        return False
    return any(node.op_type in QDQ_OPS for node in proto.graph.node)


def reference_name(model) -> str | None:
    if model.kind == "onnx" and is_qdq(model.path):
        return LITERAL
    return REFERENCES.get(model.kind)


def reference_runner(model, threads: int | None = None):
    """The model's own runtime, or None when it has none (graph JSON, TVMScript)."""
    make = _REFERENCE_RUNNERS.get(model.kind)
    return _reporting(make(model, threads), reference_name(model), model.spec) if make else None


def _reporting(run, who: str, spec: str):
    """``run`` whose failures (the reference refusing the inputs) are RuntimeCallErrors."""
    def call(arrays: dict) -> list[np.ndarray]:
        try:
            return run(arrays)
        except Exception as err:  # the reference's own error types: re-raised as ours
            raise RuntimeCallError(f"{who} failed on these inputs: {type(err).__name__}: "
                                   f"{str(err)[:500]}", file=spec,
                                   hint="check --input / --input-info / --dim") from err
    return call


def ort_session(source, threads: int | None, file: str | None = None, **settings):
    """An onnxruntime CPU session on ``source`` (an .onnx path or a serialized model; ``file``
    names it in errors), ``threads`` intra-op threads, ``settings`` set on its SessionOptions
    (``enable_profiling=True``, ...)."""
    try:
        import onnxruntime as ort
    except ImportError:
        raise ValidationError("onnxruntime is not installed",
                              hint="pip install onnxruntime to compare with it") from None
    options = ort.SessionOptions()
    options.log_severity_level = 3  # light-zoo models carry unused initializers ORT warns on
    if threads:
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    for key, value in settings.items():
        setattr(options, key, value)
    try:
        return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
    except Exception as err:  # noqa: BLE001 - ORT's own types: the reference cannot load it
        raise RuntimeCallError(f"onnxruntime cannot load the model: {err}",
                               file=file or str(source)) from None


def onnxruntime_runner(source, threads: int | None, file: str | None = None,
                       literal: bool = False):
    """onnxruntime on ``source`` (an .onnx path or a serialized model; ``file`` names it in
    errors) as ``fn(arrays) -> outputs``, inputs in the graph's order; ``literal``: with its
    graph optimizations off (every node as written)."""
    settings = {}
    if literal:
        import onnxruntime as ort

        settings["graph_optimization_level"] = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort_session(source, threads, file, **settings)
    names = [i.name for i in session.get_inputs()]  # ONNX names, in the graph's input order
    return lambda arrays: session.run(None, dict(zip(names, arrays.values())))


def _torch(module, threads: int | None):
    import torch

    def run(arrays: dict) -> list[np.ndarray]:
        previous = torch.get_num_threads()
        if threads:
            torch.set_num_threads(threads)
        try:
            with torch.inference_mode():
                return flatten(module(*[torch.from_numpy(a) for a in arrays.values()]))
        finally:
            torch.set_num_threads(previous)

    return run


_REFERENCE_RUNNERS = {"onnx": lambda model, threads: onnxruntime_runner(
                          model.path, threads, literal=is_qdq(model.path)),
                      "torch": lambda model, threads: _torch(model.module, threads)}


def compare(got: list[np.ndarray], want: list[np.ndarray], names: list[str], atol: float,
            rtol: float) -> list[dict]:
    """One row per output: max abs error, max rel error, mismatches (``np.isclose``), ok."""
    if len(got) != len(want):
        return [{"output": "(count)", "ok": False,
                 "error": f"msc gives {len(got)} outputs, the reference {len(want)}"}]
    return [_compare_one(g, np.asarray(w), name, atol, rtol)
            for g, w, name in zip(got, want, names)]


def _compare_one(got: np.ndarray, want: np.ndarray, name: str, atol: float, rtol: float) -> dict:
    if got.shape != want.shape:
        return {"output": name, "ok": False,
                "error": f"shape {list(got.shape)} vs reference {list(want.shape)}"}
    g, w = got.astype(np.float64), want.astype(np.float64)
    diff = np.abs(g - w)
    scale = np.abs(w)
    rel = np.divide(diff, scale, out=np.zeros_like(diff), where=scale > 0)
    close = np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
    finite = diff[np.isfinite(diff)]
    # an infinity against a finite value (or NaN against a number) is an infinite error,
    # not one left out of the maximum
    worst = np.inf if np.any(~close & ~np.isfinite(diff)) else \
        float(finite.max()) if finite.size else 0.0
    return {"output": name, "ok": bool(close.all()),
            "max_abs": worst,
            "max_rel": float(rel[np.isfinite(rel)].max()) if rel.size else 0.0,
            "mismatched": int(close.size - close.sum()), "size": int(close.size)}
