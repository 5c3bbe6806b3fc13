"""`msc bench --against-ort`: msc's profile joined with onnxruntime's by ONNX node. No
timing is asserted: the join's structure is (every ONNX node and every profiled onnxruntime
node in exactly one row, times summed without loss, rows sorted by what msc loses)."""

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
import onnx
from onnx import TensorProto, helper, numpy_helper

from msc import relax
from msc.cli.main import main
from msc.cli.profile_join import against_ort, format_rows, ort_fusion
from msc.codegen import to_relax
from msc.frontends.translate import from_onnx


def _model(path) -> str:
    """Conv -> Relu (onnxruntime fuses them), a shape chain it folds (Shape -> Gather ->
    Unsqueeze -> Concat -> Reshape), MatMul + Add, Sigmoid; some nodes unnamed."""
    rng = np.random.default_rng(0)

    def init(name, *shape):
        return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32) * 0.3, name)

    inits = [init("w", 8, 3, 3, 3), init("b", 8), init("fc", 8 * 36, 10), init("fcb", 10),
             numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array([-1], np.int64), "rest")]
    make = helper.make_node
    nodes = [make("Conv", ["x", "w", "b"], ["c"], name="conv"),
             make("Relu", ["c"], ["r"], name="relu"),
             make("Shape", ["r"], ["s"], name="shape"),
             make("Gather", ["s", "zero"], ["n"], axis=0, name="gather"),
             make("Unsqueeze", ["n", "zero"], ["n1"], name="unsqueeze"),
             make("Concat", ["n1", "rest"], ["dims"], axis=0),
             make("Reshape", ["r", "dims"], ["f"], name="reshape"),
             make("MatMul", ["f", "fc"], ["m"], name="matmul"),
             make("Add", ["m", "fcb"], ["a"]),
             make("Sigmoid", ["a"], ["y"], name="sigmoid")]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(model, str(path))
    return str(path)


@pytest.fixture(scope="module")
def joined(tmp_path_factory):
    folder = tmp_path_factory.mktemp("join")
    path = _model(folder / "m.onnx")
    graph, weights = from_onnx(path)
    ex = relax.build(to_relax(graph, weights, build_folder=str(folder / "build")))
    x = np.random.default_rng(1).standard_normal((2, 3, 8, 8), dtype=np.float32)
    report = relax.VirtualMachine(ex, relax.cpu(), num_threads=1).profile(x, number=2)
    original = onnx.load(path)
    rows = against_ort(path, original, graph, report, {"x": x}, threads=1, runs=2)
    return path, original, report, rows


def test_every_onnx_node_and_every_ort_node_in_exactly_one_row(joined):
    _, original, report, rows = joined
    keys = [n.name or n.output[0] for n in original.graph.node]
    assert sorted(k for r in rows for k in r.nodes) == sorted(keys)
    ort_nodes = [n for r in rows for n in r.ort_nodes]
    assert len(ort_nodes) == len(set(ort_nodes)) and ort_nodes
    # every msc row is somewhere, and its time is kept
    assert sorted(n for r in rows for n in r.msc_rows) == sorted(r.joint for r in report.rows)
    assert sum(r.msc_ms for r in rows) == pytest.approx(report.total * 1e3, rel=1e-6)
    # onnxruntime folds the shape chain: those nodes are named as fused, in the Reshape's group
    folded = {"shape", "gather", "unsqueeze", "dims"}
    by_node = {k: r for r in rows for k in r.nodes}
    assert folded <= {k for r in rows for k in r.fused}
    assert len({id(by_node[k]) for k in folded | {"reshape"}}) == 1
    # both runtimes fuse the relu into the conv: one row
    assert by_node["conv"] is by_node["relu"] and by_node["conv"].ort_ms > 0
    assert [r.lost_ms for r in rows] == sorted((r.lost_ms for r in rows), reverse=True)


def test_ort_fusion_reads_names_and_outputs():
    make = helper.make_node
    original = helper.make_model(helper.make_graph(
        [make("Conv", ["x", "w"], ["c"], name="conv"), make("Relu", ["c"], ["r"]),
         make("Sigmoid", ["r"], ["y"], name="sig")], "g", [], []))
    optimized = helper.make_model(helper.make_graph(
        [make("FusedConv", ["x", "w"], ["r"], name="conv_fused"),
         make("ReorderInput", ["r"], ["r_nchwc"], name="reorder"),
         make("Sigmoid", ["r_nchwc"], ["y"], name="sig")], "g", [], []))
    # by its name less onnxruntime's suffix and by output (the Relu, unnamed, is known by
    # its output), by input, by name
    assert ort_fusion(original, optimized) == {"conv_fused": ["conv", "r"], "reorder": ["r"],
                                               "sig": ["sig"]}
    renamed = helper.make_model(helper.make_graph(  # named after the output it replaced
        [make("FusedConv", ["x", "w"], ["r_nchwc"], name="r_nchwc")], "g", [], []))
    assert ort_fusion(original, renamed) == {"r_nchwc": ["r"]}


def test_bench_against_ort_prints_the_joined_table(joined, capsys):
    path = joined[0]
    assert main(["bench", path, "--threads", "1", "--repeat", "2", "--min-time", "0",
                 "--against-ort"]) == 0
    text = capsys.readouterr().out
    table = text[text.index("beside onnxruntime"):].splitlines()
    assert table[1].split()[:5] == ["ONNX", "nodes", "msc", "ms", "ORT"]
    assert table[-1].startswith("total")
    assert format_rows(joined[3]).splitlines()[-1].startswith("total")


def test_against_ort_refuses_a_model_that_is_not_onnx(tmp_path, capsys):
    from tests.helpers.cli_models import torch_file

    assert main(["bench", f"{torch_file(tmp_path)}:make_cnn", "--input-info", "x:1,3,8,8",
                 "--against-ort"]) != 0
    assert "--against-ort profiles onnxruntime on the ONNX file" in capsys.readouterr().err
