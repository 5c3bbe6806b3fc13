"""``from_torch``: a torch model -> MSCGraph (or the Relax module), as MSC's translate API.

    graph, weights = from_torch(model, [(("bz", 3, 224, 224), "float32")])
    mod = from_torch(model, [((1, 3, 224, 224), "float32")], as_msc=False)

Tracing tries torch.fx, then torch.export (see ``frontends.torch.translate_torch``, which
also tells which path ran and why). Graph weights carry their ``state_dict`` keys as aliases.
"""

from __future__ import annotations

import hashlib

import numpy as np

from msc.gc_tuning import fewer_collections
from msc.relax.op.registry import ops_in

from ..relax.translate import from_relax
from .importer import translate_torch

__all__ = ["from_torch", "set_weight_aliases"]

# Roles of norm ops -> the torch parameter/buffer names (msc-conventions 4.4).
_NORM_ROLES = {"gamma": "weight", "beta": "bias", "mean": "running_mean",
               "var": "running_var"}
_NORM_OPTYPES = ops_in("norm")


@fewer_collections
def from_torch(model, input_info, trans_config=None, build_config=None,
               custom_convert_map=None, as_msc: bool = True, via: str | None = None):
    """Translate a torch model.

    Args:
        model: an ``nn.Module`` (an fx ``GraphModule`` or an ``ExportedProgram`` also work).
        input_info: ``[(shape, dtype), ...]``, one per forward argument; a dim given as a
            string is a named dynamic dim (the same name is the same dim).
        trans_config, build_config: passed to ``from_relax``.
        custom_convert_map: ``{target: fn}`` adding or overriding converters; target is an
            ``nn.Module`` type, a function, a method/function name (``"view"``) or an ATen op
            (``torch.ops.aten.diff.default`` or ``"diff"``); ``fn(ctx, *args, **kwargs)`` gets
            the bound arguments as Relax values and returns the result (``ctx.emit``).
        as_msc: False returns the Relax IRModule instead of ``(graph, weights)``.
        via: "fx" or "export" forces a tracing path; None tries fx, then export. The path
            taken is logged (logger ``msc.frontends.torch``); ``translate_torch`` returns it.

    Returns:
        ``(MSCGraph, weights)``, or the IRModule when ``as_msc`` is False.
    """
    result = translate_torch(model, input_info, custom_convert_map, via)
    if not as_msc:
        return result.mod
    graph, weights = from_relax(result.mod, trans_config=trans_config,
                                build_config=build_config)
    set_weight_aliases(graph, weights, result.weight_names)
    return graph, weights


def set_weight_aliases(graph, weights: dict, weight_names: dict) -> None:
    """Alias each graph weight with the state_dict key of the model tensor it holds; weights
    the model does not own (made by converters) follow MSC's ``<node>.<role>`` rule.

    from_relax folds constants (``permute_dims(weight)``, ``reshape(bias)``) and lays the
    data out again like the torch tensors, so a weight is found by its data: first the very
    arrays of the model's constants, then equal bytes (equal tensors, such as fresh
    LayerNorm weights, pair up in order). A key names one graph weight only."""
    holders = {}
    for node in graph.get_nodes():
        for role, tensor in node.get_weights().items():
            holders.setdefault(tensor.name, (node, role, tensor))
    keys = _match_keys(holders, weights, weight_names)
    for name, (node, role, tensor) in holders.items():
        graph.set_tensor_alias(tensor, keys.get(name) or _default_alias(node, role))


def _match_keys(holders: dict, weights: dict, weight_names: dict) -> dict:
    """Graph weight name -> state_dict key: same array first, then equal bytes."""
    by_id = {id(const.data): key for const, key in weight_names.items()}
    keys = {name: by_id[id(weights.get(name))] for name in holders
            if id(weights.get(name)) in by_id}
    used = set(keys.values())
    by_bytes: dict[tuple, list] = {}
    for const, key in weight_names.items():
        if key not in used:
            by_bytes.setdefault(_data_key(const.data), []).append(key)
    for name in holders:
        data = weights.get(name)
        if name in keys or data is None:
            continue
        data = np.asarray(data)
        candidates = by_bytes.get(_data_key(data))
        if candidates is None and data.ndim == 2:  # a [in, out] matmul weight shown [out, in]
            candidates = by_bytes.get(_data_key(data.T))
        if candidates:
            keys[name] = candidates.pop(0)
    return keys


def _data_key(data: np.ndarray) -> tuple:
    return data.shape, str(data.dtype), hashlib.sha1(np.ascontiguousarray(data)).hexdigest()


def _default_alias(node, role: str) -> str:
    name = node.name.replace(".", "_")
    if node.optype == "constant":
        return name
    if node.optype in _NORM_OPTYPES:
        return f"{name}.{_NORM_ROLES.get(role, role)}"
    return f"{name}.{role}"
