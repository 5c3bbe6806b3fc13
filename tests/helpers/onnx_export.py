"""ONNX -> MSCGraph -> ONNX round trips, shared by tests/codegen/onnx and
benchmarks/onnx_export.py (this file holds no tests).

    result = round_trip_case(case)   # {"status": pass | fail | error | unsupported, ...}
    result = round_trip_model(model, feeds)

A case passes when msc imports it, ``to_onnx`` writes it (the checker passes with full_check),
onnxruntime runs the written model and its outputs equal the case's expected outputs (the
tolerances of onnx's own runner); the node counts of both models are reported.
"""

from __future__ import annotations

import time
import warnings

import numpy as np

from tests.helpers.onnx_conformance import _arrays, _is_tensor, compare, run_onnxruntime


def export(model, opset: int | None = None, **kw):
    """``model`` (ModelProto) through from_onnx and to_onnx."""
    from msc.codegen import to_onnx
    from msc.frontends.onnx.api import from_onnx

    graph, weights = from_onnx(model)
    return to_onnx(graph, weights, opset=opset, **kw)


def round_trip_model(model, inputs: list, opset: int | None = None):
    """(outputs of the written model in onnxruntime, the written model)."""
    written = export(model, opset)
    return run_onnxruntime(written, inputs), written


def model_opset(model) -> int:
    """The model's default-domain opset, within what to_onnx writes (13..newest)."""
    from msc.codegen.onnx.writer import MIN_OPSET, max_opset

    version = next((i.version for i in model.opset_import if i.domain in ("", "ai.onnx")),
                   MIN_OPSET)
    return min(max(version, MIN_OPSET), max_opset())


def round_trip_case(case, opset: int | None = None) -> dict:
    """One node conformance case, exported back (at the case's own opset unless ``opset``
    is given) and run in onnxruntime."""
    from msc.errors import UnsupportedOpError

    opset = model_opset(case.model) if opset is None else opset
    inputs, expected = (_arrays(v) for v in case.data_sets[0])
    if not all(_is_tensor(v) for v in inputs):
        return {"status": "unsupported", "message": "import: a sequence or optional graph "
                "input (an MSCGraph input is one tensor)"}
    start = time.perf_counter()
    result = {"nodes_in": len(case.model.graph.node)}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compare(list(expected), run_onnxruntime(case.model, [np.asarray(v) for v in inputs]),
                    case.rtol,
                    case.atol)
    except Exception as err:  # noqa: BLE001 - then there is no reference run to match
        return {**result, "status": "ort-fails",
                "message": "onnxruntime fails the original: " + " ".join(str(err).split())[:200]}
    stage = "import"
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            from msc.frontends.onnx.api import from_onnx

            graph, weights = from_onnx(case.model)
            stage = "export"
            from msc.codegen import to_onnx

            written = to_onnx(graph, weights, opset=opset)
            result["nodes_out"] = len(written.graph.node)
            stage = "run"
            got = run_onnxruntime(written, [np.asarray(v) for v in inputs])
        compare(list(expected), got, case.rtol, case.atol)
        status, message = "pass", ""
    except UnsupportedOpError as err:
        status, message = "unsupported", f"{stage}: " + " ".join(str(err).split())[:300]
    except AssertionError as err:
        status, message = "fail", "outputs: " + " ".join(str(err).split())[:300]
    except Exception as err:  # noqa: BLE001 - any failure is this case's result
        status = "unsupported" if stage == "import" else "error"
        message = f"{stage}: {type(err).__name__}: " + " ".join(str(err).split())[:300]
    return {**result, "status": status, "message": message,
            "seconds": round(time.perf_counter() - start, 3)}


def node_cases(modules: dict[str, list[str]]) -> dict:
    """Named node conformance cases from a few case modules of onnx (``{"conv":
    ["test_conv_with_strides_padding"]}``): importing a module runs its exports only, so this
    costs a fraction of ``load_cases()``."""
    import importlib

    import onnx.backend.test.case.node as node_pkg

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        node_pkg._TargetOpType = None  # as collect_testcases() leaves it
        for module in modules:
            importlib.import_module(f"onnx.backend.test.case.node.{module}")
    wanted = {n for names in modules.values() for n in names}
    found = {c.name: c for c in node_pkg._NodeTestCases if c.name in wanted}
    missing = sorted(wanted - set(found))
    if missing:
        raise KeyError(f"no conformance cases {missing}")
    return found
