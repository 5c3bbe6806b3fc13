"""torch.export -> Relax: the ATen graph of an ExportedProgram through the ATen table.

Parameters, buffers and lifted constants arrive as placeholders; they become constants named
by their state_dict keys. Named dynamic dims of ``input_info`` become ``torch.export.Dim``s,
so the program stays symbolic in them::

    ep = export_program(model, [(("bz", 8), "int64")])
    mod, names = translate_export(ep, [(("bz", 8), "int64")])
"""

from __future__ import annotations

import inspect

from msc.errors import UnsupportedOpError, ValidationError

from .common import ParamTable, input_vars, to_dtype
from .converters import ATEN
from .fx import GraphTranslator, Target, resolve_name

__all__ = ["ExportTranslator", "export_program", "translate_export"]

_FIRST_EXAMPLE_DIM = 4


def _example_sizes(input_info) -> dict:
    """A distinct example size per named dim, avoiding 0/1 (torch specializes them) and the
    static dims of the inputs (torch would take equal sizes for the same dim)."""
    static = {int(d) for shape, _ in input_info for d in shape if not isinstance(d, str)}
    names = [d for shape, _ in input_info for d in shape if isinstance(d, str)]
    sizes, candidate = {}, _FIRST_EXAMPLE_DIM
    for name in dict.fromkeys(names):
        while candidate in static:
            candidate += 1
        sizes[name] = candidate
        candidate += 1
    return sizes


def _example_input(shape, dtype: str):
    import torch

    dtype = getattr(torch, to_dtype(dtype))
    if dtype.is_floating_point:
        return torch.randn(shape).to(dtype)
    if dtype == torch.bool:
        return torch.ones(shape, dtype=dtype)
    return torch.zeros(shape, dtype=dtype)


def export_program(model, input_info):
    """torch.export.export with example inputs made from ``input_info``. Named dims are
    ``Dim.DYNAMIC`` (export infers their ranges, e.g. a sequence bounded by the position
    table); equal names share an example size, so export sees them as one dim."""
    import torch

    sizes = _example_sizes(input_info)
    args = tuple(_example_input([sizes.get(d, d) for d in shape], dtype)
                 for shape, dtype in input_info)
    dynamic = tuple({k: torch.export.Dim.DYNAMIC for k, d in enumerate(shape)
                     if isinstance(d, str)} or None for shape, _ in input_info)
    if _takes_varargs(model):
        dynamic = (dynamic,)
    with torch.no_grad():
        ep = torch.export.export(model, args, dynamic_shapes=dynamic if sizes else None,
                                 strict=False)
    return _functional(ep)


def _functional(ep):
    """Writes into views (``y[:, 0] = 0``, ``x[:, :4].relu_()``) as slice_scatter /
    select_scatter: exported graphs keep in-place ATen ops, and converting those to new values
    would lose the write to the viewed tensor. Decomposes nothing else (an empty table)."""
    if any(_mutates(node) for node in ep.graph.nodes):
        return ep.run_decompositions({})
    return ep


def _mutates(node) -> bool:
    schema = getattr(node.target, "_schema", None)
    return schema is not None and schema.is_mutable


def _takes_varargs(model) -> bool:
    """forward(self, *args): export wants the dynamic shapes of args as one tuple."""
    params = list(inspect.signature(model.forward).parameters.values())
    return bool(params) and params[0].kind is inspect.Parameter.VAR_POSITIONAL


def _aten_names(target) -> tuple:
    """Lookup keys of an ATen overload, most specific first: add.Tensor, add."""
    schema = getattr(target, "_schema", None)
    if schema is None:
        return (getattr(target, "__name__", None),)
    packet = schema.name.split("::", 1)[-1]
    return f"{packet}.{schema.overload_name or 'default'}", packet


class ExportTranslator(GraphTranslator):
    """An ExportedProgram (ATen ops) -> Relax."""

    def __init__(self, ep, custom_convert_map: dict | None = None):
        super().__init__(custom_convert_map)
        self.ep = ep
        signature = ep.graph_signature
        self.user_inputs = [s.arg.name for s in signature.input_specs
                            if s.kind.name == "USER_INPUT"]
        self.tensors = {s.arg.name: s.target for s in signature.input_specs
                        if s.kind.name != "USER_INPUT"}
        self.params = ParamTable(s.target for s in signature.input_specs
                                 if s.kind.name in ("PARAMETER", "BUFFER"))

    def display_name(self, node) -> str:
        return str(node.target) if hasattr(node.target, "_schema") else getattr(
            node.target, "__name__", str(node.target))

    def resolve(self, node) -> Target | None:
        if node.target in self.custom:
            return Target(self.custom[node.target])
        names = (str(node.target),) + _aten_names(node.target)
        for name in names:
            target = resolve_name(name, self.custom, ATEN)
            if target is not None:
                return target
        return None

    def placeholder(self, node):
        if node.name in self.tensors and not node.users:
            return None  # state the program does not read (BatchNorm's num_batches_tracked)
        if node.name in self.tensors:
            key = self.tensors[node.name]
            value = self.ep.state_dict.get(key)
            if value is None:
                value = self.ep.constants[key]
            return self.params.get(value, key)
        return self._inputs.pop(0)

    def get_attr(self, node):
        raise UnsupportedOpError("get_attr in an exported program (a submodule call such as "
                                 "torch.cond)", node=node.name)

    def user_outputs(self, value):
        """Drop the buffer mutations export prepends to the outputs."""
        specs = self.ep.graph_signature.output_specs
        flat = list(value) if isinstance(value, (list, tuple)) else [value]
        if len(specs) == len(flat):
            flat = [v for v, s in zip(flat, specs) if s.kind.name in ("USER_OUTPUT",
                                                                        "LOSS_OUTPUT")]
        out_spec = self.ep.call_spec.out_spec
        if len(flat) == 1 and out_spec is not None and out_spec.is_leaf():
            return flat[0]
        return tuple(flat)


def translate_export(ep, input_info, custom_convert_map: dict | None = None):
    """An ExportedProgram -> (IRModule, {Constant: state_dict key})."""
    translator = ExportTranslator(ep, custom_convert_map)
    inputs = input_vars(input_info)
    if len(inputs) != len(translator.user_inputs):
        raise ValidationError(f"the program takes {len(translator.user_inputs)} inputs but "
                              f"input_info gives {len(inputs)}")
    mod = translator.translate(ep.graph, inputs, translator.user_outputs)
    return mod, translator.params.names
