"""Module scopes of model nodes: the hierarchy a frontend keeps as ``MSCJoint.scope``.

Every frontend renders a module path the way torch's ONNX exporter names its nodes: one
segment per module call, relative to the module around it, a container index kept with its
container (``layer1.0``, ``layer.0``)::

    >>> module_scope(["layer1", "layer1.0", "layer1.0.conv1"])
    ['layer1', 'layer1.0', 'conv1']
    >>> module_scope(["vit", "vit.encoder", "vit.encoder.layer.0"])
    ['vit', 'encoder', 'layer.0']
    >>> name_scope("/layer1/layer1.0/conv1/Conv")
    ['layer1', 'layer1.0', 'conv1']
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["module_scope", "name_scope", "namespace_scope"]


def module_scope(paths: Sequence[str]) -> list[str]:
    """Segments of a stack of qualified module names, outermost first (the root, ``""``,
    adds nothing)."""
    scope, outer = [], ""
    for path in paths:
        if not path or path == outer:
            continue
        inner = path[len(outer) + 1:] if outer and path.startswith(outer + ".") else path
        if inner.isdigit() and outer:  # Sequential's child "0": keep its container's name
            inner = f"{outer.rpartition('.')[2]}.{inner}"
        scope.append(inner)
        outer = path
    return scope


def name_scope(name: str) -> list[str]:
    """The module path of a node named by torch's TorchScript ONNX exporter
    (``/layer1/layer1.0/conv1/Conv``: the op type, the leaf, is dropped); [] for a name that
    is not such a path."""
    if not name.startswith("/"):
        return []
    return [s for s in name.split("/")[1:-1] if s]


def namespace_scope(namespace: str) -> list[str]:
    """The module path of the ``namespace`` torch's dynamo ONNX exporter writes in a node's
    metadata (``": M/layer1: Sequential/layer1.0: B/relu: aten.relu.default"``): its
    modules' qualified names, the root and the op leaf dropped."""
    levels = [level.rpartition(": ")[0] for level in namespace.split("/")]
    return module_scope(levels[1:-1])
