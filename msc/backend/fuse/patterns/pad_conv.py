"""A zero ``nn.pad`` of the spatial axes folded into the conv that reads it.

TensorFlow-style "same" padding reaches msc as an explicit pad before an unpadded conv
(timm's ``tf_`` models and Conv2dSame, Hugging Face's MobileNetV2 / EfficientNet): one more
pass over every such activation, written to a fresh buffer and read again by the conv (HF
MobileNetV2: 18 pads, 0.95 ms of 10.4 ms in kernels at 224x224). Every conv kernel takes
uneven (top, left, bottom, right) padding and reads zeros there, so the pad's widths join the
conv's own and the conv reads the pad's input. Only constant-zero pads of H and W read by a
float32 conv the native kernels take (kernels/conv.py's fact, checked on the rewritten call),
and only when the conv is the pad's one reader.
"""

from __future__ import annotations

from dataclasses import replace

from ....relax.expr import Attrs
from ...kernels.conv import Conv2dFact
from .views import Graph

__all__ = ["fold_pad_into_conv"]

_CONVS = {"nn.conv2d": Conv2dFact(), "msc.conv2d_bias": Conv2dFact(has_bias=True)}


def _spatial_widths(pad_attrs, layout: str) -> tuple | None:
    """(top, left, bottom, right) of a constant-zero pad of only H and W, else None."""
    if pad_attrs.get("pad_mode", "constant") != "constant" or float(
            pad_attrs.get("pad_value", 0.0)) != 0.0:
        return None
    widths = [int(v) for v in pad_attrs.get("pad_width", ())]
    if len(widths) != 2 * len(layout) or min(widths, default=0) < 0:
        return None
    h, w = layout.index("H"), layout.index("W")
    if any(widths[2 * k] or widths[2 * k + 1] for k in range(len(layout)) if k not in (h, w)):
        return None
    return widths[2 * h], widths[2 * w], widths[2 * h + 1], widths[2 * w + 1]


def fold_pad_into_conv(graph: Graph) -> int:
    """Rewrite every ``conv(pad(x))`` that qualifies as ``conv(x)`` with the pad in its
    padding; the pad, now unread, is erased."""
    count = 0
    for node in graph.nodes():
        fact = _CONVS.get(node.op) if node.kind == "call" and node.site is not None else None
        pad = graph.call(node.ins[0], "nn.pad") if fact is not None else None
        if pad is None or not graph.single_use(node.ins[0]):
            continue
        site = node.site
        layout = site.attr("data_layout") or "NCHW"
        extra = _spatial_widths(pad.site.attrs, layout)
        if extra is None or len(layout) != 4 or sorted(layout) != sorted("NCHW"):
            continue
        own = site.attr("padding", 0)
        own = tuple(int(v) for v in (own if isinstance(own, (tuple, list)) else (own,)))
        own = {1: own * 4, 2: own * 2, 4: own}.get(len(own))
        if own is None:
            continue
        attrs = Attrs({**dict(site.attrs.items()),
                       "padding": tuple(a + b for a, b in zip(own, extra))})
        source = pad.ins[0]
        folded = replace(site, attrs=attrs, args=[graph.values[source], *site.args[1:]],
                         call=None)  # no TIR route: only the native kernel takes it
        if not fact.match(folded):
            continue
        node.site = folded
        graph.rewriter.set_ins(node, (source, *node.ins[1:]))
        graph.rewriter.erase_dead()
        count += 1
    return count
