from msc.tour.tvmtext import step_tvm_text


def test_step_tvm_text_writes_a_show_meta_text(tmp_path, capsys):
    step_tvm_text(str(tmp_path))
    text = (tmp_path / "tvm_text_show_meta.py").read_text()
    assert text.startswith('metadata = tvm.ir.load_json("""{')
    assert 'metadata["ffi.Tensor"][0]' in capsys.readouterr().out
