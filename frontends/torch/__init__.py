"""The torch frontend: nn.Module -> Relax through torch.fx, or torch.export when fx fails.

    from msc.frontends.torch import translate_torch
    result = translate_torch(model, [(("bz", 3, 32, 32), "float32")])
    result.mod.show()           # the Relax module (what TVM's from_fx builds)
    result.via, result.reasons  # "fx" / "export", and why fx was not used
    result.weight_names         # {Constant: state_dict key}

``frontends.torch.api.from_torch`` (``frontends.translate.from_torch``) goes on to the
MSCGraph.

How it is built:

- ``fx.py``: one dispatch loop over fx nodes (``GraphTranslator``), shared by both paths.
  Every call is resolved before anything is emitted (one UnsupportedOpError lists them all),
  and a converter that rejects its arguments does not stop the loop: all failures are
  reported together. fx tracing keeps as leaves only modules that have a converter.
- ``export.py``: torch.export (not decomposed: aten.linear, aten.layer_norm... map onto the
  same converters), parameters and buffers as constants named by their state_dict keys.
- ``convert_*.py``: converters with the torch signature of their target, after the context:
  ``conv2d(ctx, input, weight, bias=None, stride=1, ...)``; the loop binds the node's
  arguments to it once. Tables: ``FX_FUNCTIONS`` (function and method names),
  ``MODULES`` (module type -> converter and the module's settings), ``ATEN`` (ATen names,
  falling back on ``FX_FUNCTIONS``). ``custom_convert_map`` entries take precedence.
- Shapes are read from the struct info the BlockBuilder inferred, never computed.
"""

from .common import Context
from .converters import ATEN, FX_FUNCTIONS, MODULES
from .importer import TorchImport, translate_torch

__all__ = ["ATEN", "FX_FUNCTIONS", "MODULES", "Context", "TorchImport", "translate_torch"]
