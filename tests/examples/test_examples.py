"""The examples/ scripts (the TVM MLC lessons' code with msc imports) run as written and agree."""

import runpy
from pathlib import Path

import numpy as np

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _run(name: str) -> dict:
    return runpy.run_path(str(EXAMPLES / name), run_name="example")


def test_e2e_mlp_variants_predict_the_same_classes(capsys):
    ns = _run("e2e_mlp.py")
    preds = ns["main"]()  # raises SystemExit when a variant's scores differ from numpy's
    assert set(preds) == {"numpy", "lnumpy_call_tir", "tvmscript", "extern_call", "mixture",
                          "call_by_name", "bind_params"}
    for name, pred in preds.items():
        np.testing.assert_array_equal(pred, preds["numpy"][:len(pred)], err_msg=name)
    assert "time-cost" in capsys.readouterr().out


def test_e2e_mlp_detects_a_wrong_variant(monkeypatch):
    ns = _run("e2e_mlp.py")
    params, images = ns["make_mlp"]()
    good = ns["logits"](params, images[:1])
    params["w1"] = params["w1"][::-1].copy()  # another model: the scores must differ
    bad = ns["logits"](params, images[:1])
    assert not np.allclose(good["tvmscript"], bad["tvmscript"])
    np.testing.assert_allclose(bad["tvmscript"], bad["numpy"], rtol=1e-4, atol=1e-4)


def test_tensorir_schedule_lesson_runs_and_replays(capsys):
    results = _run("tensorir_schedule.py")["main"]()  # SystemExit on a wrong value
    assert set(results) == {"original", "transformed"}
    out = capsys.readouterr().out
    assert "sch.decompose_reduction(block=b0, loop=l3)" in out
    assert 'T.sblock("Y_init")' in out


def test_auto_tune_lesson_swaps_in_the_tuned_linear0(tmp_path):
    result = _run("auto_tune.py")["main"](trials=2, work_dir=str(tmp_path))
    assert result["result"].trials == 2
    assert "sample_perfect_tile" in result["trace"] or result["trace"].count("\n") == 1
    assert (tmp_path / "database_tuning_record.json").exists()
