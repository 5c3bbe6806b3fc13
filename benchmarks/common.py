"""What the benchmark scripts share: timing, the onnx light zoo, and the report table.

Timing. On this machine other processes share the cores, so every figure is a best (or a
median) of several measurements, and contenders are timed *interleaved*: one measurement of
each per round, so that load from elsewhere hits them alike.

    per_call(fn, min_time)          mean seconds per call over a chunk of >= min_time
    call_times(fn, min_time)        each call's seconds, calls until min_time has passed
    single_calls(fn, repeat)        each of ``repeat`` calls' seconds
    best_of(fn, repeat)             (last result, fastest of ``repeat`` single calls)
    interleaved(fns, repeats, m)    {who: [m(fn) of every round]}, contenders in turn
    best_interleaved(...)           {who: the smallest of those}
    best_call_seconds(fns, r, t)    {who: fastest single call}, interleaved chunks of >= t

``clock`` is ``time.perf_counter`` (wall) unless a script asks for CPU time
(``time.thread_time``: the calling thread only; ``time.process_time``: every thread).

The zoo: the onnx package's light models (``light_model("resnet50")``), their data input,
a copy with random weights and logits as the output (``with_random_weights(as_logits(m))``),
random input ``batches``. Running a model: ``ort_session`` (onnxruntime), ``msc_session``
(msc's Relax route) or ``msc_runner(msc_executable(m))`` (through the MSCGraph), on
``threads()`` or a given count; ``ort_qdq`` is onnxruntime's QDQ int8 model of a float one.

The report: ``print_table(columns, rows)`` writes a Markdown table; ``geomean``, ``ms``,
``ratio`` and ``sqnr`` compute and format what goes in it.
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from msc.compression.quantize.testing import sqnr  # noqa: F401  (the report's SQNR)

Clock = Callable[[], float]

# ---------------------------------------------------------------------------------------------
# Timing


def per_call(fn, min_time: float, clock: Clock = time.perf_counter) -> float:
    """Seconds per call on ``clock``, averaged over at least ``min_time`` of its seconds (and
    one call)."""
    calls, start = 0, clock()
    while (elapsed := clock() - start) < min_time or not calls:
        fn()
        calls += 1
    return elapsed / calls


def call_times(fn, min_time: float, clock: Clock = time.perf_counter) -> list[float]:
    """The seconds of each single call, calling until ``min_time`` has passed (at least once).
    Their minimum is the time the code takes when no other process took the core in between;
    their median is robust to one preempted call."""
    seconds, start = [], clock()
    while True:
        before = clock()
        fn()
        after = clock()
        seconds.append(after - before)
        if after - start >= min_time:
            return seconds


def single_calls(fn, repeat: int, clock: Clock = time.perf_counter) -> list[float]:
    """The seconds of each of ``repeat`` calls (no warm-up: call ``fn`` first if it needs one)."""
    return [_one_call(fn, clock)[1] for _ in range(repeat)]


def best_of(fn, repeat: int, clock: Clock = time.perf_counter) -> tuple[object, float]:
    """(the last call's result, the fastest of ``repeat`` calls in seconds)."""
    best, result = math.inf, None
    for _ in range(repeat):
        result, seconds = _one_call(fn, clock)
        best = min(best, seconds)
    return result, best


def _one_call(fn, clock: Clock) -> tuple[object, float]:
    start = clock()
    result = fn()
    return result, clock() - start


def interleaved(fns: dict, repeats: int, measure: Callable, warm: bool = True,
                pause: float = 0.0) -> dict[str, list]:
    """``{who: [measure(fn) of each round]}``: ``repeats`` rounds, each measuring every
    contender once in turn. ``warm`` calls each once first (lazy initialisation, caches, first
    touch of buffers); ``pause`` idles before each measurement (other runtimes' worker threads
    keep spinning for a while after a call returns)."""
    if warm:
        for fn in fns.values():
            fn()
    seen: dict = {who: [] for who in fns}
    for _ in range(repeats):
        for who, fn in fns.items():
            if pause:
                time.sleep(pause)
            seen[who].append(measure(fn))
    return seen


def best_interleaved(fns: dict, repeats: int, measure: Callable, warm: bool = True) -> dict:
    """The smallest of each contender's ``interleaved`` measurements."""
    return {who: min(seen) for who, seen in interleaved(fns, repeats, measure, warm).items()}


def best_call_seconds(fns: dict, repeats: int, min_time: float,
                      clock: Clock = time.perf_counter) -> dict[str, float]:
    """The fastest single call of each contender. Rounds interleave the contenders (a chunk of
    calls of at least ``min_time`` s each), so load from other processes hits all alike; a
    single call's minimum, unlike a chunk's mean, is the time the code takes when no other
    process took the core in between (for calls of 0.1-1 s, as whole models)."""
    return best_interleaved(fns, repeats, lambda fn: min(call_times(fn, min_time, clock)))


# ---------------------------------------------------------------------------------------------
# The onnx light zoo

# The zoo benchmarks/backend.py --zoo, zoo_cpu.py and thread_serial.py time by default.
ZOO = ["resnet50", "densenet121", "inception_v1", "squeezenet", "shufflenet", "bvlc_alexnet",
       "vgg19"]
# (consumer op, input index) of weights that must stay positive: batch-norm scale and variance.
POSITIVE = {("BatchNormalization", 1), ("BatchNormalization", 4)}


def light_folder() -> Path:
    import onnx

    return Path(onnx.__file__).parent / "backend/test/data/light"


def light_names() -> list[str]:
    """Every light model the installed onnx package ships, sorted (``resnet50``, ...)."""
    return sorted(p.stem.removeprefix("light_") for p in light_folder().glob("*.onnx"))


def light_model(name: str):
    """The shipped light model ``name`` (most of its weights are ``ConstantOfShape(0.02)``)."""
    import onnx

    return onnx.load(light_folder() / f"light_{name}.onnx")


def data_input(model):
    """The one graph input that is neither an initializer nor computed by a node."""
    known = {i.name for i in model.graph.initializer}
    known |= {out for node in model.graph.node for out in node.output}
    return next(v for v in model.graph.input if v.name not in known)


def input_shape(model) -> list[int]:
    """The static shape of ``model``'s data input."""
    return [d.dim_value for d in data_input(model).type.tensor_type.shape.dim]


def batches(shape, count: int, seed: int, image: bool) -> list[np.ndarray]:
    """``count`` random inputs of ``shape``: uniform in [0, 1) for images, else normal."""
    rng = np.random.default_rng(seed)
    draw = (lambda: rng.random(shape, dtype=np.float32)) if image else \
        (lambda: rng.standard_normal(shape).astype(np.float32))
    return [draw() for _ in range(count)]


def _random_weight(shape, role, rng) -> np.ndarray:
    if role in POSITIVE:
        return rng.uniform(0.5, 1.5, shape).astype(np.float32)
    if len(shape) >= 2:  # He scaling keeps activations finite through 100+ layers
        return (rng.standard_normal(shape) * np.sqrt(2 / np.prod(shape[1:]))).astype(np.float32)
    return (rng.standard_normal(shape) * 0.1).astype(np.float32)


def as_logits(model):
    """A copy of ``model`` whose output is the input of its final Softmax, if it ends in one."""
    from onnx import ModelProto, TensorProto, helper

    copy = ModelProto()
    copy.CopyFrom(model)
    graph = copy.graph
    last = next(n for n in graph.node if graph.output[0].name in n.output)
    if last.op_type == "Softmax":
        graph.node.remove(last)
        graph.output.pop()
        graph.output.append(helper.make_tensor_value_info(last.input[0], TensorProto.FLOAT, None))
    return copy


def with_random_weights(model, seed: int = 0):
    """A copy of ``model`` with random float weights and IR version 8 (where initializers that
    are not graph inputs are constants, as IR 3 treats all of them)."""
    from onnx import helper, numpy_helper

    graph, rng = model.graph, np.random.default_rng(seed)
    arrays = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    weights = {n.output[0]: tuple(arrays[n.input[0]]) for n in graph.node
               if n.op_type == "ConstantOfShape" and n.input[0] in arrays}
    weights |= {name: a.shape for name, a in arrays.items() if a.dtype == np.float32}
    nodes = [n for n in graph.node if n.output[0] not in weights]
    roles = {name: (n.op_type, i) for n in nodes for i, name in enumerate(n.input)}
    inits = [numpy_helper.from_array(_random_weight(weights[name], roles[name], rng), name)
             if name in weights else numpy_helper.from_array(arrays[name], name)
             for name in sorted(set(roles) & (set(weights) | set(arrays)))]
    new = helper.make_graph(nodes, graph.name, [data_input(model)], graph.output,
                            initializer=inits)
    return helper.make_model(new, opset_imports=model.opset_import, ir_version=8)


# ---------------------------------------------------------------------------------------------
# Running a model: onnxruntime and msc (two routes), float and onnxruntime's QDQ int8


def threads() -> int:
    """The thread count every contender gets now (MSC_NUM_THREADS, which a script sets from its
    --threads; 1 when unset)."""
    return int(os.environ.get("MSC_NUM_THREADS", "1"))


def ort_session(model, count: int | None = None):
    """``run(x)`` -> the first output of ``model`` in onnxruntime on ``count`` threads (else
    ``threads()``)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = count or threads(), 1
    options.log_severity_level = 3  # the light models carry an unused initializer ORT warns on
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    return lambda x: session.run(None, {name: x})[0]


def msc_session(model):
    """(run, executable, build seconds) for an ONNX model through msc's Relax route
    (``from_onnx(as_msc=False)``, build)."""
    from msc import relax
    from msc.frontends.onnx.api import from_onnx

    mod, _ = from_onnx(model, as_msc=False)
    start = time.perf_counter()
    ex = relax.build(mod)
    build_s = time.perf_counter() - start
    f = relax.VirtualMachine(ex, relax.cpu())["main"]
    return (lambda x: f(x).numpy()), ex, build_s


def ort_qdq(model, name: str, calib: list):
    """onnxruntime's QDQ model of ``model`` (per-channel int8 weights, uint8 activations)."""
    from tests.helpers.qdq_models import ort_quantize

    with tempfile.TemporaryDirectory() as folder:
        return ort_quantize(model, calib, Path(folder), name)


def cached_model(path: Path | None, make):
    """The ONNX model ``make()`` returns, kept at ``path`` (when given): read from there if it
    exists, else made and written (quantizing a zoo model takes ~10-60 s)."""
    import onnx

    if path is not None and path.exists():
        return onnx.load(path)
    model = make()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        onnx.save(model, path)
    return model


def msc_executable(model, fold: bool = True):
    """msc's executable of an ONNX model through the MSCGraph (from_onnx, to_relax, build).
    ``fold=False``: the build as it was before the QDQ pass (QDQ graphs computed in float:
    fake quantization), for the before/after column."""
    from unittest import mock

    from msc import relax
    from msc.backend import build as build_module
    from msc.codegen import to_relax
    from msc.frontends.translate import from_onnx

    graph, weights = from_onnx(model)
    with tempfile.TemporaryDirectory() as folder:
        mod = to_relax(graph, weights, build_folder=folder)
    if fold:
        return relax.build(mod, target="llvm")
    with mock.patch.object(build_module, "fold_qdq", lambda program: {}):
        return relax.build(mod, target="llvm")


def msc_runner(ex, count: int | None):
    """``run(x)`` -> the first output of ``ex`` as numpy, on ``count`` threads (None: msc's
    default)."""
    from msc import relax

    vm = relax.VirtualMachine(ex, relax.cpu(), num_threads=count)
    fn = vm["main"]

    def run(x):
        got = fn(x)
        return (got[0] if isinstance(got, (tuple, list)) else got).numpy()
    return run


# ---------------------------------------------------------------------------------------------
# The report


def geomean(values, empty: float | None = None) -> float | None:
    """The geometric mean of the values that are positive numbers (None, 0 and inf, a missing
    or failed measurement, are left out); ``empty`` when there are none."""
    values = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else empty


def ms(seconds: float | None, missing: str = "-", digits: int = 2) -> str:
    """Seconds as milliseconds with ``digits`` decimals; ``missing`` for None."""
    return missing if seconds is None else f"{seconds * 1e3:.{digits}f}"


def ratio(a: float | None, b: float | None, missing: str = "-") -> str:
    """``a / b`` as ``1.23x``; ``missing`` when either is None."""
    return f"{a / b:.2f}x" if a is not None and b is not None else missing


def table_row(cells) -> str:
    """One line of a Markdown table."""
    return "| " + " | ".join(str(c) for c in cells) + " |"


def print_table(columns: list[str], rows, flush: bool = False) -> None:
    """A Markdown table: the header, the rule, one line per row of cells, each printed as it
    comes (``rows`` may be a generator that measures as it goes)."""
    print(table_row(columns))
    print("|" + "---|" * len(columns), flush=flush)
    for row in rows:
        print(table_row(row), flush=flush)
