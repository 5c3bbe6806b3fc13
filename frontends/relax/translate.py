"""``from_relax``: a Relax module -> MSCGraph and weights, as TVM's MSC ``from_relax``.

The ONNX and torch frontends end here too (they build a Relax module first); the public
entry point is ``frontends.translate.from_relax``::

    graph, weights = from_relax(mod)                   # msc IRModule, TVMScript text or tvm
    graph.inspect()["nodes"]                           # {"total": 2, "input": 1, ...}
    graph, weights = from_relax(mod, params={"w": w}, build_config={"use_var_name": True})
"""

from __future__ import annotations

from typing import Any

import numpy as np

from msc.errors import UnsupportedOpError, ValidationError
from msc.gc_tuning import fewer_collections
from msc.graph import MSCGraph
from msc.relax import IRModule, from_script
from msc.relax import transform as T
from msc.relax.expr import Function

from .fusion import fuse
from .graph_builder import BuildConfig, GraphBuilder, assemble
from .layout import infer_layouts
from .naming import name_function
from .optypes import find_unsupported
from .output_kinds import output_kinds
from .tvm_module import from_tvm_module
from .walk import FunctionView
from .weights import normalize_weights

__all__ = ["from_relax"]

DEFAULT_ENTRY = "main"
DEFAULT_OPT_LEVEL = 1


def _to_module(mod: Any) -> IRModule:
    """An msc IRModule from an IRModule, TVMScript text, or a ``tvm.IRModule``."""
    if isinstance(mod, IRModule):
        return mod
    if isinstance(mod, str):
        parsed = from_script(mod)
        if isinstance(parsed, IRModule):
            return parsed
        return IRModule({parsed.attrs.get("global_symbol", DEFAULT_ENTRY): parsed})
    if type(mod).__module__.split(".")[0] == "tvm" and hasattr(mod, "functions"):
        return from_tvm_module(mod)
    raise ValidationError(f"cannot translate a {type(mod).__name__}",
                          hint="pass an msc IRModule, TVMScript text or a tvm.IRModule "
                               "(wrap a function: tvm.IRModule({'main': func}))")


def _entry_function(mod: IRModule, entry: str) -> Function:
    names = [gv.name_hint for gv in mod.get_global_vars()]
    if entry not in names or not isinstance(mod[entry], Function):
        relax_funcs = [n for n in names if isinstance(mod[n], Function)]
        raise ValidationError(f"module has no Relax function {entry!r}", key=entry,
                              hint=f"Relax functions: {', '.join(relax_funcs) or '(none)'}; "
                                   "set trans_config['entry']")
    return mod[entry]


def _prepare(mod: IRModule, entry: str, params, opt_config: dict) -> IRModule:
    """BindParams, FoldConstant (opt_level > 0) and ExpandTupleArguments, as MSC ran them."""
    params = {**_attr_params(_entry_function(mod, entry)), **(params or {})}
    passes = []
    if params:
        passes.append(T.BindParams(entry, params))
    if int(opt_config.get("opt_level", DEFAULT_OPT_LEVEL)) > 0:
        passes.append(T.FoldConstant())
    passes.append(T.ExpandTupleArguments())
    return T.Sequential(passes)(mod)


def _attr_params(func: Function) -> dict:
    """Weights TVM keeps as the trailing params with their values in ``attrs["params"]``
    (``from_exported_program(keep_params_as_input=True)``): bound like user params."""
    values = list(func.attrs.get("params") or [])
    if not values:
        return {}
    num_input = int(func.attrs.get("num_input", len(func.params) - len(values)))
    names = [p.name_hint for p in func.params[num_input:]]
    if len(names) != len(values):
        raise ValidationError(f"attrs['params'] holds {len(values)} tensors for {len(names)} "
                              f"weight params (num_input={num_input})", key="params",
                              hint="num_input must count the inputs that are not weights")
    return {n: np.asarray(getattr(v, "data", v)) for n, v in zip(names, values)}


def _build_config(build_config: dict) -> BuildConfig:
    known = BuildConfig.__dataclass_fields__
    unknown = sorted(set(build_config) - set(known))
    if unknown:
        raise ValidationError(f"unknown build_config keys {unknown}",
                              hint=f"known keys: {', '.join(known)}")
    return BuildConfig(**build_config)


def _layouts(func: Function, mod: IRModule, allow_missing: bool) -> dict:
    """The one place the layout pass is called (``frontends/relax/layout.py``)."""
    return infer_layouts(func, allow_missing=allow_missing, mod=mod)


def _check_supported(view: FunctionView, mod: IRModule, entry: str) -> None:
    items = find_unsupported(view, mod)
    if items:
        raise UnsupportedOpError(f"{len(items)} value(s) of {entry!r} have no graph node",
                                 items=items,
                                 hint="legalized or packed calls (call_tir...) cannot be "
                                      "translated; translate the module before lowering it")


@fewer_collections
def from_relax(mod: Any, params: dict | None = None, trans_config: dict | None = None,
               build_config: dict | None = None,
               opt_config: dict | None = None) -> tuple[MSCGraph, dict[str, np.ndarray]]:
    """Translate a Relax module into an MSCGraph and its weights.

    ``mod`` is an msc IRModule, TVMScript text or a ``tvm.IRModule``; ``params`` binds
    params of the entry function by name. ``trans_config``: ``entry`` ("main"),
    ``allow_layout_missing`` (True). ``build_config``: ``input_aliases``, ``output_aliases``,
    ``use_var_name``, ``float_precision`` (6), ``graph_name``, ``prune_graph``.
    ``opt_config``: ``opt_level`` (1; 0 skips FoldConstant). The weights map each weight
    name to its data, laid out like its tensor, in ``graph.get_weights()`` order.

        >>> graph, weights = from_relax(mod)                       # doctest: +SKIP
        >>> graph.inspect()["nodes"]                               # doctest: +SKIP
        {'total': 2, 'input': 1, 'msc.conv2d_bias': 1}
    """
    trans_config, opt_config = dict(trans_config or {}), dict(opt_config or {})
    config = _build_config(dict(build_config or {}))
    entry = trans_config.get("entry", DEFAULT_ENTRY)
    mod = _prepare(_to_module(mod), entry, params, opt_config)
    func = _entry_function(mod, entry)
    view = FunctionView(func)
    _check_supported(view, mod, entry)
    groups = fuse(view)
    names = name_function(view, mod, config.use_var_name, groups)
    layouts = _layouts(func, mod, trans_config.get("allow_layout_missing", True))
    builder = GraphBuilder(view, mod, names, layouts, groups, config)
    specs, inputs, outputs, refs = builder.build()
    graph = assemble(config.graph_name or entry, specs, inputs, outputs, builder.prims.prims,
                     config, output_kinds(func, len(outputs)))
    graph.set_sources({source: joint for source, joint in builder.sources().items()
                       if joint in graph.node_names})  # prune_graph may have dropped some
    return graph, normalize_weights(graph, refs)

