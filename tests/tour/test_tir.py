"""The TensorIR demo step (msc/tour/tir.py) runs, checks its results and writes under out."""

import json

from msc.tour.tir import step_tir


def test_step_tir_schedules_replays_and_tunes(tmp_path, capsys):
    step_tir(str(tmp_path))   # raises SystemExit on a wrong value or a trace that differs
    out = capsys.readouterr().out
    assert "saved to" in out and "best of 4 trials" in out
    trace = json.loads((tmp_path / "matmul_trace.json").read_text())
    assert [inst[0] for inst in trace[0]] == ["GetSBlock", "GetLoops", "Split", "Reorder",
                                              "Vectorize", "DecomposeReduction"]
    records = (tmp_path / "tune" / "database_tuning_record.json").read_text().splitlines()
    assert len(records) == 5   # the untuned function and 4 candidates
