"""Per-joint overlays: a JSON ``{joint name: number}`` (quantization SQNR, pruning density,
kernel time ...) drawn as a color scale on the joints and listed in the details panel.

    >>> ov = Overlay("latency_ms", {"conv2d": 1.0, "relu": 3.0})
    >>> ov.color("relu"), ov.color("nothing")
    ('#d7301f', None)
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping

from ..errors import SerializationError

__all__ = ["GRADIENT", "Overlay", "gradient_color", "load_overlay"]

# Low -> high: pale yellow to dark red (sequential, readable under black text).
GRADIENT = ("#ffffcc", "#fed976", "#fd8d3c", "#f03b20", "#d7301f")


def _rgb(hex_color: str) -> tuple[int, int, int]:
    return tuple(int(hex_color[i:i + 2], 16) for i in (1, 3, 5))


def gradient_color(t: float) -> str:
    """Color at ``t`` in [0, 1] along GRADIENT (linear between the stops)."""
    t = min(max(t, 0.0), 1.0) * (len(GRADIENT) - 1)
    lo = min(int(t), len(GRADIENT) - 2)
    a, b, f = _rgb(GRADIENT[lo]), _rgb(GRADIENT[lo + 1]), t - lo
    return "#" + "".join(f"{round(x + (y - x) * f):02x}" for x, y in zip(a, b))


class Overlay:
    """Named values per joint with their range; ``color(name)`` is None for joints without."""

    def __init__(self, title: str, values: Mapping[str, float]):
        self.title = title
        self.values = dict(values)
        nums = list(self.values.values())
        self.lo = min(nums) if nums else 0.0
        self.hi = max(nums) if nums else 0.0

    def position(self, name: str) -> float | None:
        if name not in self.values:
            return None
        span = self.hi - self.lo
        return (self.values[name] - self.lo) / span if span > 0 else 1.0

    def color(self, name: str) -> str | None:
        t = self.position(name)
        return None if t is None else gradient_color(t)

    def to_json(self) -> dict:
        return {"title": self.title, "values": self.values, "lo": self.lo, "hi": self.hi,
                "gradient": list(GRADIENT)}


def _number(value, key: str, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise SerializationError(f"overlay value {value!r} is not a finite number", file=path,
                                 key=key, hint="write {\"joint name\": number, ...}")
    return float(value)


def load_overlay(path: str, joint_names: Iterable[str]) -> Overlay:
    """An Overlay from a JSON file ``{joint: value}``; every key must name a joint."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        raise SerializationError("no such overlay file", file=path) from None
    except (OSError, ValueError) as e:
        raise SerializationError(f"cannot read overlay JSON: {e}", file=path,
                                 hint="write {\"joint name\": number, ...}") from None
    if not isinstance(data, dict):
        raise SerializationError("overlay must be a JSON object {joint: value}", file=path)
    known = set(joint_names)
    unknown = [k for k in data if k not in known]
    if unknown:
        raise SerializationError(f"{len(unknown)} overlay key(s) name no joint: {unknown[:5]}",
                                 file=path, key=unknown[0],
                                 hint="keys are joint names as `msc inspect` prints them")
    values = {k: _number(v, k, path) for k, v in data.items()}
    return Overlay(os.path.splitext(os.path.basename(path))[0], values)
