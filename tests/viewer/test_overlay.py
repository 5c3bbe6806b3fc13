"""Overlays: the JSON file is checked against the graph; colors follow the gradient."""

import json

import pytest

from msc.errors import SerializationError
from msc.viewer.overlay import GRADIENT, Overlay, gradient_color, load_overlay, overlay_json


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


def test_values_spanning_decades_use_a_log_scale():
    ov = Overlay("err", {"a": 0.0, "b": 1e-6, "c": 1e-4, "d": 1e-2})
    assert (ov.scale, ov.floor) == ("log", 1e-6)
    assert ov.position("a") == ov.position("b") == 0.0  # an exact match sits with the floor
    assert ov.position("c") == pytest.approx(0.5) and ov.position("d") == 1.0
    assert ov.color("c") == gradient_color(0.5)
    # one decade stays linear; negative values never go on a log scale by themselves
    assert Overlay("ms", {"a": 1.0, "b": 9.0}).scale == "linear"
    assert Overlay("db", {"a": -3.0, "b": 40.0}).scale == "linear"
    assert Overlay("ms", {"a": 1.0, "b": 9.0}, scale="log").position("b") == 1.0
    with pytest.raises(SerializationError, match="cannot be drawn on a log scale"):
        Overlay("db", {"a": -3.0, "b": 40.0}, scale="log")


def test_all_zero_errors_read_as_low():
    assert Overlay("err", {"a": 0.0, "b": 0.0}).color("a") == GRADIENT[0]
    assert Overlay("ms", {"a": 2.0}).color("a") == GRADIENT[-1]


def test_settings_file_round_trips(tmp_path):
    ov = Overlay("max abs error", {"a": 1e-7, "b": 0.5}, group="max", focus="b")
    path = tmp_path / "err.json"
    path.write_text(overlay_json(ov))
    back = load_overlay(str(path), ["a", "b", "c"])
    assert (back.title, back.scale, back.group, back.focus) == ("max abs error", "log", "max",
                                                                "b")
    assert back.values == ov.values and back.to_json()["floor"] == 1e-7


def test_source_node_names_resolve_to_joints_by_the_group_rule(tmp_path):
    sources = {"/layer1/conv/Conv": "conv2d", "/layer1/bn/BatchNorm": "conv2d",
               "/layer1/relu/Relu": "relu"}
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"group": "sum", "focus": "/layer1/relu/Relu", "values": {
        "/layer1/conv/Conv": 2.0, "/layer1/bn/BatchNorm": 0.5, "relu": 1.0}}))
    ov = load_overlay(str(path), ["conv2d", "relu"], sources)
    assert ov.values == {"conv2d": 2.5, "relu": 1.0} and ov.focus == "relu"
    path.write_text(json.dumps({"group": "max", "values": {
        "/layer1/conv/Conv": 2.0, "/layer1/bn/BatchNorm": 0.5}}))
    assert load_overlay(str(path), ["conv2d"], sources).values == {"conv2d": 2.0}


@pytest.mark.parametrize("settings, words", [
    ({"values": {"a": 1}, "colour": "red"}, ["settings ['colour'] unknown", "colour"]),
    ({"values": {"a": 1}, "scale": "cubic"}, ["scale 'cubic'"]),
    ({"values": {"a": 1}, "group": "median"}, ["group 'median' unknown"]),
    ({"values": {"a": 1}, "focus": "zz"}, ["focus 'zz' names no joint"]),
    ({"values": {"a": 1}, "title": 3}, ["title 3 is not a string"]),
    ({"values": {"a": -1, "b": 1}, "scale": "log"}, ["log scale"]),
])
def test_bad_settings_name_the_file_and_setting(tmp_path, settings, words):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(settings))
    with pytest.raises(SerializationError) as err:
        load_overlay(str(path), ["a", "b"])
    assert str(path) in str(err.value)
    for word in words:
        assert word in str(err.value)


def test_source_nodes_of_no_joint_are_left_out_and_listed(tmp_path):
    sources = {"/conv/Conv": "conv2d"}
    path = tmp_path / "e.json"
    path.write_text(json.dumps({"/conv/Conv": 1e-6, "/Constant": 0.0}))
    ov = load_overlay(str(path), ["conv2d"], sources)
    assert ov.values == {"conv2d": 1e-6} and ov.left_out == ["/Constant"]
    path.write_text(json.dumps({"conv2d": 1e-6, "/Constant": 0.0}))  # joint names: strict
    with pytest.raises(SerializationError, match="name no joint"):
        load_overlay(str(path), ["conv2d"], sources)
