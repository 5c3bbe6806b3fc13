"""Run an MSCGraph on numpy inputs and get any of its tensors back.

Activations of every tensor come from the graph itself: ``with_outputs`` rebuilds it with the
wanted tensors as extra graph outputs, and a codegen runs it. ``torch`` (to_torch, eager) is
the default executor because calibration and the exclude search build many graph variants:
measured on a 2-conv net, to_torch takes 0.02 s per variant and relax.build 0.27 s. ``relax``
(to_relax + relax.build + VirtualMachine on llvmlite) runs the very same graphs.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from msc.errors import ValidationError
from msc.graph import MSCGraph, MSCJoint, serialize

__all__ = ["activation_names", "fresh_prims", "input_arrays", "make_runner", "rebuild",
           "with_outputs"]


def rebuild(graph: MSCGraph, joints: Iterable[MSCJoint], outputs: Sequence[str] | None = None,
            name: str | None = None) -> MSCGraph:
    """A new graph of ``joints`` (unowned; their parents may be joints of ``graph``): each is
    cloned with its inputs re-pointed to the clones made so far, so it can be appended to."""
    made: dict[str, MSCJoint] = {}
    nodes = []
    for joint in joints:
        pairs = [(made.get(p.name, p), i) for p, i in joint.input_pairs()]
        clone = joint.clone(inputs=pairs, index=len(nodes))
        made[clone.name] = clone
        nodes.append(clone)
    return MSCGraph(name or graph.name, nodes, list(graph.input_names),
                    list(outputs if outputs is not None else graph.output_names),
                    list(fresh_prims(graph)), graph.output_kinds if outputs is None else None)


def fresh_prims(graph: MSCGraph) -> list:
    """Unowned copies of the graph's shape prims, for a new graph."""
    return serialize.graph_parts(graph.to_dict())[4] if graph.prims else []


def activation_names(graph: MSCGraph) -> list[str]:
    """Float tensors produced by op joints (not inputs, not constants)."""
    return [t.name for n in graph.get_nodes() if n.optype not in ("input", "constant")
            for t in n.outputs if t.dtype.startswith("float")]


def with_outputs(graph: MSCGraph, names: Sequence[str]) -> MSCGraph:
    """``graph`` with ``names`` as its outputs (the original outputs first)."""
    outputs = list(dict.fromkeys([*graph.output_names, *names]))
    return rebuild(graph, graph.get_nodes(), outputs)


def input_arrays(graph: MSCGraph, item) -> list[np.ndarray]:
    """One calibration item (a dict by input name or alias, an array, or a list of arrays)
    as the graph's input arrays, in order."""
    inputs = graph.get_inputs()
    if isinstance(item, dict):
        arrays = []
        for tensor in inputs:
            keys = [k for k in (tensor.alias, tensor.name, tensor.name.rpartition(":")[0])
                    if k in item]
            if not keys:
                raise ValidationError("calibration item has no value for this input",
                                      tensor=tensor.name, hint=f"keys given: {sorted(item)}")
            arrays.append(item[keys[0]])
    else:
        arrays = list(item) if isinstance(item, (list, tuple)) else [item]
    if len(arrays) != len(inputs):
        raise ValidationError(f"calibration item has {len(arrays)} arrays, the graph "
                              f"{len(inputs)} inputs", hint="give one array per graph input")
    return [np.ascontiguousarray(a, dtype=t.dtype) for a, t in zip(arrays, inputs)]


def _torch_runner(graph: MSCGraph, weights: dict) -> Callable:
    import torch

    from msc.codegen import to_torch

    with tempfile.TemporaryDirectory(prefix="msc_quant_") as folder:
        model = to_torch(graph, weights, build_folder=folder)

    def run(arrays):
        with torch.no_grad():
            out = model(*[torch.from_numpy(a) for a in arrays])
        out = out if isinstance(out, (tuple, list)) else [out]
        return [o.numpy() for o in out]
    return run


def _relax_runner(graph: MSCGraph, weights: dict) -> Callable:
    from msc import relax
    from msc.codegen import to_relax

    with tempfile.TemporaryDirectory(prefix="msc_quant_") as folder:
        mod = to_relax(graph, weights, build_folder=folder)
    vm = relax.VirtualMachine(relax.build(mod, target="llvm"), relax.cpu())
    func = mod.get_global_vars()[0].name_hint

    def run(arrays):
        out = vm[func](*arrays)
        out = out if isinstance(out, (tuple, list)) else [out]
        return [o.numpy() if hasattr(o, "numpy") else np.asarray(o) for o in out]
    return run


EXECUTORS = {"torch": _torch_runner, "relax": _relax_runner}


def make_runner(graph: MSCGraph, weights: dict, executor: str = "torch") -> Callable:
    """``run(arrays) -> {output tensor name: array}`` for ``graph`` on ``executor``."""
    run = EXECUTORS[executor](graph, weights)
    names = list(graph.output_names)
    return lambda arrays: dict(zip(names, run(arrays)))
