"""Generated folders run on their own: `python <graph>.py` compares with baseline/ and prints
PASS (exit 0), or FAIL (exit 1) when the golden data is perturbed; model names cannot inject
code, and every generated file passes ast.parse and ruff."""

import ast

import numpy as np
import pytest

from msc.codegen import save_baseline, to_relax, to_torch
from msc.errors import ValidationError
from msc.graph import MSCGraph, MSCJoint, MSCTensor, testing
from tests.helpers.codegen import (
    graph_of_call,
    relax_build_and_run,
    ruff_check,
    run_script,
    torch_run,
)

RNG = np.random.default_rng(0)
CODEGENS = {"torch": (to_torch, torch_run), "relax": (to_relax, relax_build_and_run)}


def _conv_relu():
    graph = testing.conv_relu_graph()
    weights = {t.name: RNG.standard_normal(t.shape).astype("float32")
               for t in graph.get_weights()}
    return graph, weights, [RNG.random((1, 3, 10, 10), dtype="float32")]


@pytest.mark.parametrize("kind", list(CODEGENS))
def test_script_passes_then_fails_on_perturbed_golden(kind, tmp_path):
    codegen, run = CODEGENS[kind]
    graph, weights, inputs = _conv_relu()
    model = codegen(graph, weights, build_folder=tmp_path)
    golden = run(model, inputs)
    save_baseline(tmp_path, {"inp_0": inputs[0]}, {"relu": golden[0]})
    result = run_script(tmp_path / "main.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1] == "PASS"
    assert "relu: max abs err" in result.stdout
    save_baseline(tmp_path, inputs, [golden[0] + 1e-3])  # lists in the graph's order
    result = run_script(tmp_path / "main.py")
    assert result.returncode == 1 and result.stdout.splitlines()[-1] == "FAIL"
    assert "MISMATCH" in result.stdout


def test_integer_outputs_compare_exactly(tmp_path):
    graph, inputs, weights, expected = graph_of_call("argmax", [RNG.random((3, 4),
                                                                dtype="float32")], {"axis": 1})
    to_torch(graph, weights, {"atol": 10.0, "rtol": 10.0}, build_folder=tmp_path)
    save_baseline(tmp_path, inputs, [expected[0] + 1])
    result = run_script(tmp_path / "main.py")
    assert result.returncode == 1 and "(exact) -> MISMATCH" in result.stdout


def test_save_baseline_checks_what_it_is_given(tmp_path):
    graph, weights, inputs = _conv_relu()
    to_torch(graph, weights, build_folder=tmp_path)
    with pytest.raises(ValidationError, match="inputs lack"):
        save_baseline(tmp_path, {"x": inputs[0]}, {"relu": inputs[0]})
    with pytest.raises(ValidationError, match="got 2 outputs"):
        save_baseline(tmp_path, inputs, [inputs[0], inputs[0]])
    with np.load(save_baseline(tmp_path, inputs, inputs), allow_pickle=False) as data:
        assert sorted(data.files) == ["inp_0", "relu"]


@pytest.mark.parametrize("kind", list(CODEGENS))
def test_without_test_section(kind, tmp_path):
    graph, weights, _ = _conv_relu()
    CODEGENS[kind][0](graph, weights, {"need_test": False}, build_folder=tmp_path)
    source = (tmp_path / "main.py").read_text()
    assert "def main()" not in source and ruff_check(tmp_path / "main.py") == ""


EVIL = ['x"); open("PWNED", "w") #', "__import__('os').system('touch PWNED')",
        "a\nimport os", "class", "self", "torch", "relax", "1abc", "\u00e9\u2028x", "a.b:c",
        "forward", "'''", '"""', "\\", "training"]


def _evil_graph(name: str):
    """input -> relu -> add(constant), every node and tensor named after ``name``."""
    names = [name, name + "r", name + "+", name + "w"]
    x = MSCTensor(f"{names[0]}:0", "float32", "NC", [2, 3], alias=names[0])
    inp = MSCJoint(0, names[0], "", "input", outputs=[x])
    relu = MSCJoint(1, names[1], "", "nn.relu", inputs=[(inp, 0)],
                    outputs=[MSCTensor(f"{names[1]}:0", "float32", "NC", [2, 3])])
    weight = MSCTensor(names[3], "float32", "C", [3], alias=names[3] + ".weight")
    const = MSCJoint(2, names[3], "", "constant", outputs=[
        MSCTensor(f"{names[3]}:0", "float32", "C", [3])], weights={"const": weight})
    add = MSCJoint(3, names[2], "", "add", inputs=[(relu, 0), (const, 0)],
                   outputs=[MSCTensor(f"{names[2]}:0", "float32", "NC", [2, 3], names[2])])
    graph = MSCGraph(names[2], [inp, relu, const, add], [x.name], [f"{names[2]}:0"])
    return graph, {names[3]: np.arange(3, dtype="float32")}


@pytest.mark.parametrize("kind", list(CODEGENS))
@pytest.mark.parametrize("name", EVIL, ids=[f"name{i}" for i in range(len(EVIL))])
def test_model_names_cannot_inject_code(kind, name, tmp_path):
    graph, weights = _evil_graph(name)
    codegen, run = CODEGENS[kind]
    model = codegen(graph, weights, build_folder=tmp_path)
    x = RNG.random((2, 3), dtype="float32") - 0.5
    want = np.maximum(x, 0) + np.arange(3, dtype="float32")
    np.testing.assert_allclose(run(model, [x])[0], want, rtol=1e-6)
    script = next(tmp_path.glob("*.py"))
    ast.parse(script.read_text())
    assert ruff_check(script) == ""
    assert not list(tmp_path.glob("PWNED")) and not list(tmp_path.parent.glob("PWNED"))


@pytest.mark.parametrize("kind", list(CODEGENS))
def test_injection_names_run_standalone(kind, tmp_path):
    graph, weights = _evil_graph(EVIL[0])
    codegen, run = CODEGENS[kind]
    model = codegen(graph, weights, build_folder=tmp_path)
    x = RNG.random((2, 3), dtype="float32")
    save_baseline(tmp_path, [x], run(model, [x]))
    result = run_script(next(tmp_path.glob("*.py")), cwd=tmp_path)
    assert result.returncode == 0 and result.stdout.splitlines()[-1] == "PASS", result.stderr
    assert not (tmp_path / "PWNED").exists()
