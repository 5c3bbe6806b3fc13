"""Overlays: the JSON file is checked against the graph; colors follow the gradient."""

import json

import pytest

from msc.errors import SerializationError
from msc.viewer.overlay import GRADIENT, gradient_color, load_overlay


def test_gradient_ends_and_middle():
    assert gradient_color(0.0) == GRADIENT[0] and gradient_color(1.0) == GRADIENT[-1]
    assert gradient_color(0.5) == GRADIENT[2] and gradient_color(7) == GRADIENT[-1]


def test_load_overlay_range_and_colors(tmp_path):
    path = tmp_path / "sqnr.json"
    path.write_text(json.dumps({"a": 10, "b": 30.5}))
    ov = load_overlay(str(path), ["a", "b", "c"])
    assert (ov.title, ov.lo, ov.hi) == ("sqnr", 10.0, 30.5)
    assert ov.color("a") == GRADIENT[0] and ov.color("b") == GRADIENT[-1]
    assert ov.color("c") is None


@pytest.mark.parametrize("content, words", [
    ('{"nope": 1}', ["nope", "name no joint"]),
    ('{"a": "fast"}', ["'a'", "not a finite number"]),
    ('[1, 2]', ["JSON object"]),
    ('{"a": ', ["cannot read overlay JSON"]),
])
def test_bad_overlays_name_file_and_key(tmp_path, content, words):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(SerializationError) as err:
        load_overlay(str(path), ["a"])
    assert str(path) in str(err.value)
    for word in words:
        assert word in str(err.value)


def test_missing_overlay_file(tmp_path):
    with pytest.raises(SerializationError, match="no such overlay file"):
        load_overlay(str(tmp_path / "none.json"), ["a"])
