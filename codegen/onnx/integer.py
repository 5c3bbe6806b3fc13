"""Integer convolutions and matmuls as ONNX's ConvInteger / MatMulInteger.

Importers widen 8-bit operands before an integer conv (``astype(x, "int32") -
astype(x_zero_point, "int32")``); ONNX convolutions take floats only, but ConvInteger takes
the 8-bit values and their zero points as they were and gives int32, exactly. The widening
nodes are left unread and dropped::

    conv2d(subtract(astype(x_u8), astype(zp_u8)), astype(w_u8))
        -> ConvInteger(x_u8, w_u8, zp_u8)
"""

from __future__ import annotations

from msc.relax.op.registry import ops_with

__all__ = ["integer_operands"]

_NARROW = ("int8", "uint8")
_PASS = ops_with("movement")  # a zero point moved into a one-element tensor stays itself


def _widened(ctx, node):
    """(the 8-bit value, its dtype) when ``node``'s output is an 8-bit value cast wider."""
    while node.optype in _PASS and node.get_inputs() and node.output_at(0).get_size() == 1:
        node = node.producer_and_idx_of(0)[0]
    if node.optype != "astype" or node.input_at(0).dtype not in _NARROW:
        return None
    producer, out = node.producer_and_idx_of(0)
    return ctx.writer.value(producer, out), node.input_at(0).dtype


def _operand(ctx, i: int):
    """(8-bit value, zero point value or "") of input ``i``, or None."""
    node = ctx.node.producer_and_idx_of(i)[0]
    plain = _widened(ctx, node)
    if plain is not None:
        return plain[0], "", plain[1]
    if node.optype != "subtract":
        return None
    value, zero = (_widened(ctx, node.producer_and_idx_of(k)[0]) for k in (0, 1))
    if value is None or zero is None or value[1] != zero[1]:
        return None
    return value[0], zero[0], value[1]


def integer_operands(ctx) -> list | None:
    """``[x, w, x_zero_point, w_zero_point]`` for ConvInteger / MatMulInteger when both
    inputs of the joint are widened 8-bit values, else None."""
    if ctx.out.dtype != "int32" or len(ctx.node.inputs) < 2:
        return None
    parts = [_operand(ctx, i) for i in (0, 1)]
    if None in parts:
        return None
    (x, xz, _), (w, wz, _) = parts
    inputs = [x, w, xz, wz]
    while inputs[-1] == "":
        inputs.pop()
    return inputs
