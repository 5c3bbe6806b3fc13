"""Demo step: between the int8 GEMMs of onnxruntime's QDQ transformer block, the split of a
fused q / k / v projection, the masked softmax and the residual add + layer norm run on the
bytes (one kernel per Q/DQ chain: fuse/qdq/rows.py), not as float passes between dequantize and
quantize."""

from __future__ import annotations

from msc.compression.quantize.testing import qdq_block

from .shared import banner


def step_int8_rows(out: str) -> None:
    """quantize_static (QDQ) on the block -> msc runs the split, the masked softmax and the
    layer norm as kernels on bytes; SQNR against float as onnxruntime's own int8 run."""
    import numpy as np
    from onnxruntime.quantization import QuantType

    from .qdq import quantized_run

    rng = np.random.default_rng(2)
    data = [rng.random((1, 16, 32), dtype=np.float32) * 2 - 0.5 for _ in range(6)]
    model = qdq_block()
    ex, ours, theirs = quantized_run(model, data, activation_type=QuantType.QUInt8,
                                     weight_type=QuantType.QInt8)
    banner("QDQ split / masked softmax / layer norm -> kernels on bytes")
    fused, ops = ex.stats["fused"], ex.stats["ops"]
    names = ("qdq:split", "qdq:softmax", "qdq:add->layer_norm")
    print({k: v for k, v in fused.items() if k in names})
    print(f"SQNR vs float: msc int8 {ours:.1f} dB, onnxruntime int8 {theirs:.1f} dB")
    if (any(fused.get(k) != 1 for k in names)
            or "nn.softmax" in ops or "nn.layer_norm" in ops
            or ours < theirs - 0.5):
        raise SystemExit("demo: the QDQ softmax / layer norm did not run on bytes as it should")
