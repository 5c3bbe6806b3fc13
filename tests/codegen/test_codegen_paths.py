"""No writes outside the build folder (issue #20): graph and weight names such as ``../../x``,
``/etc/x`` or 3000 characters decide no path; generated files are written atomically, so a
failed write leaves the previous file intact and no temp file behind."""

import numpy as np
import pytest

from msc.codegen import to_relax, to_torch
from msc.codegen.files import save_npz, script_stem, write_binary_atomic
from msc.errors import SerializationError
from msc.graph import MSCGraph, testing

CODEGENS = {"torch": to_torch, "relax": to_relax}
HOSTILE_PATHS = ["../../x", "/etc/x", "..", ".", "a/../../../b", "x\0y", "~/x", "x" * 3000,
                 "\u2215etc\u2215x"]


def _named(name: str, weight_name: str | None = None):
    data = testing.conv_relu_graph().to_dict()
    data["name"] = name
    graph = MSCGraph.from_dict(data)
    weights = {t.name: np.ones(t.shape, "float32") for t in graph.get_weights()}
    if weight_name is not None:  # the weight file keys, not the file names
        weights = {weight_name if i == 0 else k: v for i, (k, v) in enumerate(weights.items())}
    return graph, weights


def _outside(root, build) -> list:
    return [p for p in root.rglob("*") if not p.is_relative_to(build)
            and p not in build.parents]


@pytest.mark.parametrize("kind", list(CODEGENS))
@pytest.mark.parametrize("name", HOSTILE_PATHS, ids=[f"p{i}" for i in range(len(HOSTILE_PATHS))])
def test_graph_names_cannot_leave_the_build_folder(kind, name, tmp_path):
    build = tmp_path / "a" / "b"
    graph, weights = _named(name)
    CODEGENS[kind](graph, weights, build_folder=build)
    assert _outside(tmp_path, build) == []
    assert all(len(p.name) < 128 for p in build.iterdir())


@pytest.mark.parametrize("kind", list(CODEGENS))
@pytest.mark.parametrize("weight", ["../../w", "/etc/w"])
def test_weight_names_cannot_leave_the_build_folder(kind, weight, tmp_path):
    build = tmp_path / "a" / "b"
    graph, weights = _named("g")
    CODEGENS[kind](graph, weights | {weight: np.ones(2, "float32")}, build_folder=build)
    assert _outside(tmp_path, build) == []


def test_long_names_keep_distinct_stems():
    assert script_stem("x" * 3000) != script_stem("x" * 2999)
    assert len(script_stem("y" * 3000)) <= 80


def test_visualize_writes_only_the_requested_file(tmp_path):
    graph, _ = _named("../../x")
    graph.visualize(tmp_path / "g.prototxt")
    graph.to_dot(tmp_path / "g.dot")
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["g.dot", "g.prototxt"]


def test_failed_write_keeps_the_old_file(tmp_path):
    path = tmp_path / "w.npz"
    save_npz(path, {"a": np.arange(3)})
    before = path.read_bytes()

    def fail(tmp: str) -> None:
        with open(tmp, "wb") as f:
            f.write(b"half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_binary_atomic(path, fail)
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["w.npz"]
    with pytest.raises(SerializationError, match="object"):
        save_npz(path, {"a": np.array([object()])})
    assert path.read_bytes() == before
