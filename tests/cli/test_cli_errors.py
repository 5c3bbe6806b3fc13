"""Exit statuses and messages: 2 for usage and input errors (message on stderr naming the
input), 1 only for a failed check (tests/cli/test_cli_run.py), 3 for a bug in msc."""

from pathlib import Path

import pytest

from msc.cli import commands
from msc.cli.main import main
from tests.helpers.cli_models import cnn_onnx, torch_file, tvmscript_file

EXAMPLE = str(Path(__file__).resolve().parents[2] / "msc" / "data" / "conv_relu.json")


def _error(capsys, argv, status: int = 2) -> str:
    assert main(argv) == status
    captured = capsys.readouterr()
    assert captured.out == ""
    return captured.err


@pytest.mark.parametrize("cmd", ["inspect", "run", "bench", "export", "codegen", "diff"])
def test_missing_model_file(tmp_path, capsys, cmd):
    missing = str(tmp_path / "nope.onnx")
    extra = {"export": ["-o", str(tmp_path / "g.json")],
             "codegen": ["--to", "relax", "-o", str(tmp_path / "gen")],
             "diff": [EXAMPLE]}.get(cmd, [])
    err = _error(capsys, [cmd, missing, *extra])
    assert f"msc {cmd}: error: {missing}: no such file" in err


def test_unsupported_model_format(tmp_path, capsys):
    model = tmp_path / "model.tflite"
    model.write_bytes(b"TFL3")
    err = _error(capsys, ["inspect", str(model)])
    assert "unsupported model format '.tflite'" in err and ".onnx" in err


def test_unsupported_onnx_op_is_named(tmp_path, capsys):
    import onnx
    from onnx import TensorProto, helper

    node = helper.make_node("NoSuchOp", ["x"], ["y"])
    graph = helper.make_graph([node], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    path = tmp_path / "odd.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    err = _error(capsys, ["run", str(path)])
    assert "odd.onnx: 1 ONNX op type(s) cannot be converted" in err and "NoSuchOp" in err


@pytest.mark.parametrize("spec, message", [
    ("x:1,a-b,3", "bad --input 'x:1,a-b,3': dim 'a-b' is not a size"),
    ("x:2,3,8,8:complex7", "unknown dtype 'complex7'"),
    ("x", "bad --input 'x'"),
    ("y:2,3,8,8", "the model has no input 'y'"),
    ("x:2,3,9,8", "got shape [2, 3, 9, 8], the model wants ['N', 3, 8, 8]"),
    ("x:missing.npy", "missing.npy: no such file"),
])
def test_bad_input_specs(tmp_path, capsys, spec, message):
    err = _error(capsys, ["run", cnn_onnx(tmp_path / "cnn.onnx"), "--input", spec])
    assert message in err


def test_symbolic_dim_needs_a_value(tmp_path, capsys):
    err = _error(capsys, ["run", cnn_onnx(tmp_path / "cnn.onnx")])
    assert "tensor 'x': the symbolic dim 'N' needs a value" in err
    assert "--dim N=<size>" in err
    err = _error(capsys, ["run", cnn_onnx(tmp_path / "cnn.onnx"), "--dim", "N=two"])
    assert "bad --dim 'N=two'" in err


def test_torch_model_errors(tmp_path, capsys):
    path = torch_file(tmp_path)
    info = ["--input-info", "x:1,3,8,8"]
    assert "needs --input-info" in _error(capsys, ["inspect", f"{path}:make_model"])
    assert "defines no function 'nope'" in _error(capsys, ["inspect", f"{path}:nope", *info])
    assert "broken() failed: RuntimeError: weights not found" in \
        _error(capsys, ["inspect", f"{path}:broken", *info])
    assert "not_a_module() returned int" in _error(capsys, ["inspect", f"{path}:not_a_module",
                                                            *info])
    bad = _error(capsys, ["inspect", f"{path}:make_model", "--input-info", "x:1,3,,8"])
    assert "bad --input-info 'x:1,3,,8'" in bad


def test_a_tvmscript_file_is_never_executed(tmp_path, capsys):
    """Without ``:factory`` a .py file is TVMScript, parsed only: its code never runs."""
    marker = tmp_path / "ran"
    script = tmp_path / "evil.py"
    script.write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    assert main(["inspect", str(script)]) == 2
    assert "evil.py" in capsys.readouterr().err
    assert not marker.exists()


def test_input_info_only_for_onnx_and_torch(tmp_path, capsys):
    err = _error(capsys, ["inspect", tvmscript_file(tmp_path), "--input-info", "x:2,8"])
    assert "--input-info applies to ONNX and torch models" in err


def test_check_and_run_need_what_they_need(tmp_path, capsys):
    err = _error(capsys, ["run", tvmscript_file(tmp_path), "--check"])
    assert "--check needs a runtime of the model's own" in err
    err = _error(capsys, ["run", EXAMPLE])  # a graph JSON with no .npz next to it
    assert "conv_relu.json: 2 of the graph's 2 weights have no data" in err
    assert "conv_relu.npz" in err


def test_usage_errors_exit_2(capsys):
    assert main(["inspect"]) == 2  # argparse: the model is missing
    assert "required" in capsys.readouterr().err
    assert main(["frobnicate"]) == 2
    assert main([]) == 2
    assert "COMMAND" in capsys.readouterr().err
    assert main(["bench", EXAMPLE, "--repeat", "0"]) == 2
    assert "not a whole number >= 1" in capsys.readouterr().err
    assert main(["codegen", EXAMPLE, "--to", "java", "-o", "x"]) == 2
    assert "invalid choice: 'java'" in capsys.readouterr().err


def test_help_and_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("msc ")
    for name in commands.COMMANDS:
        assert main([name, "--help"]) == 0
        out = capsys.readouterr().out
        assert "example" in out and f"msc {name}" in out


def test_a_bug_exits_3_with_a_traceback(capsys, monkeypatch):
    def broken(args):
        raise ZeroDivisionError("oops")

    help_text, add_args, _ = commands.COMMANDS["inspect"]
    monkeypatch.setitem(commands.COMMANDS, "inspect", (help_text, add_args, broken))
    assert main(["inspect", EXAMPLE]) == 3
    err = capsys.readouterr().err
    assert "ZeroDivisionError: oops" in err and "internal error" in err


def test_a_reference_refusing_the_inputs_is_an_input_error(tmp_path, capsys):
    from tests.helpers.cli_models import relu_onnx

    model = relu_onnx(tmp_path / "relu.onnx", dims=(2, 4))
    assert main(["run", model, "--input-info", "input.1:3,4", "--check"]) == 2
    assert "relu.onnx: onnxruntime failed on these inputs" in capsys.readouterr().err
