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
