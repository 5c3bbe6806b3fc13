"""Argument roles of graph optypes (msc-conventions 4.3).

Each argument of a call plays a role. ``"input"`` arguments are graph edges; every other role
names a weight (when the argument is a constant) or an attr (when it is a ShapeExpr, a
PrimValue or a tuple)::

    roles_of("nn.conv2d", 2)         # ("input", "weight")
    roles_of("nn.relu", 1)           # ("input",)
    roles_of("msc.embedding", 4)     # ("input", "reduce_in", "weight", "expand_out")

A fused ``msc.*`` node lists its roles in the order its pattern captures them; roles past the
call's arguments (``expand_bias``) are values found inside the pattern (see ``fusion.py``).
"""

from __future__ import annotations

__all__ = ["INPUT", "ROLES", "WEIGHT_ROLE_OF_CONST", "roles_of"]

INPUT = "input"
# The role of the weight a ``constant`` node holds.
WEIGHT_ROLE_OF_CONST = "const"

_CONV = ("input", "weight")
_NORM = ("input", "gamma", "beta")
_CONV_BIAS = ("input", "weight", "bias", "expand_bias")

# optype -> roles of its arguments, in argument order. Optypes not listed: all "input". Not an
# op fact: the graph's role names (msc-conventions 4.3), for graph optypes incl. fused ones.
ROLES: dict[str, tuple[str, ...]] = {
    "nn.conv1d": _CONV,
    "nn.conv2d": _CONV,
    "nn.conv3d": _CONV,
    "nn.batch_norm": ("input", "gamma", "beta", "mean", "var"),
    "nn.layer_norm": _NORM,
    "nn.group_norm": _NORM,
    "reshape": ("input", "shape"),
    "broadcast_to": ("input", "shape"),
    "clip": ("input", "min", "max"),
    "full": ("shape", "input"),
    "strided_slice": ("input", "axes", "begin", "end", "strides"),
    "triu": ("input", "k"),
    "tril": ("input", "k"),
    "image.resize2d": ("input", "size"),
    "msc.linear": ("input", "weight"),
    "msc.linear_bias": ("input", "weight", "bias"),
    "msc.conv1d_bias": _CONV_BIAS,
    "msc.conv2d_bias": _CONV_BIAS,
    "msc.embedding": ("input", "weight"),
    "msc.gelu": ("input", "factor_1", "factor_2", "factor_3"),
    "matmul_nbits": ("input", "weight", "scales", "zero_points"),
}

# Optypes whose roles depend on the number of arguments.
_ROLES_BY_COUNT: dict[tuple[str, int], tuple[str, ...]] = {
    ("msc.embedding", 4): ("input", "reduce_in", "weight", "expand_out"),
}


def roles_of(optype: str, num_args: int) -> tuple[str, ...]:
    """The role of each of ``num_args`` arguments of ``optype`` (missing ones are inputs)."""
    roles = _ROLES_BY_COUNT.get((optype, num_args), ROLES.get(optype, ()))
    return tuple(roles[:num_args]) + (INPUT,) * max(num_args - len(roles), 0)
