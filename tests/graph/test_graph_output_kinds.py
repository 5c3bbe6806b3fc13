"""Output kinds (msc/graph/outputs.py): a graph records which of its flat outputs form a
sequence or an optional, keeps that through JSON, and writes MSC's own JSON (no extra key)
when every output is a tensor."""

import json

import pytest

from msc.errors import SerializationError, ValidationError
from msc.graph import MSCGraph, MSCJoint, MSCTensor, OutputKind


def _split_graph(output_kinds=None) -> MSCGraph:
    inp = MSCJoint(0, "x", "", "input", outputs=[MSCTensor("x:0", "float32", "AB", [4, 3],
                                                           "x")])
    split = MSCJoint(1, "split", "", "split", {"indices_or_sections": "2", "axis": "0"},
                     [(inp, 0)], [MSCTensor(f"split:{i}", "float32", "AB", [2, 3])
                                  for i in range(2)])
    relu = MSCJoint(2, "relu", "", "nn.relu", inputs=[(inp, 0)],
                    outputs=[MSCTensor("relu:0", "float32", "AB", [4, 3])])
    return MSCGraph("main", [inp, split, relu], ["x:0"], ["relu:0", "split:0", "split:1"],
                    output_kinds=output_kinds)


def test_kinds_group_the_outputs_and_survive_json():
    graph = _split_graph([OutputKind("tensor"), OutputKind("sequence", 2, "float32")])
    groups = [(k.kind, [t.name for t in ts]) for k, ts in graph.output_groups()]
    assert groups == [("tensor", ["relu:0"]), ("sequence", ["split:0", "split:1"])]
    text = graph.to_json()
    assert json.loads(text)["output_kinds"][1] == {"kind": "sequence", "count": 2,
                                                   "dtype": "float32"}
    loaded = MSCGraph.from_json(text)
    assert loaded.output_kinds == graph.output_kinds and loaded.equal(graph)
    assert loaded.clone().output_kinds == graph.output_kinds


def test_tensor_outputs_write_msc_json_and_old_files_read_as_tensors():
    plain = _split_graph()
    assert "output_kinds" not in json.loads(plain.to_json())  # MSC's keys only
    assert [k.kind for k in plain.output_kinds] == ["tensor"] * 3
    seq = _split_graph([OutputKind("tensor"), OutputKind("sequence", 2)])
    assert not seq.equal(plain) and not plain.equal(seq)
    data = json.loads(seq.to_json())
    del data["output_kinds"]  # a file of an older msc
    assert MSCGraph.from_json(json.dumps(data)).equal(plain)


@pytest.mark.parametrize("kinds, what", [
    ([OutputKind("sequence", 2)], "cover 2 tensors"),
    ([OutputKind("tensor"), OutputKind("list", 2)], "unknown"),
    ([OutputKind("optional", 2), OutputKind("tensor")], "cannot hold 2"),
])
def test_bad_kinds_name_the_key(kinds, what):
    with pytest.raises(ValidationError, match=what) as err:
        _split_graph(kinds)
    assert err.value.context["key"] == "output_kinds"
    data = json.loads(_split_graph().to_json())
    data["output_kinds"] = [{"kind": k.kind, "count": k.count} for k in kinds]
    with pytest.raises(SerializationError, match=what):
        MSCGraph.from_json(json.dumps(data))
