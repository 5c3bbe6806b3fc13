"""`msc run` / `codegen` / `bench`: msc's backend against onnxruntime and torch."""

import json
import re
import sys

import numpy as np
import onnxruntime as ort
import pytest

from msc.cli import cmd_codegen, cmd_run
from msc.cli.main import main
from tests.helpers.cli_models import cnn_onnx, light, torch_file, tvmscript_file

ERR = re.compile(r"max abs err (\S+), max rel err (\S+) -> (ok|MISMATCH)")


@pytest.fixture
def cnn(tmp_path):
    return cnn_onnx(tmp_path / "cnn.onnx")


@pytest.fixture
def net(tmp_path):
    return torch_file(tmp_path) + ":make_model"


def test_run_check_onnx_against_onnxruntime(cnn, capsys):
    assert main(["run", cnn, "--dim", "N=3", "--check"]) == 0
    out = capsys.readouterr().out
    assert "y: float32[3, 10]" in out or "matmul: float32[3, 10]" in out
    max_abs, _, status = ERR.search(out).groups()
    assert status == "ok" and float(max_abs) < 1e-4 and out.rstrip().endswith("PASS")


def test_run_given_input_and_saved_outputs_match_onnxruntime(cnn, tmp_path, capsys):
    x = np.random.default_rng(5).standard_normal((2, 3, 8, 8)).astype("float32")
    np.save(tmp_path / "x.npy", x)
    saved = tmp_path / "out.npz"
    assert main(["run", cnn, "--input", f"x:{tmp_path / 'x.npy'}", "--save", str(saved)]) == 0
    want = ort.InferenceSession(cnn, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    with np.load(saved) as data:
        np.testing.assert_allclose(data[data.files[0]], want, rtol=1e-4, atol=1e-5)


def test_run_check_mismatch_exits_1(cnn, capsys, monkeypatch):
    """A reference that disagrees by 0.01 on one element: exit 1, the output named."""
    real = cmd_run.reference_runner

    def off_by_a_bit(model, threads=None):
        run = real(model, threads)

        def wrong(arrays):
            outputs = [o.copy() for o in run(arrays)]
            outputs[0].flat[3] += 0.01
            return outputs
        return wrong

    monkeypatch.setattr(cmd_run, "reference_runner", off_by_a_bit)
    assert main(["run", cnn, "--dim", "N=1", "--check"]) == 1
    out = capsys.readouterr().out
    assert "MISMATCH (1 of 10)" in out and out.rstrip().endswith("FAIL")
    # a loose enough tolerance accepts it
    assert main(["run", cnn, "--dim", "N=1", "--check", "--atol", "0.02"]) == 0


def test_run_light_squeezenet_check(capsys):
    assert main(["run", light("squeezenet"), "--check", "-q"]) == 0
    out = capsys.readouterr().out
    assert "float32[1, 1000, 1, 1]" in out and "PASS" in out


def test_run_torch_model_file_check(net, capsys):
    argv = ["run", net, "--input-info", "x:N,3,16,16", "--input", "x:2,3,16,16", "--check"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "check against torch" in out and "float32[2, 10]" in out
    assert float(ERR.search(out).group(1)) < 1e-4


def test_run_tvmscript_file(tmp_path, capsys):
    x = np.linspace(-1, 1, 16, dtype="float32").reshape(2, 8)
    np.save(tmp_path / "x.npy", x)
    saved = tmp_path / "out.npz"
    assert main(["run", tvmscript_file(tmp_path), "--input", f"x:{tmp_path / 'x.npy'}",
                 "--save", str(saved)]) == 0
    with np.load(saved) as data:
        np.testing.assert_array_equal(data[data.files[0]], np.maximum(x, 0))


def test_codegen_relax_test_against_torch_golden(net, tmp_path, capsys):
    """The torch model's own outputs are the golden data the generated Relax script must meet."""
    out = tmp_path / "gen"
    argv = ["codegen", net, "--input-info", "x:N,3,16,16", "--to", "relax", "-o", str(out),
            "--test", "--dim", "N=2"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "golden outputs from torch" in text and text.rstrip().endswith("PASS")
    with np.load(out / "baseline" / "baseline.npz") as data:
        assert data["x"].shape == (2, 3, 16, 16)
    # a non-empty folder is refused without --force
    assert main(argv) == 2
    assert "--force" in capsys.readouterr().err


def test_codegen_torch_module(net, tmp_path, capsys):
    out = tmp_path / "gen"
    assert main(["codegen", net, "--input-info", "x:1,3,16,16", "--to", "torch", "-o",
                 str(out)]) == 0
    assert "nn.Conv2d(" in (out / "main.py").read_text()
    assert list(out.glob("main_weights.*"))  # .safetensors, or .npz without safetensors


def test_codegen_relax_failing_test_exits_1(cnn, tmp_path, capsys, monkeypatch):
    """Golden outputs that the generated script cannot reproduce: its test fails -> exit 1."""
    real = cmd_codegen.reference_runner

    def shifted(model, threads=None):
        run = real(model, threads)
        return lambda arrays: [o + 1.0 for o in run(arrays)]

    monkeypatch.setattr(cmd_codegen, "reference_runner", shifted)
    out = tmp_path / "gen"
    assert main(["codegen", cnn, "--to", "relax", "-o", str(out), "--test", "--dim",
                 "N=1"]) == 1
    captured = capsys.readouterr()
    assert "MISMATCH" in captured.out and "FAIL" in captured.out
    assert "the generated test failed" in captured.err
    assert "relax.op.nn.conv2d" in (out / "main.py").read_text()


def test_bench_table(cnn, capsys):
    assert main(["bench", cnn, "--dim", "N=1", "--repeat", "2", "--min-time", "0.01",
                 "--threads", "1"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split() for line in out.splitlines()[2:]}
    assert set(rows) == {"msc", "onnxruntime"}
    best_msc, best_ort = float(rows["msc"][1]), float(rows["onnxruntime"][1])
    assert best_msc > 0 and best_ort > 0
    ratio = float(rows["onnxruntime"][3].rstrip("x"))  # msc / onnxruntime, of unrounded times
    # the table rounds times to 0.001 ms and the ratio to 0.01: the printed ratio must lie in
    # the interval the rounded times allow (tiny models run in ~0.01 ms, so this is wide)
    half = 0.0005
    low = (best_msc - half) / (best_ort + half)
    high = (best_msc + half) / max(best_ort - half, 1e-9)
    assert low - 0.005 <= ratio <= high + 0.005, (ratio, best_msc, best_ort)


def test_onnx_input_names_the_graph_sanitizes(tmp_path, capsys):
    """`input.1` becomes the graph input `input_1` and dim `batch size` becomes `batch_size`:
    --input takes either name, and onnxruntime is fed by position."""
    from tests.helpers.cli_models import relu_onnx

    model = relu_onnx(tmp_path / "relu.onnx")
    for name in ("input.1", "input_1"):
        assert main(["run", model, "--input", f"{name}:3,4", "--check"]) == 0
        assert "float32[3, 4]" in capsys.readouterr().out
    assert main(["run", model, "--dim", "batch_size=2", "--check"]) == 0
    assert "PASS" in capsys.readouterr().out


def test_progress_on_a_terminal_and_quiet(cnn, capsys, monkeypatch):
    """Stage bars go to stderr when it is a terminal; -q / --quiet turns them off."""
    from msc import progress

    monkeypatch.setattr(progress, "_quiet", False)
    monkeypatch.setattr(progress, "enabled", lambda: not progress._quiet)  # as on a terminal
    assert main(["run", cnn, "--dim", "N=1"]) == 0
    assert "msc run" in capsys.readouterr().err
    assert main(["run", cnn, "--dim", "N=1", "--quiet"]) == 0
    assert capsys.readouterr().err == ""


def test_run_json_report(cnn, capsys):
    assert main(["run", cnn, "--dim", "N=2", "--check", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["outputs"][0]["shape"] == [2, 10] and report["check"]["ok"] is True
    assert report["check"]["reference"] == "onnxruntime"
    assert report["check"]["outputs"][0]["max_abs"] < 1e-4


def test_without_onnxruntime(cnn, capsys, monkeypatch):
    """onnxruntime is optional: --check says how to get it (exit 2), bench times msc alone."""
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    assert main(["run", cnn, "--dim", "N=1", "--check"]) == 2
    assert "pip install onnxruntime" in capsys.readouterr().err
    assert main(["bench", cnn, "--dim", "N=1", "--repeat", "1", "--min-time", "0.01"]) == 0
    out = capsys.readouterr().out
    assert "onnxruntime is not installed" in out and "\nmsc " in out and "\nonnxruntime " not in out


def test_long_api_steps_report_progress(cnn, monkeypatch):
    """from_onnx's node loop and relax.build's kernel loop go through msc.progress (a bar on a
    terminal after a second, nothing in CI or under --quiet)."""
    from msc import progress, relax
    from msc.frontends.translate import from_onnx

    seen = []

    def recording(iterable=None, total=None, desc="", unit="it", delay=0.0):
        items = list(iterable)
        seen.append((desc, len(items), delay))
        return items

    monkeypatch.setattr(progress, "progress", recording)
    monkeypatch.setattr("msc.frontends.onnx.importer.progress", recording)
    monkeypatch.setattr("msc.backend.build.progress", recording)
    mod, _ = from_onnx(cnn, input_info={"x": [1, 3, 8, 8]}, as_msc=False)
    relax.build(mod)
    descs = {desc: (count, delay) for desc, count, delay in seen}
    assert descs["from_onnx"][0] > 3 and descs["relax.build"][0] > 3
    assert descs["from_onnx"][1] == descs["relax.build"][1] == 1.0


def test_an_infinity_against_a_finite_value_is_an_infinite_error():
    """The report's max abs error counts an infinity where the reference is finite (it was
    left out of the maximum: a mismatch reported as 'max abs err 0')."""
    from msc.cli.runners import compare

    want = np.array([1.0, -3.4028235e38, 2.0], np.float32)
    got = np.array([1.0, -np.inf, 2.0], np.float32)
    row = compare([got], [want], ["y"], atol=1e-4, rtol=1e-4)[0]
    assert not row["ok"] and row["mismatched"] == 1 and row["max_abs"] == np.inf
    same = compare([want.copy()], [want], ["y"], atol=1e-4, rtol=1e-4)[0]
    assert same["ok"] and same["max_abs"] == 0.0
    nan = compare([np.array([np.nan])], [np.array([np.nan])], ["y"], 1e-4, 1e-4)[0]
    assert nan["ok"] and nan["max_abs"] == 0.0  # NaN where the reference has NaN agrees


def test_a_qdq_model_is_checked_against_itself_as_written(tmp_path, capsys):
    """A per-channel (axis 1) DequantizeLinear of a MatMul's weight: onnxruntime's optimized
    session fuses it into an int8 kernel whose answer is off the model's by far more than the
    tolerance (onnxruntime 1.32); --check and --layerwise compare with the unoptimized run,
    say so, and pass (msc computes the model as written)."""
    import onnx

    from tests.helpers.qdq_chain_models import dequantized_matmul

    model, x, want = dequantized_matmul()
    path = tmp_path / "qdq.onnx"
    onnx.save(model, path)
    np.save(tmp_path / "x.npy", x)
    fused = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]
    assert np.abs(fused - want).max() > 1e-3  # the premise
    args = ["run", str(path), "--input", f"x:{tmp_path / 'x.npy'}", "--check"]
    assert main(args + ["--layerwise"]) == 0
    out = capsys.readouterr().out
    assert "graph optimizations off (the quantized model as written)" in out
    assert ERR.search(out).groups()[2] == "ok" and "every node agrees" in out
