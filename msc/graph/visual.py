"""Drawable forms of the graphs: Caffe-like prototxt (conventions 2.2, Netron opens it) and
Graphviz DOT. Both are generic: no per-op code, an op is its optype plus attrs.

    name: "main"
    layer {
      name: "conv2d"
      type: "msc_conv2d_bias"
      top: "conv2d"
      bottom: "inp_0"
      layer_param {
        idx: 1
        input_0: "inp_0:0(inp_0)<1,3,10,10|float32|NCHW>"
        ...
"""

from __future__ import annotations

import os
import re
from typing import Any

from .files import write_atomic

__all__ = [
    "graph_dot",
    "graph_prototxt",
    "prototxt_escape",
    "weight_graph_prototxt",
    "write_text",
]

_SPECIAL = re.compile(r'[\\"\x00-\x1f\x7f-\x9f]')
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def prototxt_escape(text: str) -> str:
    """C-style escapes for a double-quoted prototxt string (other controls as octal bytes)."""
    def one(match: re.Match) -> str:
        char = match.group()
        return _ESCAPES.get(char) or "".join(f"\\{b:03o}" for b in char.encode())
    return _SPECIAL.sub(one, text)


def _literal(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return f'"{prototxt_escape(str(value))}"'


def _block(pairs: list[tuple[str, Any]], depth: int) -> list[str]:
    pad, lines = "  " * depth, []
    for key, value in pairs:
        if isinstance(value, list):
            lines += [f"{pad}{key} {{", *_block(value, depth + 1), f"{pad}}}"]
        else:
            lines.append(f"{pad}{key}: {_literal(value)}")
    return lines


def _prototxt(name: str, layers: list[list[tuple[str, Any]]]) -> str:
    return "\n".join(_block([("name", name)] + [("layer", layer) for layer in layers], 0)) + "\n"


_BLOCK_SCOPE = re.compile(r"block(_\d+)?")


def _scope(joint: Any) -> list[tuple[str, Any]]:
    """``scope: "layer1/layer1.0/conv1"`` when the joint carries the model's own module path;
    nothing for the binding-block scope every graph has (MSC's prototxt stays as it was)."""
    scope = list(getattr(joint, "scope", None) or [])
    if not scope or all(_BLOCK_SCOPE.fullmatch(s) for s in scope):
        return []
    return [("scope", "/".join(scope))]


def _layer(joint: Any, layer_type: str, params: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    head = [("name", joint.name), ("type", layer_type), ("top", joint.name)]
    bottoms = [("bottom", p.name) for p in joint.parents]
    attrs = list(joint.attrs.items())
    return head + bottoms + [("layer_param", [("idx", joint.index), *_scope(joint), *params,
                                              *attrs])]


def _node_params(node: Any) -> list[tuple[str, Any]]:
    return ([(f"input_{i}", t) for i, t in enumerate(node.get_inputs())]
            + [(f"output_{i}", t) for i, t in enumerate(node.outputs)]
            + [(f"param_{role}", t) for role, t in node.weights.items()])


def graph_prototxt(graph: Any) -> str:
    """The prototxt of an MSCGraph: one layer per node, type = optype with '.' -> '_'."""
    layers = [_layer(n, n.optype.replace(".", "_"), _node_params(n)) for n in graph.get_nodes()]
    return _prototxt(graph.name, layers)


def weight_graph_prototxt(graph: Any) -> str:
    """The prototxt of a WeightGraph: type = weight_type; params weight and friend_<i>."""
    layers = []
    for node in graph.get_nodes():
        friends = [(f"friend_{i}", f.name) for i, f in enumerate(node.friends)]
        layers.append(_layer(node, node.weight_type, [("weight", node.weight), *friends]))
    return _prototxt(graph.name, layers)


def _dot_quote(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def _dot_label(node: Any) -> str:
    shapes = [",".join(str(d) for d in t.get_shape(True)) + f" {t.dtype}" for t in node.outputs]
    return "\n".join([node.name, node.optype, *shapes])


def graph_dot(graph: Any) -> str:
    """Graphviz DOT: a box per node (name, optype, output shapes), an edge per input."""
    lines = [f"digraph {_dot_quote(graph.name)} {{", "  rankdir=TB;",
             '  node [shape=box, fontname="Helvetica"];']
    for node in graph.get_nodes():
        lines.append(f"  {_dot_quote(node.name)} [label={_dot_quote(_dot_label(node))}];")
    for node in graph.get_nodes():
        for (p_idx, _), tensor in zip(node.inputs, node.get_inputs()):
            parent = node.parents[p_idx].name
            lines.append(f"  {_dot_quote(parent)} -> {_dot_quote(node.name)} "
                         f"[label={_dot_quote(tensor.name)}];")
    return "\n".join(lines) + "\n}\n"


def write_text(text: str, path: str | os.PathLike | None) -> str:
    """Return ``text``, after writing it atomically to ``path`` when one is given."""
    if path is not None:
        write_atomic(path, text)
    return text
