"""Joint scopes: the model's own module hierarchy, kept by every frontend (issue #29 goal 1).

Real models (transformers ViT and ResNet from small configs, random weights) go through
from_torch and through torch's two ONNX exporters into from_onnx; each joint's scope must
name a module the model really has, the frontends must agree, and the viewer's group tree,
the JSON, the prototxt and the Model Explorer export must carry it. MSC names and optypes do
not change (the frontend suites check them against MSC's).
"""

import io
import os
import warnings

import numpy as np
import onnx
import pytest
import torch
from torch import nn

from msc import MSCGraph, relax
from msc.errors import ValidationError
from msc.frontends import translate
from msc.frontends.scopes import module_scope, name_scope, namespace_scope
from msc.viewer.groups import Group, group_joints
from msc.viewer.model_explorer import graph_collection
from msc.viewer.scene import Scene
from tests.helpers.corpus import MODELS

LIGHT_RESNET50 = os.path.join(os.path.dirname(onnx.__file__),
                              "backend/test/data/light/light_resnet50.onnx")
NO_MODULE = ([], ["block"])  # graph inputs and constants; ops outside every module


@pytest.mark.parametrize("paths, scope", [
    (["", "layer1", "layer1.0", "layer1.0.conv1"], ["layer1", "layer1.0", "conv1"]),
    (["vit", "vit.encoder", "vit.encoder.layer.0", "vit.encoder.layer.0.attention"],
     ["vit", "encoder", "layer.0", "attention"]),
    (["a", "a", "a.b"], ["a", "b"]),  # a module calling itself again adds no level
    ([""], []),
])
def test_module_scope(paths, scope):
    assert module_scope(paths) == scope


@pytest.mark.parametrize("name, scope", [
    ("/layer1/layer1.0/conv1/Conv", ["layer1", "layer1.0", "conv1"]),
    ("/Add", []), ("conv2d_3", []), ("", []), ("node_Conv_0", []),
])
def test_name_scope(name, scope):
    assert name_scope(name) == scope


def test_namespace_scope():
    text = (": __main__.M/layer1: torch.nn.modules.container.Sequential/layer1.0: __main__.B/"
            "layer1.0.bn: torch.nn.modules.batchnorm.BatchNorm2d/relu: aten.relu.default")
    assert namespace_scope(text) == ["layer1", "layer1.0", "bn"]
    assert namespace_scope(": __main__.M/add: aten.add.Tensor") == []


def test_block_builder_span_nests_and_restores():
    x = relax.Var("x", relax.TensorStructInfo((1, 4), "float32"))
    bb = relax.BlockBuilder()
    outer, inner = relax.Span("a", ("enc",)), relax.Span("b", ("enc", "mlp"))
    with bb.function("main", [x]):
        with bb.dataflow():
            with bb.span(outer):
                a = bb.emit(relax.op.nn.relu(x))
                with bb.span(inner):
                    b = bb.emit(relax.op.add(a, a))
                c = bb.emit(relax.op.multiply(b, b))
            d = bb.emit_output(relax.op.exp(c))
        bb.emit_func_output(d)
    assert (a.span, b.span, c.span, d.span) == (outer, inner, outer, None)


def test_from_relax_reads_msc_scopes_attr():
    text = '''
@R.function
def main(x: R.Tensor((1, 8), "float32")) -> R.Tensor((1, 8), "float32"):
    R.func_attr({"msc_scopes": {"lv": "encoder/layer.0/mlp", "lv1": ["encoder", "layer.0"]}})
    with R.dataflow():
        lv = R.nn.relu(x)
        lv1 = R.add(lv, lv)
        gv = R.multiply(lv1, lv1)
        R.output(gv)
    return gv
'''
    graph, _ = translate.from_relax(text)
    scopes = {n.name: n.scope for n in graph.get_nodes()}
    assert scopes == {"x": [], "relu": ["encoder", "layer.0", "mlp"],
                      "add": ["encoder", "layer.0"], "multiply": ["block"]}


def test_light_resnet50_has_no_paths_and_groups_by_cuts():
    """The light zoo's resnet50 (onnx-caffe2) names no node: no module scope, cut blocks."""
    graph, _ = translate.from_onnx(LIGHT_RESNET50)
    nodes = list(graph.get_nodes())
    assert {tuple(n.scope) for n in nodes} <= {(), ("block",)}
    root = Scene.of(graph).root
    assert len(root.items) == 17 and all(isinstance(i, Group) and i.block for i in root.items)


# --------------------------------------------------------------------------------------------
# Real models.

def _qualname(scope: list) -> str:
    """The module's qualified name back from its scope (``layer``, ``layer.0`` -> ``layer.0``)."""
    parts: list = []
    for seg in scope:
        head, _, index = seg.rpartition(".")
        parts.append(index if parts and parts[-1] == head and index.isdigit() else seg)
    return ".".join(parts)


def _onnx(model, inputs, dynamo: bool) -> bytes:
    buffer, extra = io.BytesIO(), {"external_data": False} if dynamo else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, tuple(torch.from_numpy(x) for x in inputs), buffer,
                          dynamo=dynamo, **extra)
    return buffer.getvalue()


@pytest.fixture(scope="module", params=["vit", "resnet"])
def imported(request):
    """A model and its graphs: from_torch (export) and from_onnx of both ONNX exporters."""
    model, info, inputs = MODELS[request.param]()
    graphs = {"export": translate.from_torch(model, info, via="export")[0],
              "onnx": translate.from_onnx(_onnx(model, inputs, dynamo=False))[0],
              "onnx_dynamo": translate.from_onnx(_onnx(model, inputs, dynamo=True))[0]}
    return request.param, model, graphs


def test_scopes_name_the_model_modules(imported):
    _, model, graphs = imported
    modules = dict(model.named_modules())
    for path, graph in graphs.items():
        scopes = [n.scope for n in graph.get_nodes() if n.scope not in NO_MODULE]
        assert len(scopes) > 0.8 * len(list(graph.get_nodes())), path
        assert [s for s in scopes if _qualname(s) not in modules] == [], path


def _weighted_scopes(graph, optypes) -> list:
    return sorted(tuple(n.scope) for n in graph.get_nodes() if n.optype in optypes)


def test_frontends_agree_on_the_scopes(imported):
    name, _, graphs = imported
    if name == "vit":  # every linear, conv and norm joint in the same module on each path
        ops = {"msc.linear_bias", "msc.conv2d_bias", "nn.layer_norm"}
        ref = _weighted_scopes(graphs["export"], ops)
        assert len(ref) == 18 and ("model", "layers.1", "attention", "q_proj") in ref
        assert _weighted_scopes(graphs["onnx"], ops) == ref
        assert _weighted_scopes(graphs["onnx_dynamo"], ops) == ref
    else:  # the TorchScript exporter folds each BatchNorm into its conv, keeping the conv's
        ref = _weighted_scopes(graphs["export"], {"nn.conv2d"})
        assert len(ref) == 8 and ref[0][-1] == "convolution"
        assert _weighted_scopes(graphs["onnx"], {"msc.conv2d_bias"}) == ref


def _labels(root: Group) -> set:
    return {part for g in root.walk() for part in g.label.split("/")}


def test_viewer_groups_by_modules(imported):
    name, _, graphs = imported
    expected = {"vit": {"embeddings", "layers.0", "layers.1", "attention", "mlp"},
                "resnet": {"embedder", "encoder", "stages.0", "stages.1", "layer.0"}}[name]
    for path, graph in graphs.items():
        nodes = list(graph.get_nodes())
        edges = [(p.index, n.index) for n in nodes for p in n.parents]
        root = group_joints([n.name for n in nodes], edges, [n.scope for n in nodes])
        assert expected <= _labels(root), path
        assert not any(g.block for g in root.walk()), path  # small models: no cut needed


def test_scopes_round_trip_json_text_and_model_explorer(imported):
    name, _, graphs = imported
    graph = graphs["onnx"]
    again = MSCGraph.from_json(graph.to_json())
    assert [n.scope for n in again.get_nodes()] == [n.scope for n in graph.get_nodes()]
    assert [n.name for n in again.get_nodes()] == [n.name for n in graph.get_nodes()]
    scopes = {".".join(n.scope) for n in graph.get_nodes() if n.scope not in NO_MODULE}
    lines = {line.strip()[len("SCOPE: "):] for line in str(graph).splitlines()
             if line.strip().startswith("SCOPE: ")}
    assert scopes <= lines
    namespaces = {n["namespace"] for n in graph_collection(Scene.of(graph))["graphs"][0]["nodes"]}
    module = {"vit": "attention", "resnet": "layer.1"}[name]
    assert any(module in ns.split("/") for ns in namespaces)


class _Block(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.bn = nn.BatchNorm2d(channels)

    def forward(self, x):
        return torch.relu(self.bn(self.conv1(x))) + x


def test_fx_and_export_give_the_same_scopes():
    """fx (module qualnames of call_module nodes, the tracer's module stack) and
    torch.export (nn_module_stack) give each joint the same module path."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 1), nn.Sequential(_Block(8), _Block(8))).eval()
    info = [([1, 3, 8, 8], "float32")]
    fx, _ = translate.from_torch(model, info, via="fx")
    ex, _ = translate.from_torch(model, info, via="export")
    scopes = [(n.name, n.optype, n.scope) for n in fx.get_nodes()]
    assert scopes == [(n.name, n.optype, n.scope) for n in ex.get_nodes()]
    by_name = {name: scope for name, _, scope in scopes}
    assert by_name["conv2d"] == ["0"]
    assert by_name["conv2d_1"] == ["1", "1.0", "conv1"]
    assert by_name["relu_1"] == ["1", "1.1"] and by_name["add_1"] == ["1", "1.1"]


# --------------------------------------------------------------------------------------------
# ONNX model-local functions: a call's body nests in the call.

def _ort(model: onnx.ModelProto, x):
    import onnxruntime

    session = onnxruntime.InferenceSession(model.SerializeToString())
    return session.run(None, {session.get_inputs()[0].name: x})[0]


def _msc(graph, weights, x, tmp_path):
    from msc.codegen import to_relax

    mod = to_relax(graph, weights, build_folder=str(tmp_path / "relax"))
    out = relax.VirtualMachine(relax.build(mod, target="llvm"), relax.cpu())["main"](x)
    return out.numpy() if hasattr(out, "numpy") else out


def _nested_functions() -> onnx.ModelProto:
    """main calls Outer (node "/enc/Outer"), which calls Scale twice: once with alpha given,
    once relying on Scale's default; Scale's LeakyRelu refers to alpha."""
    from onnx import TensorProto, helper

    opset = [helper.make_opsetid("", 17)]
    alpha = helper.make_attribute_ref("alpha", onnx.AttributeProto.FLOAT)
    scale = helper.make_function(
        "local", "Scale", ["x"], ["y"],
        [helper.make_node("LeakyRelu", ["x"], ["t"], name="act"),
         helper.make_node("Mul", ["t", "t"], ["y"], name="square")],
        opset, attribute_protos=[helper.make_attribute("alpha", 0.5)])
    scale.node[0].attribute.append(alpha)
    outer = helper.make_function(
        "local", "Outer", ["x"], ["y"],
        [helper.make_node("Scale", ["x"], ["a"], name="first", domain="local", alpha=0.1),
         helper.make_node("Scale", ["a"], ["y"], name="second", domain="local")],
        opset + [helper.make_opsetid("local", 1)])
    graph = helper.make_graph(
        [helper.make_node("Outer", ["x"], ["h"], name="/enc/Outer", domain="local"),
         helper.make_node("Relu", ["h"], ["y"], name="/head/Relu")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])])
    return helper.make_model(graph, opset_imports=opset + [helper.make_opsetid("local", 1)],
                             functions=[scale, outer])


def test_nested_function_calls_scope_their_bodies(tmp_path):
    model = _nested_functions()
    onnx.checker.check_model(model, full_check=True)
    graph, weights = translate.from_onnx(model)
    scopes = [(n.optype, n.scope) for n in graph.get_nodes() if n.optype != "input"]
    assert scopes == [("nn.leakyrelu", ["enc", "Outer", "first"]),
                      ("multiply", ["enc", "Outer", "first"]),
                      ("nn.leakyrelu", ["enc", "Outer", "second"]),
                      ("multiply", ["enc", "Outer", "second"]), ("nn.relu", ["head"])]
    alphas = [n.attrs["alpha"] for n in graph.get_nodes() if n.optype == "nn.leakyrelu"]
    assert [float(a) for a in alphas] == pytest.approx([0.1, 0.5])  # given, then default
    x = np.random.default_rng(0).standard_normal((2, 5), dtype=np.float32)
    np.testing.assert_allclose(_msc(graph, weights, x, tmp_path), _ort(model, x), rtol=1e-6)


def test_recursive_function_is_refused():
    from onnx import TensorProto, helper

    opset = [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)]
    loop = helper.make_function("local", "F", ["x"], ["y"], [
        helper.make_node("F", ["x"], ["y"], name="again", domain="local")], opset)
    graph = helper.make_graph(
        [helper.make_node("F", ["x"], ["y"], name="call", domain="local")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=opset, functions=[loop])
    with pytest.raises(ValidationError, match="calls itself"):
        translate.from_onnx(model)


def test_torch_modules_exported_as_functions(tmp_path):
    """torch's export_modules_as_functions: each _Block call is a local function."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 1), nn.Sequential(_Block(8), _Block(8))).eval()
    x = np.random.default_rng(0).standard_normal((1, 3, 8, 8), dtype=np.float32)
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.from_numpy(x),), buffer, dynamo=False,
                          export_modules_as_functions={_Block})
    proto = onnx.load_from_string(buffer.getvalue())
    assert [f.name for f in proto.functions] == ["_Block"]
    graph, weights = translate.from_onnx(proto)
    convs = [n.scope for n in graph.get_nodes() if n.optype == "msc.conv2d_bias"]
    assert convs == [["0"], ["1", "1.0", "_Block"], ["1", "1.1", "_Block"]]
    np.testing.assert_allclose(_msc(graph, weights, x, tmp_path), _ort(proto, x),
                               rtol=1e-5, atol=1e-5)


def test_prototxt_names_the_model_scope_and_leaves_block_scopes_out():
    import torch
    from torch import nn

    from msc.frontends.translate import from_relax, from_torch
    from tests.helpers.relax_modules import RELU_SCRIPT

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 4, 3)

        def forward(self, x):
            return torch.relu(self.conv1(x))

    graph, _ = from_torch(nn.Sequential(Block()).eval(), [([1, 3, 8, 8], "float32")])
    text = graph.to_prototxt()
    assert '    idx: 1\n    scope: "0/conv1"\n' in text
    relax_graph, _ = from_relax(RELU_SCRIPT)
    assert "scope:" not in relax_graph.to_prototxt()  # MSC's binding-block scopes stay out
