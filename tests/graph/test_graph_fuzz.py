"""Fuzzing the MSC JSON reader (issue #20): mutated graphs (dropped, duplicated, renamed keys,
wrong types, huge or negative dims, dangling references, cycles), mutated text, random bytes and
truncations either load, or raise an msc error with a message that names the file. A graph that
loads also checks, prints and serializes without any other exception.

Long run: ``MSC_FUZZ_EXAMPLES=5000 python -m pytest tests/graph/test_graph_fuzz.py -q``.
"""

from __future__ import annotations

import copy
import json
import pathlib

from hypothesis import given
from hypothesis import strategies as st

from msc import relax
from msc.frontends.translate import from_relax
from msc.graph import MSCGraph, WeightGraph
from tests.helpers.fuzz import FUZZ_SETTINGS, loads_or_refuses, mutated_text

ROOT = pathlib.Path(__file__).parents[2]
SCRIPTS = [ROOT / "tests" / "relax" / "data" / "script" / f"{name}.tvmscript"
           for name in ("conv_net", "dynamic_batch", "seed_mlp")]


def _seeds() -> list[dict]:
    """conv_relu.json and the graphs of the golden Relax scripts."""
    seeds = [json.loads((ROOT / "msc" / "data" / "conv_relu.json").read_text())]
    for path in SCRIPTS:
        graph = from_relax(relax.from_script(path.read_text()))[0]
        seeds.append(graph.to_dict())
    return seeds


SEEDS = _seeds()
_MAIN = {"msc.conv2d_bias": ["weight"], "msc.linear": ["weight"]}
WEIGHT_SEEDS = [WeightGraph(MSCGraph.from_dict(s), _MAIN, {"add": "passby"}).to_dict()
                for s in SEEDS]
SEED_TEXTS = [json.dumps(s, indent=1) for s in SEEDS]
NAMES = sorted({n["name"] for s in SEEDS for n in s["nodes"]})

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2 ** 70, 2 ** 70) | st.floats()
    | st.text(max_size=8) | st.sampled_from(NAMES + [f"{n}:0" for n in NAMES]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                max_size=4),
    max_leaves=8)


def _paths(value, prefix=()) -> list[tuple]:
    """Every location in a JSON tree, as a tuple of keys / indices."""
    found = [prefix]
    items = value.items() if isinstance(value, dict) else enumerate(value) \
        if isinstance(value, list) else ()
    for key, child in items:
        found.extend(_paths(child, (*prefix, key)))
    return found


def _mutate_at(data, path: tuple, kind: str, new):
    if not path:
        return new if kind == "replace" else data
    parent = data
    for key in path[:-1]:
        parent = parent[key]
    key = path[-1]
    if kind == "drop":
        del parent[key]
    elif kind == "duplicate" and isinstance(parent, list):
        parent.insert(key, copy.deepcopy(parent[key]))
    elif kind == "rename" and isinstance(parent, dict):
        parent[f"{key}_"] = parent.pop(key)
    else:
        parent[key] = new
    return data


@st.composite
def mutated_graph(draw, seeds=SEEDS):
    data = copy.deepcopy(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(data)))
        kind = draw(st.sampled_from(["drop", "duplicate", "rename", "replace"]))
        data = _mutate_at(data, path, kind, draw(JSON_VALUES))
    return data


def _load_and_use(data) -> MSCGraph:
    graph = MSCGraph.from_json(data)
    graph.check()
    graph.to_json(), graph.to_prototxt(), str(graph), graph.inspect()
    return graph


@FUZZ_SETTINGS
@given(mutated_graph())
def test_fuzz_graph_json_objects(data):
    text = json.dumps(data, allow_nan=True)
    if text.lstrip()[:1] in ("{", "["):
        loads_or_refuses(_load_and_use, text)


@FUZZ_SETTINGS
@given(mutated_text(SEED_TEXTS))
def test_fuzz_graph_json_text(text):
    if text.lstrip()[:1] in ("{", "["):  # other strings are paths
        loads_or_refuses(_load_and_use, text)


@FUZZ_SETTINGS
@given(st.binary(max_size=64) | st.sampled_from(SEED_TEXTS).map(str.encode),
       st.integers(0, 10 ** 6))
def test_fuzz_graph_json_file_bytes(tmp_path_factory, blob, cut):
    path = tmp_path_factory.mktemp("fuzz") / "graph.json"
    path.write_bytes(blob[:cut])
    loads_or_refuses(_load_and_use, str(path), "graph.json")


@FUZZ_SETTINGS
@given(st.sampled_from(SEEDS), st.sampled_from(NAMES))
def test_fuzz_graph_json_cycles(data, name):
    """A node naming a later node (or itself) as parent: a cycle or a dangling reference."""
    data = copy.deepcopy(data)
    first = data["nodes"][0]
    first["parents"] = [*first["parents"], name]
    first["inputs"] = [*first["inputs"], f"{name}:0"]
    loads_or_refuses(_load_and_use, data)


def _load_weight_graph(text: str) -> WeightGraph:
    graph = WeightGraph.from_json(text)
    graph.check()
    graph.to_json(), str(graph), graph.inspect()
    return graph


@FUZZ_SETTINGS
@given(mutated_graph(WEIGHT_SEEDS))
def test_fuzz_weight_graph_json(data):
    text = json.dumps(data)
    if text.lstrip()[:1] in ("{", "["):
        loads_or_refuses(_load_weight_graph, text)
