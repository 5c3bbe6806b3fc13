"""Resource limits (issue #20): a model declaring ten million joints or a 10^12-element tensor
is refused before the work or the memory is spent, with a ResourceLimitError (or the reader's
own msc error) that names the model part and says how to raise the limit (msc.limits)."""

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from msc import relax
from msc.errors import ResourceLimitError, RuntimeCallError, ValidationError
from msc.frontends.onnx.api import from_onnx
from msc.frontends.translate import from_relax
from msc.graph import MSCGraph
from msc.limits import DEFAULT_MAX_JOINTS, joint_limit, max_joints
from tests.test_long_chain import chain_model

ROOT = Path(__file__).resolve().parents[1]


def _info(name, elem, dims):
    return helper.make_tensor_value_info(name, elem, dims)


def _model(nodes, inputs, outputs, inits=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs,
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return model


def _add_body(name, state="s"):
    """A Loop body: cond passes through, state + 1."""
    return helper.make_graph(
        [helper.make_node("Identity", [f"{name}_c"], [f"{name}_co"]),
         helper.make_node("Add", [f"{name}_{state}", "one"], [f"{name}_so"])], name,
        [_info(f"{name}_i", T.INT64, []), _info(f"{name}_c", T.BOOL, []),
         _info(f"{name}_{state}", T.FLOAT, [1])],
        [_info(f"{name}_co", T.BOOL, []), _info(f"{name}_so", T.FLOAT, [1])])


def nested_loops(trips: int):
    """Loop(trips) around Loop(trips) around an Add: trips^2 unrolled steps in 300 bytes."""
    inner = helper.make_node("Loop", ["M", "", "o_s"], ["o_so"], name="inner",
                             body=_add_body("in"))
    outer_body = _add_body("o")
    outer_body.node[1].CopyFrom(inner)
    outer = helper.make_node("Loop", ["M", "", "x"], ["y"], name="outer", body=outer_body)
    return _model([outer], [_info("x", T.FLOAT, [1])], [_info("y", T.FLOAT, [1])],
                  [("M", np.array(trips, "int64")), ("one", np.ones(1, "float32"))])


def test_ten_million_joint_loop_nest_is_refused_before_unrolling():
    start = time.perf_counter()
    with pytest.raises(ResourceLimitError) as info:
        from_onnx(nested_loops(4096))  # 4096 * (2 + 4096 * 2) = 33,562,624 joints
    assert time.perf_counter() - start < 5  # refused up front, not after a million joints
    text = str(info.value)
    assert "node 'outer'" in text and "33562624 joints" in text and "MSC_MAX_JOINTS" in text


def test_scan_over_ten_million_steps_is_refused():
    body = helper.make_graph([helper.make_node("Add", ["st", "xt"], ["so"]),
                              helper.make_node("Identity", ["so"], ["yo"])], "body",
                             [_info("st", T.FLOAT, [1]), _info("xt", T.FLOAT, [1])],
                             [_info("so", T.FLOAT, [1]), _info("yo", T.FLOAT, [1])])
    scan = helper.make_node("Scan", ["s0", "xs"], ["s", "ys"], name="scan", body=body,
                            num_scan_inputs=1)
    model = _model([scan], [_info("s0", T.FLOAT, [1]), _info("xs", T.FLOAT, [10 ** 7, 1])],
                   [_info("s", T.FLOAT, [1]), _info("ys", T.FLOAT, None)])
    with pytest.raises(ResourceLimitError, match=r"node 'scan'.*10000000 steps of 2 joints"):
        from_onnx(model, as_msc=False)


def test_the_limit_can_be_raised_for_a_block():
    model = nested_loops(40)  # 40 * (2 + 80) = 3,280 joints
    with joint_limit(1000), pytest.raises(ResourceLimitError, match="limit of 1000"):
        from_onnx(model, as_msc=False)
    with joint_limit(5000):
        mod, _ = from_onnx(model, as_msc=False)
    out = relax.VirtualMachine(relax.build(mod, target="llvm"), relax.cpu())["main"](
        np.zeros(1, "float32"))
    np.testing.assert_array_equal(out.numpy(), [1600.0])  # 40 * 40 additions of one
    assert max_joints() == DEFAULT_MAX_JOINTS


def test_a_graph_json_over_the_limit_is_refused_before_building(monkeypatch):
    graph, _ = from_onnx(chain_model(60))
    text = graph.to_json()
    monkeypatch.setenv("MSC_MAX_JOINTS", "50")
    with pytest.raises(ResourceLimitError, match=r"node list would make 61 joints.*limit of 50"):
        MSCGraph.from_json(text)
    with pytest.raises(ResourceLimitError, match="limit of 50"):
        from_onnx(chain_model(60))  # the ONNX graph itself, and the Relax bindings
    monkeypatch.setenv("MSC_MAX_JOINTS", "100")
    assert len(list(MSCGraph.from_json(text).get_nodes())) == 61


@pytest.mark.parametrize("value", ["0", "-3", "lots", "1e6"])
def test_a_bad_limit_setting_is_named(monkeypatch, value):
    monkeypatch.setenv("MSC_MAX_JOINTS", value)
    with pytest.raises(ResourceLimitError, match=f"MSC_MAX_JOINTS={value!r}"):
        max_joints()


def test_relax_bindings_over_the_limit_are_refused():
    mod, _ = from_onnx(chain_model(30), as_msc=False)
    with joint_limit(20), pytest.raises(ResourceLimitError,
                                        match="from the Relax function would make"):
        from_relax(mod)


# --------------------------------------------------------------------------------------------
# 10^12-element tensors: never allocated.

HUGE = np.array([10 ** 6, 10 ** 6], "int64")


def test_huge_initializer_dims_are_refused():
    tensor = numpy_helper.from_array(np.ones(4, "float32"), "w")
    tensor.dims[:] = [10 ** 6, 10 ** 6]
    model = _model([helper.make_node("Identity", ["w"], ["y"])], [], [_info("y", T.FLOAT, None)])
    model.graph.initializer.append(tensor)
    with pytest.raises(ValidationError, match=r"tensor 'w'.*1000000000000 elements"):
        from_onnx(model, as_msc=False)


CHILD = """
import resource, sys, warnings
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))  # a 4 TB allocation would fail
import onnx
from msc.frontends.onnx.api import from_onnx
warnings.simplefilter("error")  # FoldConstant must not even try to fold it
for path in sys.argv[1:]:
    graph, weights = from_onnx(onnx.load(path))
    print(len(list(graph.get_nodes())), sum(w.size for w in weights.values()))
"""
OPS = ("ConstantOfShape", "Expand", "Tile")


def test_a_constant_of_ten_to_the_twelve_is_not_folded(tmp_path):
    """Folding would allocate 4 TB: the call stays in the graph (run time decides)."""
    one = numpy_helper.from_array(np.array([1.0], "float32"))
    nodes = {"ConstantOfShape": helper.make_node("ConstantOfShape", ["s"], ["y"], value=one),
             "Expand": helper.make_node("Expand", ["c", "s"], ["y"]),
             "Tile": helper.make_node("Tile", ["c", "s"], ["y"])}
    paths = []
    for op in OPS:
        model = _model([nodes[op]], [], [_info("y", T.FLOAT, None)],
                       [("s", HUGE), ("c", np.ones((1, 1), "float32"))])
        paths.append(str(tmp_path / f"{op}.onnx"))
        onnx.save_model(model, paths[-1])
    proc = subprocess.run([sys.executable, "-c", CHILD, *paths], cwd=ROOT, timeout=120,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-1500:]
    rows = [line.split() for line in proc.stdout.splitlines()]
    assert len(rows) == len(OPS)
    for op, (joints, weight_size) in zip(OPS, rows):
        assert int(joints) >= 2 and int(weight_size) < 10, (op, joints, weight_size)  # no data


def test_running_a_ten_to_the_twelve_tensor_is_a_clean_error():
    script = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1000000, 1), "float32")):
        with R.dataflow():
            y = R.broadcast_to(x, R.shape([1000000, 1000000]))
            R.output(y)
        return y
"""
    vm = relax.VirtualMachine(relax.build(relax.from_script(script), target="llvm"),
                              relax.cpu())
    with pytest.raises(RuntimeCallError, match="3.64 TiB"):
        vm["main"](np.ones((10 ** 6, 1), "float32"))
