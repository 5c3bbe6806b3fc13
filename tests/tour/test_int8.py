"""The int8 demo step (msc/tour/int8.py) runs its QDQ CNN on int8 kernels and checks it."""

from msc.tour.int8 import step_int8


def test_step_int8_folds_the_qdq_convs(tmp_path, capsys):
    step_int8(str(tmp_path))   # raises SystemExit on a float fallback or a wrong output
    out = capsys.readouterr().out
    assert "qdq:nn.conv2d" in out and "int8:" in out and "SQNR vs float" in out
