"""The MLC course's lessons as written for TVM in 2022, run with ``import msc as tvm``.

examples/lessons/ holds each lesson's code cells unchanged apart from the import lines (and
the cells that download data, unpickle weights or draw plots, marked ``msc:``). Each test runs
one lesson end to end and checks its results against numpy; the lesson's own asserts run too.
"""

import re

import numpy as np
import pytest

import msc as tvm
from msc import errors, te
from msc import meta_schedule as ms
from tests.helpers.lessons import LessonError, cells, run_lesson


def _predictions(out: str) -> dict:
    return dict(re.findall(r"^(\S[^\n:]*) Prediction: (.+)$", out, re.MULTILINE))


def test_tensorir_lesson(tmp_path, capsys):
    ns = run_lesson("tensorir", tmp_path)
    np.testing.assert_allclose(ns["c_nd"].numpy(), ns["c_mm_relu"], rtol=1e-5)
    assert isinstance(ns["MyModule"], tvm.IRModule)
    out = capsys.readouterr().out
    assert re.search(r"Time cost of transformed sch.mod \d", out)
    assert "for k, j_1 in T.grid(128, 4):" in out  # the reorder, printed as the lesson shows
    # the te description compiles to the same function
    kernel = tvm.build(ns["MyModuleFromTE"], target="llvm")["mm_relu"]
    c = np.zeros((128, 128), "float32")
    kernel(ns["a_np"], ns["b_np"], c)
    np.testing.assert_allclose(c, ns["c_mm_relu"], rtol=1e-5)


def test_end_to_end_lesson(tmp_path, capsys):
    ns = run_lesson("end_to_end", tmp_path)
    preds = _predictions(capsys.readouterr().out)
    assert set(preds) == {"NumPy-MLP", "Low-level Numpy MLP", "Low-level Numpy with CallTIR",
                          "MyModule", "MyModuleWithExternCall", "MyModuleMixture",
                          "MyModuleWithParams"}
    assert len(set(preds.values())) == 1, preds
    p = ns["mlp_params"]
    expected = ns["numpy_mlp"](ns["img"].reshape(1, 784), p["w0"], p["b0"], p["w1"], p["b1"])
    np.testing.assert_allclose(ns["nd_res"].numpy(), expected, rtol=1e-4, atol=1e-5)


def test_auto_optimization_lesson(tmp_path, capsys):
    ns = run_lesson("auto_optimization", tmp_path)
    out = capsys.readouterr().out
    preds = _predictions(out)
    assert set(preds) == {"MyModuleWithParams", "MyModuleWithParams2"}
    assert len(set(preds.values())) == 1, preds
    assert len(re.findall(r"Time cost of MyModule after tuning: \d", out)) == 2
    # the tuned matmul computes the matmul, and its trace replays the lesson's own space
    sch = ns["sch_tuned"]
    c = np.zeros((128, 128), "float32")
    tvm.build(sch.mod, target="llvm")["main"](ns["a_np"], ns["b_np"], c)
    np.testing.assert_allclose(c, ns["c_mm"], rtol=1e-4)
    assert (tmp_path / "tune_tmp").is_dir()
    p = ns["mlp_params"]  # the MLP with the tuned linear0 swapped in, against numpy
    hidden = np.maximum(ns["img"].reshape(1, 784) @ p["w0"].T + p["b0"], 0)
    np.testing.assert_allclose(ns["vm"]["main"](ns["data_nd"]).numpy(),
                               hidden @ p["w1"].T + p["b1"], rtol=1e-4, atol=1e-5)


def test_a_failing_cell_is_named(tmp_path, monkeypatch):
    lesson = tmp_path / "broken.py"
    lesson.write_text("# %%\nimport msc as tvm\n\n# %%\ntvm.no_such_thing\n")
    monkeypatch.setattr("tests.helpers.lessons.LESSONS", tmp_path)
    assert [line for line, _ in cells(lesson)] == [1, 4]
    with pytest.raises(LessonError, match="the cell at line 4 failed: AttributeError"):
        run_lesson("broken", tmp_path)


# ------------------------------------------------------------------ the old spellings alone

def test_tvm_build_refuses_a_relax_only_module():
    from msc.script import relax as R

    @tvm.script.ir_module
    class Only:
        @R.function
        def main(x: R.Tensor((2,), "float32")):
            return x

    with pytest.raises(errors.BuildError, match="relax.build"):
        tvm.build(Only, target="llvm")
    with pytest.raises(errors.BuildError, match="host CPU"):
        tvm.build(Only, target="cuda")


def test_tune_tir_needs_a_budget(tmp_path):
    func = _matmul_func()
    with pytest.raises(errors.ValidationError, match="max_trials_global"):
        ms.tune_tir(mod=func, target="llvm", work_dir=str(tmp_path))
    with pytest.raises(errors.ValidationError, match="ScheduleFn"):
        ms.space_generator.ScheduleFn(42)


def test_te_errors_name_the_tensor():
    a = te.placeholder((4,), "float32", name="A")
    b = te.compute((4,), lambda i: a[i] * 2, name="B")
    with pytest.raises(errors.ValidationError, match="placeholder 'A' is read but not in"):
        te.create_prim_func([b])
    with pytest.raises(errors.ValidationError, match="outside te.compute"):
        a[0]
    with pytest.raises(errors.ValidationError, match="starts at 1"):
        te.reduce_axis((1, 4), "k")


def test_te_reductions_and_elementwise_match_numpy():
    a = te.placeholder((6, 5), "float32", name="A")
    k = te.reduce_axis((0, 5), "k")
    row_max = te.compute((6,), lambda i: te.max(a[i, k], axis=k), name="row_max")
    shifted = te.compute((6, 5), lambda i, j: te.min(a[i, j] - row_max[i], -0.5), name="out")
    kernel = tvm.build(te.create_prim_func([a, shifted]))["main"]
    x = np.random.default_rng(0).standard_normal((6, 5), dtype="float32")
    out = np.empty_like(x)
    kernel(tvm.nd.array(x), out)
    np.testing.assert_allclose(out, np.minimum(x - x.max(1, keepdims=True), -0.5), rtol=1e-6)


def test_runtime_module_time_evaluator_and_dlpack_outputs():
    import torch

    lib = tvm.build(_matmul_func(), target="llvm")
    a = torch.rand(16, 16)
    c = tvm.nd.empty((16, 16), "float32")
    lib["main"](a, a, c)  # a torch input through DLPack, an NDArray output written in place
    np.testing.assert_allclose(c.numpy(), (a @ a).numpy(), rtol=1e-5)
    result = lib.time_evaluator("main", tvm.cpu(), number=3, repeat=2)(a, a, c)
    assert len(result.results) == 2 and result.mean > 0
    with pytest.raises(errors.ValidationError, match="no function 'nope'"):
        lib["nope"]


def _matmul_func():
    a = te.placeholder((16, 16), "float32", name="A")
    b = te.placeholder((16, 16), "float32", name="B")
    k = te.reduce_axis((0, 16), "k")
    c = te.compute((16, 16), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return te.create_prim_func([a, b, c])
