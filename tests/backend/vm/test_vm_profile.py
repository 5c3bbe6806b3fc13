"""vm.profile: per-joint time, calls and share; native chains timed kernel by kernel; keys that
land on the joints of a from_onnx graph; the overlay JSON the viewer reads."""

import json

import numpy as np
import pytest

from msc import relax
from msc.backend.runtime.profile import ProfileReport, ProfileRow, instruction_names
from msc.codegen import to_relax
from msc.errors import ValidationError
from msc.frontends import translate
from msc.relax import op as R
from msc.viewer import write_html
from msc.viewer.overlay import load_overlay
from tests.helpers.cli_models import cnn_onnx
from tests.helpers.relax_modules import one_function_module as _module
from tests.helpers.relax_modules import tensor as _tensor

RNG = np.random.default_rng(0)
UNARY = ("exp", "tanh", "negative", "sigmoid")  # TIR kernels: one native chain when run


def _chain_module(n: int = 8):
    x = relax.Var("x", _tensor((4, 8)))

    def body(bb, x):
        h = x
        for i in range(n):
            h = bb.emit(getattr(R, UNARY[i % 4])(h), f"step{i}")
        return h
    return _module([x], body)


def _numpy_chain(x, n: int = 8):
    funcs = {"exp": np.exp, "tanh": np.tanh, "negative": np.negative,
             "sigmoid": lambda v: 1 / (1 + np.exp(-v))}
    for i in range(n):
        x = funcs[UNARY[i % 4]](x)
    return x


@pytest.fixture(scope="module")
def onnx_model(tmp_path_factory):
    folder = tmp_path_factory.mktemp("profile")
    path = cnn_onnx(folder / "cnn.onnx")
    graph, weights = translate.from_onnx(path)
    ex = relax.build(to_relax(graph, weights, build_folder=folder / "relax"))
    return graph, relax.VirtualMachine(ex), folder


def test_chain_kernels_are_timed_one_by_one():
    ex = relax.build(_chain_module(), legalize="prefer")
    vm = relax.VirtualMachine(ex)
    x = RNG.standard_normal((4, 8)).astype("float32")
    out = vm["main"](x).numpy()
    normal = vm["main"].entry({}).plan
    assert normal.stats["chains"] == 1 and "CLOCK" not in normal.runner.source
    report = vm.profile(x, number=3)
    assert [r.joint for r in sorted(report.rows, key=lambda r: r.joint)] == [
        f"step{i}" for i in range(8)]
    assert all(r.seconds > 0 and r.calls == 3 for r in report.rows)
    assert sum(r.share for r in report.rows) == pytest.approx(1.0)
    assert report.total == pytest.approx(sum(r.seconds for r in report.rows))
    profiled = vm["main"].profiled_entry({}).plan
    assert profiled.stats["chains"] == 8  # each kernel its own native call
    np.testing.assert_allclose(out, _numpy_chain(x), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(vm["main"](x).numpy(), out)  # normal plan still right


def test_profile_keys_are_the_onnx_graphs_joints(onnx_model):
    graph, vm, _ = onnx_model
    x = RNG.standard_normal((2, 3, 8, 8)).astype("float32")
    report = vm.profile(x, number=2)
    keys = set(report.to_dict())
    fused = {f for r in report.rows for f in r.fused}
    computed = set(graph.node_names) - {"x"}
    assert keys <= computed and keys | fused == computed and not keys & fused
    assert set(report.to_dict(graph.node_names)) == keys
    plan = vm["main"].profiled_entry({"N": 2}).plan
    plan_joints = {name for name, _ in instruction_names(vm["main"], plan)}
    assert keys == plan_joints
    assert sum(report.to_dict().values()) == pytest.approx(report.total * 1e3)
    assert [c["Name"] for c in report.calls] == [r.joint for r in report.rows]  # TVM's
    assert report.csv().splitlines()[1].startswith(report.rows[0].joint + ",")
    table = report.table()
    first = table.splitlines()[1].split()[0]
    assert first == report.rows[0].joint and "vm (args, plan, results)" in table


def test_overlay_json_is_read_by_the_viewer(onnx_model, tmp_path):
    graph, vm, _ = onnx_model
    report = vm.profile("main", RNG.standard_normal((1, 3, 8, 8)).astype("float32"))  # TVM
    path = tmp_path / "profile.json"
    path.write_text(report.json(graph.node_names))
    overlay = load_overlay(str(path), graph.node_names)
    assert overlay.values == pytest.approx(json.loads(path.read_text()))
    hot = report.rows[0].joint
    assert overlay.color(hot) is not None and overlay.color("x") is None
    write_html(graph, None, str(tmp_path / "view.html"), overlay)
    assert hot in (tmp_path / "view.html").read_text()


def test_joint_names_map_identifier_spellings():
    report = ProfileReport("main", [ProfileRow("batch_norm_0", 2e-3), ProfileRow("lv", 1e-3)],
                           1, 4e-3)
    assert report.to_dict(["batch_norm.0", "relu"]) == {"batch_norm.0": pytest.approx(2.0)}
    assert report.vm_seconds == pytest.approx(1e-3)


@pytest.mark.parametrize("number", [0, -1, 1.5, True])
def test_bad_run_count_is_refused(number):
    vm = relax.VirtualMachine(relax.build(_chain_module(2)))
    with pytest.raises(ValidationError, match="number"):
        vm.profile(np.zeros((4, 8), "float32"), number=number)
