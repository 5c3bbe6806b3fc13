"""benchmarks/corpus_speed.py: every corpus model has a family and a batch, and the report
(table, geomeans per family, the models above 1.15x) says what the measurements say. No
timing is run or asserted: the rows are made up."""

import math

import numpy as np

from benchmarks import corpus_speed as cs
from tests.helpers.corpus import FAMILIES, MODELS


def test_every_vision_and_text_model_has_a_family_and_a_list_batch():
    wanted = {name for name in MODELS if FAMILIES[name] in ("own", "vision", "text")}
    assert set(cs.FAMILY_OF) == wanted
    assert set(cs.LIST_BATCH) == wanted
    assert all(FAMILIES[n] != "text" for n in cs.FAMILY["cnn"] + cs.FAMILY["vit"])


def _row(model, family, times, err=1e-6, batch=16):
    """times: {(threads, batch): (msc, ort, torch)}."""
    runs = {}
    for (count, b), (msc, ort, torch) in times.items():
        run = runs.setdefault(b, {"batch": b, "err": err, "threads": {}})
        run["threads"][count] = {"msc": msc, "ort": ort, "torch": torch}
    return {"model": model, "family": family, "runs": list(runs.values())}


def test_table_geomeans_and_the_rows_above():
    rows = [
        _row("a", "cnn", {(1, 1): (2e-3, 1e-3, 4e-3), (1, 16): (1e-2, 2e-2, 1e-2)}),
        _row("b", "cnn", {(1, 1): (1e-3, 2e-3, 1e-3), (1, 16): (3e-2, 1e-2, 6e-2)}),
        _row("c", "decoder", {(1, 1): (1e-3, 1e-3, 2e-3)}, err=0.5),
    ]
    rows[2]["error"] = "RuntimeCallError: boom"
    rows[1]["runs"][1].update(rtol=cs.INT8_RTOL, ort_err=0.2)  # onnxruntime's fused int8 off
    lines = cs.table(rows, [1])
    assert lines[3].startswith("| b (ORT opt off) | CNN")
    assert lines[2].split(" | ")[:6] == ["| a", "CNN", "16", "2.00", "2.00", "0.50"]
    assert lines[4].startswith("| c (WRONG)") and lines[4].endswith("| - | - | - |")
    geo = {line.split(" | ")[0]: line.split(" | ")[2:] for line in cs.geomeans(rows, [1])[2:]}
    half = f"{math.sqrt(0.5):.2f}"
    assert geo["| CNN"] == [f"1.00 ({half})", f"{math.sqrt(0.5 * 3):.2f} ({half}) |"]
    assert geo["| decoders"][0] == "1.00 (0.50)"
    assert cs.above(rows, [1]) == ["b 1T blist 3.00", "a 1T b1 2.00"]


def test_batched_inputs_keep_the_first_row_and_the_kind():
    ids = np.arange(12, dtype=np.int64).reshape(1, 12)
    pixels = np.ones((1, 3, 4, 4), np.float32)
    got_ids, got_pixels = cs.batched([ids, pixels], 5)
    assert got_ids.shape == (5, 12) and got_ids.dtype == np.int64
    assert np.array_equal(got_ids[0], ids[0]) and got_ids.max() <= ids.max()
    assert got_pixels.shape == (5, 3, 4, 4) and got_pixels.dtype == np.float32
    assert np.array_equal(got_pixels[0], pixels[0])
    assert cs.batched([ids], 1)[0] is ids


def test_the_int8_reference_is_the_qdq_models_value():
    """``literal=True`` runs onnxruntime with its graph optimizations off: a DequantizeLinear
    (axis 1) -> MatMul on a float input as written, where the optimized session's fused
    kernel gives another answer (onnxruntime 1.32)."""
    from tests.helpers.qdq_chain_models import dequantized_matmul

    model, x, want = dequantized_matmul()
    np.testing.assert_allclose(cs.ort_runner(model, [x], 1, literal=True)(), want,
                               rtol=1e-5, atol=1e-5)


def test_the_verdict_is_the_issues_bar_over_every_cell():
    fast = {(1, 1): (1e-3, 2e-3, 1e-2), (1, 16): (1e-2, 2e-2, 1e-1)}
    rows = [_row("a", "cnn", fast), _row("b", "decoder", fast)]
    assert cs.verdict(rows, [1], "float").startswith("float: MET - worst geomean 0.50")
    # one slow cell: the geomeans stay under 0.85, the model cell does not
    rows.append(_row("c", "cnn", {(1, 1): (1.2e-3, 1e-3, 1e-2), (1, 16): (1e-2, 2e-2, 1)}))
    assert "NOT MET" in cs.verdict(rows, [1], "float")
    assert "worst model cell 1.20" in cs.verdict(rows, [1], "float")
    rows.pop()
    rows.append(_row("d", "cnn", fast, err=0.5))  # a wrong answer fails whatever the speed
    assert cs.verdict(rows, [1], "int8").endswith("wrong: d")
    rows.pop()
    refused = {"model": "t5", "family": "encoder", "runs": [],
               "error": "ReferenceRefused: onnxruntime refuses the file: InvalidArgument"}
    failed = {"model": "e", "family": "encoder", "runs": [], "error": "BuildError: boom"}
    said = cs.verdict([*rows, refused], [1], "int8")
    assert said.startswith("int8: MET") and said.endswith("onnxruntime refuses): t5")
    assert "msc failed: e" in cs.verdict([*rows, failed], [1], "int8")


def test_precision_flags():
    assert cs.parse_args([]).precision == ["float"]
    assert cs.parse_args(["--int8"]).precision == ["int8"]
    assert cs.parse_args(["--precision", "float", "int8"]).precision == ["float", "int8"]
