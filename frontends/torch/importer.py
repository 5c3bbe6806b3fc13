"""Choosing the tracer: torch.fx first, torch.export when fx cannot trace (or convert) the
model. The result says which path ran and why the other was not used::

    result = translate_torch(model, [((1, 3, 224, 224), "float32")])
    result.via, result.reasons      # "export", {"fx": "TraceError: Proxy object cannot ..."}
    result.mod                      # the Relax IRModule
    result.weight_names             # {Constant: state_dict key}
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from msc import relax
from msc.errors import UnsupportedOpError, ValidationError

from .export import export_program, translate_export
from .fx import trace_fx, translate_fx

__all__ = ["TorchImport", "translate_torch"]

logger = logging.getLogger("msc.frontends.torch")
VIAS = ("fx", "export")


@dataclass
class TorchImport:
    """A translated model: the Relax module, the path that produced it and why the other
    path was not taken, and the state_dict key of each weight constant."""

    mod: relax.IRModule
    via: str
    reasons: dict = field(default_factory=dict)
    weight_names: dict = field(default_factory=dict)

    @property
    def info(self) -> dict:
        return {"via": self.via, **{f"{k}_error": v for k, v in self.reasons.items()}}


def _describe(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}"


def _is_program(model) -> bool:
    import torch

    return isinstance(model, torch.export.ExportedProgram)


def _via_fx(model, input_info, custom):
    import torch

    gm = model if isinstance(model, torch.fx.GraphModule) else trace_fx(model, custom)
    return translate_fx(gm, input_info, custom)


def _via_export(model, input_info, custom):
    ep = model if _is_program(model) else export_program(model, input_info)
    return translate_export(ep, input_info, custom)


_PATHS = {"fx": _via_fx, "export": _via_export}


def translate_torch(model, input_info, custom_convert_map: dict | None = None,
                    via: str | None = None) -> TorchImport:
    """Translate ``model`` (an nn.Module, an fx GraphModule or an ExportedProgram) to Relax.

    ``via`` forces a path; by default fx runs first and torch.export takes over when fx
    cannot trace the model or has no converter for some of its ops.
    """
    if via is not None and via not in VIAS:
        raise ValidationError(f"via={via!r} is not a tracing path", key="via",
                              hint="use 'fx', 'export' or None (fx, then export)")
    if _is_program(model):
        via = "export"
    if via == "fx":
        return _forced_fx(model, input_info, custom_convert_map)
    if via is not None:
        mod, names = _PATHS[via](model, input_info, custom_convert_map)
        return _result(mod, via, {}, names)
    try:
        mod, names = _via_fx(model, input_info, custom_convert_map)
        return _result(mod, "fx", {}, names)
    except Exception as err:  # noqa: BLE001  (any fx failure sends us to export)
        fx_error = err
    reason = _describe(fx_error)
    logger.warning("torch.fx could not translate %s (%s); trying torch.export",
                   type(model).__name__, reason)
    try:
        mod, names = _via_export(model, input_info, custom_convert_map)
    except Exception as export_error:
        if isinstance(fx_error, UnsupportedOpError):
            fx_error.add_note(f"torch.export was tried as well and failed: "
                              f"{_describe(export_error)}")
            raise fx_error from export_error
        export_error.add_note(f"torch.fx was tried first and failed: {reason}")
        raise
    return _result(mod, "export", {"fx": reason}, names)


def _forced_fx(model, input_info, custom) -> TorchImport:
    """via="fx": a model torch.fx cannot trace (control flow on traced values, ...) is
    refused with msc's error type, naming the model and torch.fx's reason."""
    import torch

    gm = model
    if not isinstance(model, torch.fx.GraphModule):
        try:
            gm = trace_fx(model, custom)
        except Exception as err:
            raise UnsupportedOpError(
                f"torch.fx cannot trace {type(model).__name__}: {_describe(err)}",
                hint="use via='export', or the default (fx, then torch.export)") from err
    mod, names = translate_fx(gm, input_info, custom)
    return _result(mod, "fx", {}, names)


def _result(mod, via: str, reasons: dict, names: dict) -> TorchImport:
    logger.info("translated the model with torch.%s", via)
    return TorchImport(mod, via, reasons, names)
