"""The ONNX node conformance suite (``onnx.backend.test.case.node``) run through msc's path.

Each case's model goes ``from_onnx(as_msc=False) -> relax.build -> VirtualMachine``. Outputs
are compared as onnx's own backend test runner does (``onnx.backend.test.runner``): same count,
shape and dtype, then ``np.testing.assert_allclose(out, ref, rtol=case.rtol, atol=case.atol)``
- by default rtol 1e-3, atol 1e-7 (the values ``collect_testcases`` gives almost every case).

    cases = load_cases()
    results = run_suite(cases, runners=("msc", "onnxruntime"), workers=2, timeout=20)
    report = summarize(results)          # per-op pass/fail, JSON-ready

Cases run in forked worker processes; a case over its time limit kills its worker (a fresh
one takes over) and counts as a timeout.
"""

from __future__ import annotations

import multiprocessing
import re
import time
import traceback
import warnings
from collections import Counter, defaultdict, deque
from multiprocessing.connection import wait

import numpy as np

ORT_MAX_IR_VERSION = 13  # onnxruntime 1.31 rejects the IR version 14 onnx 1.23 writes
ORT_MAX_OPSET = 26  # and default-domain opsets above 26


# --------------------------------------------------------------------------------------------
# Cases.

def load_cases() -> list:
    """The node test cases with their (first) data set, in a stable order."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases()
    return sorted((c for c in cases if c.kind == "node" and c.data_sets), key=lambda c: c.name)


def case_ops(case) -> list[str]:
    """Op types in a case's graph (the op under test, or an expanded function body)."""
    return sorted({(n.domain + ":" if n.domain else "") + n.op_type
                   for n in case.model.graph.node})


# Cases CI's subset always holds besides one case per op: parameters given as graph inputs
# (axes, k, pads, shapes, repeats, sizes / scales, depth, range bounds, split sizes) and
# control flow, so a regression in values known only at run time shows in CI.
RUNTIME_VALUE_CASES = (
    "test_reduce_sum_keepdims_random", "test_reduce_log_sum_exp_do_not_keepdims_random",
    "test_reduce_l2_negative_axes_keep_dims_random", "test_unsqueeze_unsorted_axes",
    "test_squeeze_negative_axes", "test_slice", "test_top_k_negative_axis", "test_edge_pad",
    "test_reflect_pad", "test_wrap_pad", "test_constant_pad_axes",
    "test_reshape_allowzero_reordered", "test_expand_dim_changed",
    "test_constantofshape_int_zeros", "test_tile", "test_resize_upsample_sizes_nearest",
    "test_resize_downsample_scales_linear", "test_onehot_with_axis",
    "test_range_float_type_positive_delta", "test_split_variable_parts_1d_opset18",
    "test_tril_neg", "test_center_crop_pad_crop", "test_if", "test_loop11", "test_scan_sum",
    "test_scan9_sum",
)


def ci_subset(cases: list) -> list:
    """CI's fixed subset: the first case (by name) of every op no earlier case covers, plus
    RUNTIME_VALUE_CASES (the whole suite is benchmarks/onnx_conformance.py)."""
    covered: set = set()
    picked = []
    for case in cases:
        ops = set(case_ops(case))
        if ops - covered or case.name in RUNTIME_VALUE_CASES:
            picked.append(case)
            covered |= ops
    return picked


# --------------------------------------------------------------------------------------------
# Evaluators.

def run_msc(model, inputs: list) -> list:
    """msc's internal path on one model: from_onnx(as_msc=False) -> relax.build -> VM."""
    from msc.frontends.onnx.api import from_onnx

    mod, _ = from_onnx(model, input_info=_container_info(model, inputs), as_msc=False)
    out = _run_vm(mod, inputs)
    outs = list(out) if len(model.graph.output) > 1 else [out]
    return [_msc_value(o) for o in outs]


def run_msc_user(model, inputs: list) -> list:
    """The path ``msc run`` ships: from_onnx -> MSCGraph -> to_relax (the generated script,
    executed) -> relax.build -> VM, outputs regrouped by the graph's output kinds."""
    import tempfile

    from msc.codegen import to_relax
    from msc.frontends.onnx.api import from_onnx

    graph, weights = from_onnx(model, input_info=_container_info(model, inputs))
    with tempfile.TemporaryDirectory(prefix="msc_conformance_") as folder:
        mod = to_relax(graph, weights, build_folder=folder)
    out = _run_vm(mod, inputs)
    flat = [_msc_value(o) for o in (out if isinstance(out, (tuple, list)) else [out])]
    return _regroup(graph, flat)


def _container_info(model, inputs: list) -> dict | None:
    """input_info for the sequence / optional inputs: a sequence is specialized to the element
    shapes given, a None optional is absent."""
    inits = {t.name for t in model.graph.initializer}
    names = [v.name for v in model.graph.input if v.name not in inits]
    info = {n: (None if v is None else [list(np.shape(x)) for x in v])
            for n, v in zip(names, inputs) if not _is_tensor(v)}
    return info or None


def _run_vm(mod, inputs: list):
    from msc import relax

    vm = relax.VirtualMachine(relax.build(mod, target="llvm"), relax.cpu())
    return vm["main"](*[tuple(np.asarray(x) for x in v) if isinstance(v, list) else v
                        for v in inputs if v is not None])


def _regroup(graph, flat: list) -> list:
    """Flat VM outputs -> one value per model output (a list for a sequence output)."""
    values, start = [], 0
    for kind, tensors in graph.output_groups():
        part = flat[start:start + len(tensors)]
        start += len(tensors)
        if kind.kind == "tensor":
            values.append(part[0])
        elif kind.kind == "optional":
            values.append(part[0] if part else None)
        else:
            values.append(list(part))
    return values


def _msc_value(value):
    """A VM result as numpy, tuples (sequences) as lists."""
    if isinstance(value, (tuple, list)):
        return [_msc_value(v) for v in value]
    return np.asarray(value.numpy() if hasattr(value, "numpy") else value)


def run_onnxruntime(model, inputs: list) -> list:
    import onnxruntime as ort

    model_copy = type(model)()
    model_copy.CopyFrom(model)
    model_copy.ir_version = min(model_copy.ir_version, ORT_MAX_IR_VERSION)
    _cap_opset(model_copy, ORT_MAX_OPSET)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 4
    sess = ort.InferenceSession(model_copy.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    if not any(_exotic(v) for v in inputs) and not any(
            t.type in _EXOTIC_ORT_TYPES for t in sess.get_outputs()):
        return sess.run(None, dict(zip(names, inputs)))
    # bfloat16 / float8 / 4- and 2-bit values: onnxruntime's numpy API takes none of them, its
    # kernels do; feed and read them as OrtValues holding onnxruntime's own packed bytes.
    feeds = {n: _to_ort_value(v) for n, v in zip(names, inputs)}
    outs = sess.run_with_ort_values([o.name for o in sess.get_outputs()], feeds)
    return [_from_ort_value(v) for v in outs]


# ml_dtypes types onnxruntime's numpy bridge cannot take or give (its kernels run them)
_EXOTIC = ("bfloat16", "float8", "float4", "int4", "uint4", "int2", "uint2")
_EXOTIC_ORT_TYPES = ("tensor(bfloat16)",) + tuple(
    f"tensor({t})" for t in ("float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz",
                             "float8e8m0", "float4e2m1", "int4", "uint4", "int2", "uint2"))


def _exotic(value) -> bool:
    return isinstance(value, np.ndarray) and value.dtype.name.startswith(_EXOTIC)


def _bits(onnx_type: int) -> int:
    from onnx import TensorProto as T

    return {T.INT4: 4, T.UINT4: 4, T.FLOAT4E2M1: 4, getattr(T, "INT2", -1): 2,
            getattr(T, "UINT2", -1): 2}.get(onnx_type, 0)


def _to_ort_value(value):
    import ctypes

    import onnxruntime as ort
    from onnx import helper

    if not _exotic(value):
        return ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(value))
    onnx_type = helper.np_dtype_to_tensor_dtype(value.dtype)
    raw = np.ascontiguousarray(value).view(np.uint8).reshape(-1)
    bits = _bits(onnx_type)
    if bits:  # one value per byte in numpy, packed low bits first in onnxruntime
        per = 8 // bits
        raw = np.concatenate([raw, np.zeros((-len(raw)) % per, np.uint8)]).reshape(-1, per)
        raw = sum((raw[:, k] & ((1 << bits) - 1)) << (bits * k) for k in range(per))
        raw = raw.astype(np.uint8)
    out = ort.OrtValue.ortvalue_from_shape_and_type(list(value.shape), onnx_type)
    ctypes.memmove(out.data_ptr(), raw.ctypes.data, min(raw.nbytes, out.tensor_size_in_bytes()))
    return out


def _from_ort_value(value):
    import ctypes

    from onnx import helper

    onnx_type, shape = value.element_type(), value.shape()
    dtype = helper.tensor_dtype_to_np_dtype(onnx_type)
    if not dtype.name.startswith(_EXOTIC):
        return value.numpy()
    size = value.tensor_size_in_bytes()
    raw = np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(value.data_ptr())).copy()
    bits, count = _bits(onnx_type), int(np.prod(shape, dtype=np.int64))
    if bits:
        per = 8 // bits
        parts = [(raw >> (bits * k)) & ((1 << bits) - 1) for k in range(per)]
        raw = np.stack(parts, axis=1).reshape(-1)[:count].astype(np.uint8)
        if dtype.name.startswith(("int4", "int2")):  # sign-extend into the byte
            sign = 1 << (bits - 1)
            raw = ((raw ^ sign) - sign).astype(np.int8).view(np.uint8)
    return raw.view(dtype).reshape(shape)


def _cap_opset(model, cap: int) -> None:
    """Lower the default-domain opset to ``cap`` when no node's op changed after ``cap``
    (the model then means the same at both opsets)."""
    from onnx import defs

    imports = [i for i in model.opset_import if i.domain in ("", "ai.onnx")]
    if not imports or imports[0].version <= cap:
        return
    version = imports[0].version
    for node in model.graph.node:
        if node.domain in ("", "ai.onnx"):
            try:
                if defs.get_schema(node.op_type, version, "").since_version > cap:
                    return
            except defs.SchemaError:
                return
    imports[0].version = cap


def _arrays(values) -> list:
    """Data-set values as numpy (exotic dtypes such as bfloat16 come as TensorProto)."""
    from onnx import TensorProto, numpy_helper

    return [numpy_helper.to_array(v) if isinstance(v, TensorProto) else v for v in values]


def _is_tensor(value) -> bool:
    return isinstance(value, (np.ndarray, np.generic))


def _container(value) -> bool:
    """A tensor, an absent optional or a sequence of tensors (what msc carries)."""
    return value is None or _is_tensor(value) or (
        isinstance(value, list) and all(_is_tensor(v) for v in value))


RUNNERS = {"msc": run_msc, "msc_user": run_msc_user, "onnxruntime": run_onnxruntime}


# --------------------------------------------------------------------------------------------
# One case.

def compare(expected: list, got: list, rtol: float, atol: float) -> None:
    """onnx's backend runner comparison (assert_similar_outputs); raises AssertionError."""
    np.testing.assert_equal(len(got), len(expected))
    for ref, out in zip(expected, got):
        if isinstance(ref, (list, tuple)) or ref is None or isinstance(out, list):
            if ref is None or out is None:
                assert ref is None and out is None, "optional value mismatch"
                continue
            compare(list(ref), list(out), rtol, atol)
            continue
        out, ref = np.asarray(out), np.asarray(ref)
        np.testing.assert_array_equal(out.shape, ref.shape, err_msg="incorrect shape")
        if ref.dtype == object:
            np.testing.assert_array_equal(out, ref)
            continue
        np.testing.assert_equal(out.dtype, ref.dtype)
        if out.dtype.name == "bfloat16":
            out, ref, rtol = out.astype(np.float32), ref.astype(np.float32), max(rtol, 2 ** -6)
        np.testing.assert_allclose(out, ref, rtol=rtol, atol=atol)


def run_case(case, runner: str) -> dict:
    """{"status": pass | fail | error | unsupported, "message": ...} for one runner."""
    from msc.errors import UnsupportedOpError

    inputs, expected = (_arrays(v) for v in case.data_sets[0])
    if runner.startswith("msc") and not all(_container(v) for v in list(inputs) + list(expected)):
        return {"status": "unsupported", "message": "map or nested sequence values"}
    inputs = [np.asarray(v) if _is_tensor(v) else v for v in inputs]
    start = time.perf_counter()
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            got = RUNNERS[runner](case.model, inputs)
        expected, got = _spec_defined(case.model, inputs, list(expected), got)
        compare(expected, got, case.rtol, case.atol)
        status, message = "pass", ""
    except UnsupportedOpError as err:
        status, message = "unsupported", str(err).splitlines()[-1].strip()
    except AssertionError as err:
        status, message = "fail", " ".join(str(err).split())[:300]
    except Exception as err:  # noqa: BLE001 - any failure is this case's result
        status, message = "error", _short_error(err)
    return {"status": status, "message": message,
            "seconds": round(time.perf_counter() - start, 3)}


def _spec_defined(model, inputs: list, expected: list, got: list) -> tuple[list, list]:
    """Expected and actual values where the ONNX spec defines them.

    Cast's spec: floating point to fixed point is "undefined if OOR" (out of range). The
    suite's stored outputs for those elements follow whichever ml_dtypes version generated
    them (0.7 writes 0 where earlier versions wrapped or clipped), and onnxruntime wraps; so
    for a single float -> integer Cast only the in-range elements are compared.
    """
    nodes = model.graph.node
    if len(nodes) != 1 or nodes[0].op_type not in ("Cast", "CastLike") or len(got) != 1:
        return expected, got
    src, ref, out = np.asarray(inputs[0]), np.asarray(expected[0]), np.asarray(got[0])
    if src.dtype.kind not in "fV" or ref.dtype.kind == "f" or ref.shape != src.shape or \
            not _is_integer(ref.dtype):
        return expected, got
    info = _iinfo(ref.dtype)
    wide = src.astype(np.float64)
    defined = np.isfinite(wide) & (np.trunc(wide) >= info.min) & (np.trunc(wide) <= info.max)
    if out.shape != ref.shape:
        return expected, got  # the shape check reports it
    return [ref[defined]], [out[defined]]


def _is_integer(dtype: np.dtype) -> bool:
    return dtype.kind in "iu" or dtype.name in ("int4", "uint4", "int2", "uint2")


def _iinfo(dtype: np.dtype):
    if dtype.kind in "iu":
        return np.iinfo(dtype)
    import ml_dtypes

    return ml_dtypes.iinfo(dtype)


def _short_error(err: BaseException) -> str:
    where = traceback.extract_tb(err.__traceback__)[-1]
    return f"{type(err).__name__}: {str(err)[:250]} ({where.filename.split('/')[-1]}:" \
           f"{where.lineno})"


# --------------------------------------------------------------------------------------------
# The suite, in parallel workers with a per-case time limit.

_CASES: list = []


def _worker(conn, runners: tuple) -> None:
    while True:
        index = conn.recv()
        if index is None:
            return
        case = _CASES[index]
        conn.send((index, {r: run_case(case, r) for r in runners}))


class _Slot:
    def __init__(self, ctx, runners):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child, runners), daemon=True)
        self.proc.start()
        self.index, self.started = None, 0.0

    def give(self, index: int) -> None:
        self.index, self.started = index, time.monotonic()
        self.conn.send(index)

    def stop(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join()


def run_suite(cases: list, runners=("msc",), workers: int = 2, timeout: float = 20.0) -> dict:
    """{case name: {runner: result}}; a case over ``timeout`` seconds (all runners together)
    is a timeout."""
    global _CASES
    _CASES = cases
    ctx = multiprocessing.get_context("fork")
    todo, results = deque(range(len(cases))), {}
    slots = [_Slot(ctx, tuple(runners)) for _ in range(max(1, workers))]
    # a bar on a terminal (the benchmark), nothing under pytest or in a pipe (msc.progress)
    from msc.progress import progress

    try:
        with progress(total=len(cases), desc="onnx node suite", unit="case") as bar:
            while todo or any(s.index is not None for s in slots):
                for slot in slots:
                    if slot.index is None and todo:
                        slot.give(todo.popleft())
                done = len(results)
                _collect(slots, cases, results, runners, timeout, ctx)
                bar.update(len(results) - done)
    finally:
        for slot in slots:
            if slot.proc.is_alive() and slot.index is None:
                slot.conn.send(None)
            slot.stop()
    return results


def _collect(slots, cases, results, runners, timeout, ctx) -> None:
    busy = [s for s in slots if s.index is not None]
    for conn in wait([s.conn for s in busy], timeout=0.5):
        slot = next(s for s in busy if s.conn is conn)
        try:
            index, result = conn.recv()
        except EOFError:  # the worker died (a crash in native code)
            index, result = slot.index, _all(runners, "error", "worker process died")
            _replace(slots, slot, ctx, runners)
        results[cases[index].name] = result
        slot.index = None
    now = time.monotonic()
    for slot in [s for s in slots if s.index is not None and now - s.started > timeout]:
        results[cases[slot.index].name] = _all(runners, "timeout", f"over {timeout} s")
        _replace(slots, slot, ctx, runners)


def _replace(slots: list, slot: _Slot, ctx, runners) -> None:
    slot.stop()
    slots[slots.index(slot)] = _Slot(ctx, tuple(runners))


def _all(runners, status: str, message: str) -> dict:
    return {r: {"status": status, "message": message} for r in runners}


# --------------------------------------------------------------------------------------------
# Report.

_ITEM = re.compile(r"- (?P<op>[\w.]+) \(.*?reason=(?P<q>['\"])(?P<reason>.*?)(?P=q)\)")
_NUMBERS = re.compile(r"-?\d+(\.\d+)?(e[-+]?\d+)?")


def cause(case, result: dict) -> str:
    """Why a case does not pass, in words shared by every case failing the same way (the
    benchmark's reason table groups by it)."""
    status, message = result["status"], result.get("message", "")
    if status == "unsupported":
        item = _ITEM.search(message)
        if item:
            return f"unsupported: {item['op']}: {item['reason']}"
        return f"unsupported: {_NUMBERS.sub('N', message)[:120]}"
    if status == "fail":
        kind = ("wrong shape" if "incorrect shape" in message else
                "wrong dtype" if "dtype(" in message else
                "wrong output count" if "Items are not equal" in message else
                "wrong values")
        return f"fail: {kind} ({', '.join(case_ops(case)[:3])})"
    if status == "error":
        return f"error ({', '.join(case_ops(case)[:3])}): {_NUMBERS.sub('N', message)[:120]}"
    return f"{status}: {message[:80]}"


def summarize(cases: list, results: dict, runners=("msc",)) -> dict:
    """Totals per runner, per-op pass/fail (a case counts for every op in its graph) and each
    case's result."""
    ops = defaultdict(lambda: {"cases": 0, **{f"{r}_pass": 0 for r in runners},
                               "failing": []})
    for case in cases:
        result = results[case.name]
        for op in case_ops(case):
            row = ops[op]
            row["cases"] += 1
            for r in runners:
                row[f"{r}_pass"] += result[r]["status"] == "pass"
            if result[runners[0]]["status"] != "pass":
                row["failing"].append(case.name)
    return {
        "evaluator": "vm",
        "tolerance": "per case: rtol=case.rtol, atol=case.atol (default 1e-3, 1e-7)",
        "total": len(cases),
        "pass": {r: sum(results[c.name][r]["status"] == "pass" for c in cases)
                 for r in runners},
        "ops": dict(sorted(ops.items())),
        "cases": {c.name: results[c.name] for c in cases},
        "causes": dict(Counter(cause(c, results[c.name][runners[0]]) for c in cases
                               if results[c.name][runners[0]]["status"] != "pass")
                       .most_common()),
    }
