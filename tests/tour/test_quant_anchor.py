"""The quantization anchor demo step (msc/tour/quant_anchor.py) runs and checks itself."""

import torch

from msc.tour.quant_anchor import step_quant_anchor


def test_step_quant_anchor_beats_onnxruntime_and_fuses(tmp_path, capsys):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # calibration runs on torch; its pool thrashes on a busy machine
    try:
        step_quant_anchor(str(tmp_path))  # SystemExit if msc < onnxruntime or not fused
    finally:
        torch.set_num_threads(threads)
    out = capsys.readouterr().out
    assert out.count("onnxruntime") >= 3 and "QLinearConv" in out
    assert (tmp_path / "tiny_int8_ort.onnx").exists()
