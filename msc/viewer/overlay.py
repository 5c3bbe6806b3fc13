"""Per-joint overlays: values ``{joint name: number}`` (quantization SQNR, pruning density,
kernel time, the error against a reference ...) drawn as a color scale on the joints and
listed in the details panel.

    >>> ov = Overlay("latency_ms", {"conv2d": 1.0, "relu": 3.0})
    >>> ov.color("relu"), ov.color("nothing")
    ('#d7301f', None)

Values that span decades (errors from 1e-7 to 1, times from microseconds to milliseconds) are
drawn on a log scale, so that the small ones are not all the same pale color:

    >>> ov = Overlay("max_abs_err", {"a": 1e-7, "b": 1e-5, "c": 0.3})
    >>> ov.scale, round(ov.position("b"), 2)
    ('log', 0.31)

The file is either that plain object, or one with settings around the values::

    {"title": "max abs error vs onnxruntime", "scale": "log", "group": "max",
     "focus": "conv2d_12", "values": {"conv2d": 1e-7, ...}}

``scale``: ``auto`` (log when the positive values span two decades or more), ``linear`` or
``log``. ``group``: how a collapsed group's color sums up its joints, ``mean`` (quality
figures), ``max`` (errors: the worst joint inside shows) or ``sum`` (times: the module's
share). ``focus``: a joint the viewer opens, selects and rings when the page opens (the first
divergence of ``msc run --check --layerwise``). Keys may also be the source model's node
names (ONNX node names, torch.fx node names), found through ``graph.sources``; several nodes
of one joint combine by ``group``'s rule.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping

from ..errors import SerializationError

__all__ = ["GRADIENT", "GROUP_RULES", "SCALES", "Overlay", "gradient_color", "load_overlay",
           "overlay_json"]

# Low -> high: pale yellow to dark red (sequential, readable under black text).
GRADIENT = ("#ffffcc", "#fed976", "#fd8d3c", "#f03b20", "#d7301f")
SCALES = ("auto", "linear", "log")
GROUP_RULES = {"mean": lambda xs: sum(xs) / len(xs), "max": max, "sum": sum}
LOG_SPAN = 100.0  # ``auto`` draws on a log scale from two decades up
_HINT = 'write {"joint name": number, ...} or {"values": {...}, "scale": "log", ...}'


def _rgb(hex_color: str) -> tuple[int, int, int]:
    return tuple(int(hex_color[i:i + 2], 16) for i in (1, 3, 5))


def gradient_color(t: float) -> str:
    """Color at ``t`` in [0, 1] along GRADIENT (linear between the stops)."""
    t = min(max(t, 0.0), 1.0) * (len(GRADIENT) - 1)
    lo = min(int(t), len(GRADIENT) - 2)
    a, b, f = _rgb(GRADIENT[lo]), _rgb(GRADIENT[lo + 1]), t - lo
    return "#" + "".join(f"{round(x + (y - x) * f):02x}" for x, y in zip(a, b))


def _log_fits(nums: list[float]) -> bool:
    positive = [x for x in nums if x > 0]
    return len(positive) >= 2 and min(nums) >= 0 and max(positive) >= LOG_SPAN * min(positive)


class Overlay:
    """Named values per joint with their range; ``color(name)`` is None for joints without.

    On a log scale, ``floor`` is the smallest positive value: zeros (an exact match) sit at the
    bottom of the scale with it.
    """

    def __init__(self, title: str, values: Mapping[str, float], scale: str = "auto",
                 group: str = "mean", focus: str | None = None):
        if scale not in SCALES or group not in GROUP_RULES:
            raise SerializationError(f"overlay scale {scale!r} / group {group!r} unknown",
                                     hint=f"scale: {', '.join(SCALES)}; group: "
                                          f"{', '.join(GROUP_RULES)}")
        self.title, self.group, self.focus = title, group, focus
        self.left_out: list[str] = []  # source nodes of a file that became no joint
        self.values = dict(values)
        nums = list(self.values.values())
        self.lo = min(nums) if nums else 0.0
        self.hi = max(nums) if nums else 0.0
        if scale == "auto":
            scale = "log" if _log_fits(nums) else "linear"
        if scale == "log" and not (nums and self.hi > 0 and self.lo >= 0):
            raise SerializationError(f"overlay {title!r} cannot be drawn on a log scale: its "
                                     f"values must be >= 0 with one > 0 (range {self.lo:g} .. "
                                     f"{self.hi:g})", hint='use "scale": "linear"')
        self.scale = scale
        self.floor = min((x for x in nums if x > 0), default=0.0) if scale == "log" else self.lo

    def position(self, name: str) -> float | None:
        """Where the joint's value sits on the scale, 0 (low) .. 1 (high)."""
        if name not in self.values:
            return None
        return self.position_of(self.values[name])

    def position_of(self, value: float) -> float:
        if self.scale == "log":
            lo, hi = math.log10(self.floor), math.log10(self.hi)
            at = math.log10(max(value, self.floor))
        else:
            lo, hi, at = self.lo, self.hi, value
        if hi > lo:
            return min(max((at - lo) / (hi - lo), 0.0), 1.0)
        return 0.0 if self.hi == 0 else 1.0  # one value: all zeros (no error) read as low

    def color(self, name: str) -> str | None:
        t = self.position(name)
        return None if t is None else gradient_color(t)

    def to_json(self) -> dict:
        """What the HTML viewer reads (it computes the same positions)."""
        return {"title": self.title, "values": self.values, "lo": self.lo, "hi": self.hi,
                "scale": self.scale, "floor": self.floor, "group": self.group,
                "focus": self.focus, "gradient": list(GRADIENT)}


def overlay_json(overlay: Overlay) -> str:
    """The overlay as a file ``load_overlay`` reads back (the settings kept)."""
    data = {"title": overlay.title, "scale": overlay.scale, "group": overlay.group,
            "focus": overlay.focus, "values": overlay.values}
    return json.dumps({k: v for k, v in data.items() if v is not None}, indent=1) + "\n"


def _number(value, key: str, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise SerializationError(f"overlay value {value!r} is not a finite number", file=path,
                                 key=key, hint=_HINT)
    return float(value)


def _read(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        raise SerializationError("no such overlay file", file=path) from None
    except (OSError, ValueError) as e:
        raise SerializationError(f"cannot read overlay JSON: {e}", file=path,
                                 hint=_HINT) from None
    if not isinstance(data, dict):
        raise SerializationError("overlay must be a JSON object {joint: value}", file=path)
    return data


def _settings(data: dict, path: str) -> tuple[dict, dict]:
    """(values, settings) of a plain or a settings file."""
    if not isinstance(data.get("values"), dict):
        return data, {}
    extra = set(data) - {"title", "scale", "group", "focus", "values"}
    if extra:
        raise SerializationError(f"overlay settings {sorted(extra)} unknown", file=path,
                                 key=min(extra), hint=_HINT)
    settings = {k: data[k] for k in ("title", "scale", "group", "focus") if k in data}
    for key, value in settings.items():
        if not isinstance(value, str):
            raise SerializationError(f"overlay {key} {value!r} is not a string", file=path,
                                     key=key, hint=_HINT)
    return data["values"], settings


def _resolve(values: dict, known: set, sources: Mapping[str, str], group: str,
             path: str) -> tuple[dict, list]:
    """``(values by joint, keys left out)``: a key is a joint name, else a source node name
    of one. In a file keyed by source nodes, a key of no joint is a node that became none
    (an ONNX Constant, a folded view): left out and listed, not an error."""
    unknown = [k for k in values if k not in known and k not in sources]
    if unknown and not any(k in sources for k in values):
        raise SerializationError(f"{len(unknown)} overlay key(s) name no joint: {unknown[:5]}",
                                 file=path, key=unknown[0],
                                 hint="keys are joint names as `msc inspect` prints them, or "
                                      "the source model's node names")
    collected: dict[str, list[float]] = {}
    for key, value in values.items():
        number = _number(value, key, path)
        if key in known or key in sources:
            collected.setdefault(key if key in known else sources[key], []).append(number)
    return {joint: GROUP_RULES[group](nums) for joint, nums in collected.items()}, unknown


def load_overlay(path: str, joint_names: Iterable[str],
                 sources: Mapping[str, str] | None = None) -> Overlay:
    """An Overlay from a JSON file (see the module doc); every key must name a joint, or a
    source node of one when ``sources`` (``graph.sources``) is given."""
    values, settings = _settings(_read(path), path)
    known, sources = set(joint_names), dict(sources or {})
    group = settings.get("group", "mean")
    if group not in GROUP_RULES:
        raise SerializationError(f"overlay group {group!r} unknown", file=path, key="group",
                                 hint=f"use one of {', '.join(GROUP_RULES)}")
    focus = settings.get("focus")
    if focus is not None and focus not in known:
        if focus not in sources:
            raise SerializationError(f"overlay focus {focus!r} names no joint", file=path,
                                     key="focus", hint="give a joint name")
        focus = sources[focus]
    title = settings.get("title") or os.path.splitext(os.path.basename(path))[0]
    values, left_out = _resolve(values, known, sources, group, path)
    try:
        overlay = Overlay(title, values, settings.get("scale", "auto"), group, focus)
    except SerializationError as err:
        raise SerializationError(err.message, file=path, hint=err.hint) from None
    overlay.left_out = left_out
    return overlay
