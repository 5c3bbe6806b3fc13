"""The one graph the ONNX passes share (codegen/onnx/passes/graph.py): its producer / reader
index stays equal to one built afresh under every mutation the passes make, the pipeline
builds it once, and removing a node whose value is still read fails by name."""

from __future__ import annotations

import random

import pytest

from msc.codegen.onnx.node import OnnxNode
from msc.codegen.onnx.passes.graph import OnnxGraph
from msc.errors import ValidationError
from tests.helpers.cli_models import light


def _chain(n: int = 12) -> list[OnnxNode]:
    """x -> Relu -> Add(prev, x) -> ... : every value read once or twice."""
    nodes, prev = [], "x"
    for i in range(n):
        op, ins = ("Relu", [prev]) if i % 2 == 0 else ("Add", [prev, "x"])
        nodes.append(OnnxNode(op, ins, [f"v{i}"], name=f"n{i}"))
        prev = f"v{i}"
    return nodes


def _written(name: str) -> list[OnnxNode]:
    """The writer's nodes for a light-zoo model, before any pass."""
    import onnx

    from msc.codegen.onnx.writer import OnnxWriter
    from msc.frontends.onnx.api import from_onnx

    graph, weights = from_onnx(onnx.load(light(name)))
    writer = OnnxWriter(graph, weights, 17)
    writer.write()
    return writer.nodes


def _values(graph: OnnxGraph) -> list[str]:
    return sorted({v for n in graph.nodes for v in (*n.inputs, *n.outputs) if v})


def _unread(graph: OnnxGraph) -> list[OnnxNode]:
    return [n for n in graph.nodes
            if not any(o in graph.keep or graph.readers(o) for o in n.outputs)]


def _mutate(graph: OnnxGraph, rng: random.Random, step: int) -> None:
    """One mutation of the kinds the passes make, picked by ``rng``."""
    nodes, values = graph.nodes, _values(graph)
    node = rng.choice(nodes)
    kind = rng.randrange(7)
    if kind == 0 and node.inputs:
        graph.set_inputs(node, [rng.choice(values) for _ in node.inputs])
    elif kind == 1 and node.inputs:
        graph.set_input(node, rng.randrange(len(node.inputs)), rng.choice(values))
    elif kind == 2:
        graph.replace_uses(rng.choice(values), rng.choice(values))
    elif kind == 3:
        graph.rename_output(node, 0, f"renamed{step}")
    elif kind == 4:
        new = OnnxNode("Identity", [rng.choice(values)], [f"new{step}"], name=f"new{step}")
        side = {"before": node} if rng.random() < 0.5 else {"after": node}
        graph.insert([new], **side)
    elif kind == 5 and _unread(graph):
        graph.remove(rng.choice(_unread(graph)))
    elif kind == 6:
        reader = next((r for r in graph.readers(node.outputs[0]) if r is not node), None)
        if reader is not None and len(node.outputs) == 1 and \
                len(graph.readers(node.outputs[0])) == 1 and \
                node.outputs[0] not in graph.keep:  # fuse node into its one reader
            graph.rewrite(reader, [node], op_type="Fused",
                          inputs=[v for v in reader.inputs if v != node.outputs[0]] +
                          node.inputs)


@pytest.mark.parametrize("source", ["chain", "squeezenet"])
def test_index_equals_a_fresh_one_after_random_mutations(source):
    nodes = _chain() if source == "chain" else _written("squeezenet")
    graph = OnnxGraph(nodes, keep={nodes[-1].outputs[0]})
    rng = random.Random(28)
    for step in range(300):
        _mutate(graph, rng, step)
        graph.check()  # raises when made / slots / users differ from a fresh index
    fresh = OnnxGraph(graph.nodes, graph.keep)
    assert fresh.made == graph.made
    assert {v: [(id(n), i) for n, i in s] for v, s in fresh.slots.items()} == \
        {v: [(id(n), i) for n, i in s] for v, s in graph.slots.items()}


def test_drop_dead_uses_the_reader_lists():
    nodes = _chain(6)
    nodes.insert(3, OnnxNode("Neg", ["v1"], ["dead0"], name="dead0"))
    nodes.insert(4, OnnxNode("Abs", ["dead0"], ["dead1"], name="dead1"))
    graph = OnnxGraph(nodes, keep={"v5"})
    graph.drop_dead()
    assert [n.name for n in graph.nodes] == [f"n{i}" for i in range(6)]
    assert "dead0" not in graph.made and graph.readers("v1") == [nodes[2]]
    graph.check()


def test_readers_stay_in_node_order():
    """Rules read "the first reader" and compare reader lists, as a fresh index orders them."""
    nodes = _chain(4)
    graph = OnnxGraph(nodes, keep={"v3"})
    graph.set_inputs(nodes[3], ["v1", "x"])  # the last node now reads v1 after nodes[2]
    assert graph.readers("x") == [nodes[0], nodes[1], nodes[3]]
    assert graph.readers("v1") == [nodes[2], nodes[3]]
    graph.check()


def test_removing_a_node_still_read_names_it():
    nodes = _chain(4)
    graph = OnnxGraph(nodes, keep={"v3"})
    with pytest.raises(ValidationError, match="node 'n1'.*'v1', which node 'n2' still reads"):
        graph.remove(nodes[1])
    with pytest.raises(ValidationError, match="node 'n3'.*'v3', which is a graph output"):
        graph.remove(nodes[3])
    with pytest.raises(ValidationError, match="'v0' is made by node 'n0' already"):
        graph.set_outputs(nodes[2], ["v0"])


def test_a_node_the_graph_owns_refuses_direct_writes():
    """Writing a node's inputs behind the graph's back would leave its reader lists wrong."""
    nodes = _chain(2)
    graph = OnnxGraph(nodes, keep={"v1"})
    with pytest.raises(ValidationError, match="change only through its OnnxGraph"):
        nodes[1].inputs[0] = "x"
    with pytest.raises(ValidationError, match="change only through its OnnxGraph"):
        nodes[0].outputs.append("extra")
    graph.set_input(nodes[1], 0, "x")
    assert nodes[1].inputs == ["x", "x"] and graph.readers("v0") == []
    graph.check()


def test_a_fused_node_takes_over_the_values_of_the_nodes_it_drops():
    nodes = _chain(4)
    graph = OnnxGraph(nodes, keep={"v3"})
    graph.rewrite(nodes[1], [nodes[2], nodes[3]], op_type="Fused", outputs=["v3"])
    assert [n.op_type for n in graph.nodes] == ["Relu", "Fused"]
    assert graph.made["v3"] is nodes[1] and "v2" not in graph.made
    graph.check()


def test_the_pipeline_builds_the_graph_once(monkeypatch):
    """A pass chain over a real model that folds (the importer's spelling of a 3-D
    Attention, heads split and merged back, to one node) indexes the nodes once."""
    import onnx

    from msc.codegen import to_onnx
    from msc.frontends.onnx.api import from_onnx
    from tests.helpers.onnx_export import model_opset, node_cases

    builds = []
    init = OnnxGraph.__init__

    def counted(self, *args, **kw):
        builds.append(self)
        init(self, *args, **kw)

    monkeypatch.setattr(OnnxGraph, "__init__", counted)
    case = node_cases({"attention": ["test_attention_3d"]})["test_attention_3d"]
    graph, weights = from_onnx(case.model)
    model = to_onnx(graph, weights, opset=model_opset(case.model))
    assert len(builds) == 1
    assert [n.op_type for n in model.graph.node] == ["Attention"]
    onnx.checker.check_model(model, full_check=True)


# cases whose spelling the passes fold (one per kind of rewrite: a rule dropping a chain, one
# giving a fused node more outputs, one rewiring readers, a run-time split)
FOLDED = {"attention": "test_attention_3d", "topk": "test_top_k_negative_axis",
          "celu": "test_celu", "split": "test_split_variable_parts_2d_opset13",
          "reduce_log_sum_exp": "test_reduce_log_sum_exp_do_not_keepdims_random"}


@pytest.mark.parametrize("module", sorted(FOLDED))
def test_every_pass_leaves_the_index_in_step(module):
    """The pipeline's passes one by one over the writer's nodes of a case they fold: after
    each, the index equals a fresh one, and the passes wrote fewer nodes than they got."""
    from msc.codegen.onnx.passes.pipeline import PASSES
    from msc.codegen.onnx.passes.walk import Walk
    from msc.codegen.onnx.writer import OnnxWriter
    from msc.frontends.onnx.api import from_onnx
    from tests.helpers.onnx_export import model_opset, node_cases

    case = node_cases({module: [FOLDED[module]]})[FOLDED[module]]
    graph, weights = from_onnx(case.model)
    writer = OnnxWriter(graph, weights, model_opset(case.model))
    writer.write()
    keep = {v for v, _ in writer.graph_outputs()}
    walk = Walk.of(writer.nodes, writer.inits, keep, writer.static, writer.dtypes,
                   writer.opset)
    written = len(walk.graph)
    for step in PASSES:
        step(walk)
        walk.graph.check()
    assert len(walk.graph) < written
