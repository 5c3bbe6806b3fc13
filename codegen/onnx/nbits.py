"""``matmul_nbits`` as ONNX: onnxruntime's ``com.microsoft.MatMulNBits``, whose weight bytes
are the op's own (``[N, groups, block * bits / 8]``, int4 two per byte).

MatMulNBits takes a ``block_size`` that is a power of two >= 16; a per-channel int8 weight
(one group of K codes per row, K any size) is written as one block per row of the next such
size, the codes past K padding (MatMulNBits ignores them). Not as ``DequantizeLinear`` +
``MatMul``: onnxruntime's full optimization fuses that pair into a MatMulNBits that rounds the
activations to int8 (its QDQ accuracy level 4), 1% off on a test case.
Zero points: msc keeps one uint8 code per group, MatMulNBits reads int4 ones two per byte
(group 2j in the low nibble), so they are packed here.
"""

from __future__ import annotations

import numpy as np

from .rows import Row

__all__ = ["NBITS_ROWS"]

MS_DOMAIN = "com.microsoft"


def _block_ok(block: int) -> bool:
    return block >= 16 and not block & (block - 1)


def _packed_zeros(zeros: np.ndarray, bits: int) -> np.ndarray:
    """[N, groups] codes as MatMulNBits' zero_points: [N * ceil(groups * bits / 8)] uint8."""
    zeros = np.asarray(zeros, np.uint8)
    if bits == 8:
        return zeros.reshape(-1)
    n, groups = zeros.shape
    padded = np.zeros((n, groups + groups % 2), np.uint8)
    padded[:, :groups] = zeros
    return ((padded[:, 0::2] & 0xF) | (padded[:, 1::2] << 4)).reshape(-1)


def _matmul_nbits(ctx):
    bits, block, k = (ctx.attr(a) for a in ("bits", "block_size", "in_features"))
    data = {role: ctx.weight_data(role) for role in ("weight", "scales", "zero_points")}
    if any(v is None for v in data.values()):
        raise ctx.fail("needs its packed weight, scales and zero points as constants")
    n, groups = data["weight"].shape[:2]
    x = ctx.input(0)
    weight = data["weight"]
    if not _block_ok(block):
        if bits != 8 or groups != 1:
            raise ctx.fail(f"block_size={block} is no power of two >= 16 (MatMulNBits)")
        block = max(16, 1 << (int(block) - 1).bit_length())  # one padded block per row
        weight = np.zeros((n, 1, block), np.uint8)
        weight[..., : data["weight"].shape[2]] = data["weight"]
    inputs = [ctx.const(weight, "weight"),
              ctx.const(np.asarray(data["scales"], np.float32).reshape(-1), "scales"),
              ctx.const(_packed_zeros(data["zero_points"], bits), "zero_points")]
    return ctx.emit("MatMulNBits", [x, *inputs], domain=MS_DOMAIN, K=int(k), N=int(n),
                    bits=int(bits), block_size=int(block))


NBITS_ROWS = {"matmul_nbits": Row(_matmul_nbits)}
