"""Hostile names from an ONNX model (issue #20) through from_onnx -> codegen -> the standalone
script: whatever the graph, input, initializer, node and tensor names say (quotes, newlines,
``__import__``, keywords, confusables, empty, duplicate, very long), the generated script runs,
compares PASS against its baseline, and nothing in a name is executed (no canary file)."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from msc.codegen import save_baseline, to_relax, to_torch
from msc.frontends.onnx.api import from_onnx
from tests.helpers.codegen import relax_build_and_run, ruff_check, run_script, torch_run

CODEGENS = {"torch": (to_torch, torch_run), "relax": (to_relax, relax_build_and_run)}
CANARY = "PWNED"
HOSTILE = [
    "__import__('os').system('touch PWNED')",
    '"); import os; os.system("touch PWNED") #',
    "x'''\nopen('PWNED', 'w')\n'''",
    'a"""\n__import__("pathlib").Path("PWNED").touch()\n"""',
    "\\\n__import__('os').system('touch PWNED')",
    "class", "lambda", "None", "self", "torch", "np", "main", "_", "__init__",
    "\u0430dd",  # Cyrillic 'а': reads as "add"
    "r\u00e9sum\u00e9\u2028\u00a0x", "\u0000nul", "",
    "x" * 3000,
]
W = np.arange(12, dtype="float32").reshape(3, 4) / 10
B = np.arange(4, dtype="float32")


def hostile_model(name: str, other: str):
    """x -> MatMul(w) -> Add(b) -> Relu, twice the same ``name`` where ONNX allows it."""
    tensors = [name, other, name + "1", name + "2", name + ":0"]
    inp, w, mm, add, out = tensors
    nodes = [helper.make_node("MatMul", [inp, w], [mm], name=name),
             helper.make_node("Add", [mm, other + "b"], [add], name=name),  # duplicate name
             helper.make_node("Relu", [add], [out], name=other)]
    inits = [numpy_helper.from_array(W, w), numpy_helper.from_array(B, other + "b")]
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info(inp, 1, [2, 3])],
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, [2, 4])],
                              initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


# Names whose generated script also runs standalone in a subprocess (~1.5 s each): the
# injections, the empty and the long name. Every name's code runs in process (the codegen
# loads the script it wrote), which executes any payload as well; the canary checks both.
STANDALONE = {0, 1, 2, 3, 4, 17, 18}


def _cases():
    for i, name in enumerate(HOSTILE):
        other = HOSTILE[(i + 1) % len(HOSTILE)] or "w"
        if other == name:
            other = name + "_w"
        yield pytest.param(name, other, i in STANDALONE, id=f"name{i}")


@pytest.mark.parametrize("kind", list(CODEGENS))
@pytest.mark.parametrize(("name", "other", "standalone"), list(_cases()))
def test_hostile_onnx_names_generate_safe_running_code(kind, name, other, standalone,
                                                       tmp_path):
    if not name:  # ONNX input names cannot be empty ("" means "no input")
        name = "\n"
    work = tmp_path / "work"
    build = work / "build"
    work.mkdir()
    graph, weights = from_onnx(hostile_model(name, other))
    codegen, run = CODEGENS[kind]
    model = codegen(graph, weights, build_folder=build)
    x = np.linspace(-1, 1, 6, dtype="float32").reshape(2, 3)
    want = np.maximum(x @ W + B, 0)
    np.testing.assert_allclose(run(model, [x])[0], want, rtol=1e-5, atol=1e-6)
    scripts = list(build.glob("*.py"))
    assert len(scripts) == 1 and ruff_check(scripts[0]) == ""
    if standalone:
        save_baseline(build, [x], [want])
        result = run_script(scripts[0], cwd=build)
        assert result.returncode == 0, result.stdout + result.stderr
        assert result.stdout.splitlines()[-1] == "PASS"
    assert not [p for p in tmp_path.rglob("*") if p.name == CANARY]
    assert all(p.is_relative_to(build) for p in tmp_path.rglob("*") if p not in (work, build))
