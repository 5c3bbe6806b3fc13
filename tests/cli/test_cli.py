"""The `msc` command line: subcommands, formats, refusal to overwrite, error exits."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from msc.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "msc" / "data" / "conv_relu.json")


def test_inspect_json(capsys):
    assert main(["inspect", EXAMPLE, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["nodes"]["total"] == 3
    assert summary["inputs"][0]["name"] == "inp_0"


def test_inspect_prints_summary_and_graph(capsys):
    assert main(["inspect", EXAMPLE]) == 0
    out = capsys.readouterr().out
    assert "input    inp_0  [1, 3, 10, 10]  float32  NCHW" in out
    assert "ID_1 conv2d" not in out
    assert main(["inspect", EXAMPLE, "--graph"]) == 0
    assert "ID_1 conv2d <PARENTS: inp_0| CHILDERN: relu>" in capsys.readouterr().out


@pytest.mark.parametrize("ext, marker", [(".json", '"nodes"'), (".prototxt", "layer {"),
                                         (".dot", "digraph")])
def test_export_formats(tmp_path, ext, marker):
    out = tmp_path / f"g{ext}"
    assert main(["export", EXAMPLE, "-o", str(out)]) == 0
    assert marker in out.read_text()


def test_export_refuses_to_overwrite(tmp_path, capsys):
    out = tmp_path / "g.json"
    out.write_text("precious")
    assert main(["export", EXAMPLE, "-o", str(out)]) == 2
    assert out.read_text() == "precious"
    assert "--force" in capsys.readouterr().err
    assert main(["export", EXAMPLE, "-o", str(out), "--force"]) == 0
    assert '"nodes"' in out.read_text()


def test_bad_inputs_exit_2(tmp_path, capsys):
    assert main(["inspect", str(tmp_path / "missing.json")]) == 2
    assert "no such file" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["inspect", str(bad)]) == 2
    assert "bad.json" in capsys.readouterr().err
    assert main(["export", EXAMPLE, "-o", str(tmp_path / "g.xyz")]) == 2
    assert "unknown output format" in capsys.readouterr().err


def test_python_dash_m_and_help():
    proc = subprocess.run([sys.executable, "-m", "msc", "--help"], capture_output=True, check=False,
                          text=True, timeout=60)
    assert proc.returncode == 0
    for name in ("inspect", "export", "codegen", "run", "bench", "diff", "demo", "exit status"):
        assert name in proc.stdout


@pytest.mark.parametrize("argv", [[], ["--help"], ["demo", "--help"]])
def test_the_command_line_loads_no_tour(argv):
    """The tour (msc/tour/) loads only when `msc demo` runs: not with `import msc.cli`, not for
    `msc --help`, not for `msc demo --help`."""
    code = ("import contextlib, io, sys\n"
            "import msc.cli.main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    status = msc.cli.main.main({argv!r}) if {argv!r} else 0\n"
            "print(status, sorted(m for m in sys.modules\n"
            "                     if m.startswith('msc.tour') or 'demo' in m))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "0 []", proc.stdout


def test_demo_runs(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "msc", "demo", "--out", str(tmp_path)],
                          capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "graph.inspect()" in proc.stdout
    assert "num_threads=2: bitwise equal" in proc.stdout
    assert (tmp_path / "conv_relu.prototxt").read_text().startswith('name: "main"')


def test_core_works_without_torch(tmp_path):
    # torch is imported lazily: the graph and the IR must work where torch is missing.
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import msc\n"
        "from msc import MSCGraph, relax, tir\n"
        f"g = MSCGraph.from_json({EXAMPLE!r}); g.check()\n"
        "x = relax.Var('x', relax.TensorStructInfo((tir.Var('n'), 4), 'float32'))\n"
        "relax.op.add(x, x)\n"
        "assert 'torch' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


def _tiny_onnx(path):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), "float32"), "w")
    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])
    graph = helper.make_graph(
        [node], "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def test_inspect_onnx_and_tvmscript(tmp_path, capsys):
    model = tmp_path / "tiny.onnx"
    _tiny_onnx(str(model))
    assert main(["inspect", str(model), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["nodes"] == {"total": 2, "input": 1, "nn.conv2d": 1}
    assert summary["outputs"][0]["layout"] == "NCHW"
    script = tmp_path / "mlp.py"
    script.write_text(
        "@I.ir_module\nclass Module:\n    @R.function\n"
        "    def main(x: R.Tensor((2, 8), dtype=\"float32\")):\n"
        "        with R.dataflow():\n            gv = R.nn.relu(x)\n            R.output(gv)\n"
        "        return gv\n")
    assert main(["inspect", str(script), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["nodes"] == {"total": 2, "input": 1, "nn.relu": 1}


def test_tvmscript_errors_name_the_file_and_line(tmp_path, capsys):
    binary = tmp_path / "binary.py"
    binary.write_bytes(b"\xff\xfe not text")
    bad_op = tmp_path / "bad_op.py"
    bad_op.write_text('@I.ir_module\nclass M:\n    @R.function\n'
                      '    def main(x: R.Tensor((2,), "float32")):\n        return R.bogus(x)\n')
    assert main(["inspect", str(binary)]) != 0
    assert f"{binary}: not UTF-8 text" in capsys.readouterr().err
    assert main(["inspect", str(bad_op)]) != 0
    assert f"{bad_op}:5: unknown op R.bogus" in capsys.readouterr().err


def test_export_never_overwrites_its_input(tmp_path, capsys):
    model = tmp_path / "m.json"
    model.write_text(Path(EXAMPLE).read_text())
    before = model.read_text()
    assert main(["export", str(model), "-o", str(model), "--force"]) == 2
    assert "is an input of the command" in capsys.readouterr().err
    assert model.read_text() == before


def test_export_writes_only_the_output(tmp_path):
    out = tmp_path / "sub" / "g.prototxt"
    assert main(["export", EXAMPLE, "-o", str(out)]) == 0
    assert [p.name for p in tmp_path.rglob("*")] == ["sub", "g.prototxt"]
