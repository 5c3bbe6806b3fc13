"""``msc demo`` step: a small BERT from a transformers config (random weights, nothing
downloaded) through from_torch, built with the fused transformer kernels (attention with heads
read in place, residual layer norm, dense + gelu), equal to torch."""

from __future__ import annotations

import time

import numpy as np

from .shared import banner


def _tiny_bert():
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=100, hidden_size=64, num_hidden_layers=2,
                                     num_attention_heads=4, intermediate_size=128,
                                     max_position_embeddings=64)
    return transformers.BertModel(config).eval()


def _best_ms(fn, repeats: int = 20) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def step_transformer(out: str) -> None:
    """A 2-layer BERT through from_torch and relax.build, vs torch (rtol 1e-4, atol 1e-5)."""
    banner("Transformers: BERT through from_torch, fused attention / layer norm / gelu")
    try:
        import torch
        import transformers  # noqa: F401  (optional dependency)
    except ImportError:
        print("(torch / transformers not installed: step skipped)")
        return
    from msc import relax
    from msc.frontends.torch import translate_torch

    model = _tiny_bert()
    ids = np.random.default_rng(1).integers(0, 100, (1, 32), dtype=np.int64)
    mod = translate_torch(model, [([1, 32], "int64")]).mod
    ex = relax.build(mod)
    fn = relax.VirtualMachine(ex, relax.cpu())["main"]
    got = fn(ids)[0].numpy()
    with torch.no_grad():
        want = model(torch.from_numpy(ids)).last_hidden_state.numpy()
    diff = float(np.abs(got - want).max())
    if got.shape != want.shape or not np.allclose(got, want, rtol=1e-4, atol=1e-5):
        raise SystemExit(f"BERT through msc differs from torch by up to {diff:.3g}")
    fused = ex.stats["fused"]
    if not fused.get("attention"):
        raise SystemExit(f"the attention was not fused: {fused}")
    print(f"BertModel (2 layers, hidden 64, 4 heads), ids [1, 32] -> {got.shape}: max |msc - "
          f"torch| = {diff:.2e}")
    print("fused:", ", ".join(f"{k} x{v}" for k, v in sorted(fused.items())))
    kernels = ex.stats["kernels"]
    print(f"calls: {kernels['native']} native, {kernels['tir']} compiled TIR, "
          f"{kernels['numpy']} numpy (free views)")
    with torch.no_grad():
        t_torch = _best_ms(lambda: model(torch.from_numpy(ids)))
    print(f"latency (best of 20, 1 thread): msc {_best_ms(lambda: fn(ids)):.2f} ms, "
          f"torch eager {t_torch:.2f} ms")
