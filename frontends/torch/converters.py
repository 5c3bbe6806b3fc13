"""The converter tables, assembled from the family modules.

``FX_FUNCTIONS`` is keyed by the name fx records for functions and tensor methods alike
(``torch.add``, ``operator.add`` and ``Tensor.add`` are all ``"add"``); ``MODULES`` by module
type; ``ATEN`` by ATen op name (``"add"`` or ``"add.Tensor"`` for one overload) and falls back
on ``FX_FUNCTIONS`` where the signatures agree::

    FX_FUNCTIONS["relu"], MODULES[nn.Conv2d], ATEN["embedding"]
"""

from __future__ import annotations

from . import convert_create, convert_elementwise, convert_nn, convert_scatter, convert_tensor
from .convert_modules import MODULES

__all__ = ["ATEN", "FX_FUNCTIONS", "MODULES"]

FX_FUNCTIONS: dict = {
    **convert_elementwise.FUNCTIONS,
    **convert_tensor.FUNCTIONS,
    **convert_scatter.FUNCTIONS,
    **convert_create.FUNCTIONS,
    **convert_nn.FUNCTIONS,
}


def _no_op(ctx, *args, **kwargs):
    """Export's runtime assertions and metadata checks: nothing to compute."""
    return


ATEN: dict = {
    **FX_FUNCTIONS,
    **convert_elementwise.ATEN,
    **convert_tensor.ATEN,
    **convert_create.ATEN,
    **convert_nn.ATEN,
    "_assert_tensor_metadata": _no_op, "_assert_scalar": _no_op, "_assert_async": _no_op,
    "sym_constrain_range_for_size": _no_op, "sym_constrain_range": _no_op,
    "_check_is_size": _no_op,
}
