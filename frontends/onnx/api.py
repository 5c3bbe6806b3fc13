"""``from_onnx``: an ONNX model -> MSCGraph (through Relax), or the Relax module itself.

    from msc.frontends.onnx.api import from_onnx    # or frontends.translate.from_onnx
    graph, weights = from_onnx("model.onnx", input_info={"data": [1, 3, 224, 224]})
    mod, weights = from_onnx(model_proto, as_msc=False)      # Relax IRModule, weights bound
"""

from __future__ import annotations

from msc.gc_tuning import fewer_collections

from ..relax.translate import from_relax
from .importer import OnnxImporter

__all__ = ["from_onnx"]


@fewer_collections
def from_onnx(model, input_info=None, opset: int | None = None, trans_config=None,
              build_config=None, as_msc: bool = True, custom_convert_map: dict | None = None):
    """Translate an ONNX model.

    Args:
        model: an ``onnx.ModelProto``, a path to a ``.onnx`` file (external data is read from
            the files next to it) or the serialized bytes.
        input_info: shapes (and optionally dtypes) overriding the model's inputs, by name
            (``{"data": [1, 3, 224, 224]}``, ``{"ids": ([1, "seq"], "int64")}``) or as a list
            in input order. A str dim, or an ONNX ``dim_param``, becomes a named symbolic dim.
        opset: the default-domain opset to convert with (the model's by default).
        trans_config, build_config: passed to ``from_relax`` (as_msc=True only).
        as_msc: return ``(MSCGraph, weights)``; False returns ``(IRModule, weights)`` with the
            weights bound in the module as constants.
        custom_convert_map: ``{op_type: fn(ctx, node)}`` or ``{op_type: {since_opset: fn}}``;
            adds or overrides converters (see frontends/onnx/context.py for ctx and node).

    Raises:
        UnsupportedOpError: listing every op that cannot be converted (op type, opset, count,
            first node name, reason).
    """
    mod, weights = OnnxImporter(model, input_info, opset, custom_convert_map).convert()
    if not as_msc:
        return mod, weights
    return from_relax(mod, trans_config=trans_config, build_config=build_config)
