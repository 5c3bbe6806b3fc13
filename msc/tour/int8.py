"""Demo step: a QDQ model runs on int8 kernels (VNNI when the CPU has it), not fake quantized."""

from __future__ import annotations

import time

from .shared import banner


def _best_ms(fn, x, repeats: int = 5) -> float:
    fn(x)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn(x)
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def step_int8(out: str) -> None:
    """compression.quantize on a small CNN -> relax.build folds the QDQ convs into int8
    kernels; outputs equal to the QDQ graph's float evaluation, and faster."""
    import numpy as np
    import torch

    from msc.codegen import to_relax
    from msc.compression.quantize import apply_plan, calibrate
    from msc.frontends import translate

    from .. import relax
    from ..backend.kernels.int8.gemm import host_vnni

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(16, 64, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(64, 64, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(64, 64, 3, padding=1), torch.nn.ReLU()).eval()
    shape = [1, 16, 28, 28]
    graph, weights = translate.from_torch(model, [(shape, "float32")])
    rng = np.random.default_rng(0)
    data = [{"inp_0": rng.standard_normal(shape).astype("float32")} for _ in range(4)]
    qgraph, qweights = apply_plan(graph, weights, calibrate(graph, weights, data,
                                                            {"executor": "relax"}))
    mod = to_relax(qgraph, qweights)
    ex_int8, ex_fake = relax.build(mod), relax.build(mod, fuse=False)
    ex_float = relax.build(to_relax(graph, weights))
    vms = {name: relax.VirtualMachine(ex, relax.cpu())["main"]
           for name, ex in (("float", ex_float), ("QDQ in float", ex_fake), ("int8", ex_int8))}
    x = data[0]["inp_0"]
    outs = {name: fn(x).numpy() for name, fn in vms.items()}
    banner(f"QDQ convs -> int8 kernels ({'AVX-512 VNNI' if host_vnni() else 'portable'})")
    print(f"folded: {ex_int8.stats['fused']}")
    ms = {name: _best_ms(fn, x) for name, fn in vms.items()}
    ref = outs["float"].astype(np.float64)
    sqnr = 10 * np.log10((ref ** 2).sum() / ((ref - outs["int8"]) ** 2).sum())
    diff = float(np.abs(outs["int8"] - outs["QDQ in float"]).max())
    # exact int32 sums against float32 ones: equal up to the float path's rounding
    close = np.allclose(outs["int8"], outs["QDQ in float"], rtol=1e-4, atol=1e-3)
    print("  ".join(f"{name}: {v:.2f} ms" for name, v in ms.items()))
    print(f"int8 vs QDQ in float: max |diff| {diff:.2e}; SQNR vs float {sqnr:.1f} dB")
    if ex_int8.stats["ops"].get("int8.conv2d") != {"native": 3} or not close or sqnr < 25:
        raise SystemExit("demo: the QDQ convs did not run as int8 kernels correctly")
