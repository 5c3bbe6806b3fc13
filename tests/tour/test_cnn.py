import numpy as np

from msc.tour import cnn
from msc.tour.cnn import step_cnn


def test_step_cnn_block_equal_to_numpy(tmp_path, capsys):
    step_cnn(str(tmp_path))  # raises SystemExit when msc differs from the numpy reference
    text = capsys.readouterr().out
    assert "max |msc - numpy float64|" in text and "(1, 48, 12, 12)" in text


def test_numpy_references_of_the_demo():
    """The demo's own references against direct sums, so its check means something."""
    x = np.arange(2 * 5 * 5, dtype=np.float32).reshape(1, 2, 5, 5)
    avg = cnn._pool(x, "avg", 2, 1)
    assert avg[0, 0, 0, 0] == np.mean(x[0, 0, :2, :2])  # the corner window: 4 inputs
    assert cnn._pool(x, "max", 2, 1)[0, 1, 2, 2] == x[0, 1, 4, 4]
    w = np.ones((2, 1, 3, 3), np.float32)
    conv = cnn._conv(x, w, 1, 1, groups=2)
    assert conv[0, 1, 2, 2] == x[0, 1, 1:4, 1:4].sum()
