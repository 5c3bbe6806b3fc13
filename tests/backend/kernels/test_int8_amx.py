"""The int8 GEMM on AMX tiles (int8/amx.py): picked only where the host has AMX-INT8, Linux
granted the tile state and $MSC_CPU_ISA does not cap it; and where it runs, every output byte
is the VNNI driver's (both sum the same integer products exactly in int32)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from msc.backend.kernels.int8 import amx
from msc.backend.kernels.int8.bmm import QBatchMatmul
from msc.backend.kernels.int8.conv import QConv2d, QDense
from msc.backend.kernels.int8.gemm import (
    QGemmConfig,
    gemm_blocks,
    host_amx,
    host_vnni,
    qmatmul,
)
from msc.backend.llvm.jit import HostTarget, capped_target
from msc.backend.runtime.threads import num_threads
from tests.helpers.isa_child import ROOT, capped_report

SAPPHIRE = HostTarget("x86_64-unknown-linux-gnu", "sapphirerapids",
                      "+avx2,+avx512f,+avx512bw,+avx512vnni,+amx-tile,+amx-int8,+amx-bf16,"
                      "+evex512")
ZEN4 = HostTarget("x86_64-unknown-linux-gnu", "znver4",
                  "+avx2,+avx512f,+avx512bw,+avx512vnni,-amx-tile,-amx-int8,+evex512")
needs_amx = pytest.mark.skipif(not host_amx(), reason="the host runs no AMX-INT8 tiles")

# (M, K, N) on tiles (8+ rows, K 128+, 1M+ multiply-adds): whole blocks; row, column and K
# tails; one row tile (M <= 16); exactly MIN_ROWS rows. Under the thresholds (the VNNI
# fallback in the same kernel): few rows, K under 128, little work
SHAPES = [(64, 128, 128), (197, 768, 200), (33, 260, 130), (16, 1028, 70), (100, 196, 70),
          (8, 2048, 64), (33, 100, 70), (7, 256, 640), (40, 60, 33), (300, 96, 1)]
OUTS = ("s32", "f32", "u8", "s8")


def test_the_cap_and_the_features_decide():
    assert not host_amx(capped_target(SAPPHIRE, "avx512"))
    assert not host_amx(capped_target(SAPPHIRE, "avx2"))
    assert not host_amx(ZEN4)
    assert QGemmConfig("col", "u8", vnni=False).amx is False  # tiles only beside VNNI
    assert QGemmConfig("col", "u8", vnni=True, amx=False).amx is False
    assert QGemmConfig("col", "u8", vnni=host_vnni()).amx is host_amx()


@needs_amx
def test_an_amx_host_gets_the_tile_driver():
    assert amx.tile_permission()  # asked once; granted (Linux 5.16+ on an AMX CPU)
    cfg = QGemmConfig("col", "u8", vnni=True)
    assert cfg.amx and "_amx_" in cfg.symbol and "_vnni_" in QGemmConfig(
        "col", "u8", vnni=True, amx=False).symbol


def _operands(rng, channel, m, k, n):
    u8 = rng.integers(0, 256, (m, k) if channel == "col" else (k, n), dtype=np.uint8)
    s8 = rng.integers(-128, 128, (k, n) if channel == "col" else (m, k), dtype=np.int8)
    return (u8, s8) if channel == "col" else (s8, u8)


def _epilogue(rng, channel, m, n):
    chans = n if channel == "col" else m
    return {"scale": rng.uniform(1e-4, 2e-3, chans).astype(np.float32),
            "bias": rng.standard_normal(chans).astype(np.float32), "out_scale": 0.07,
            "out_zero": 5}


@needs_amx
@pytest.mark.parametrize("channel", ["col", "row"])
@pytest.mark.parametrize("m,k,n", SHAPES)
def test_amx_gives_the_vnni_bytes(channel, m, k, n):
    rng = np.random.default_rng(m * 7 + k * 3 + n)
    a, b = _operands(rng, channel, m, k, n)
    wide = (a.astype(np.int64) - 11) @ b.astype(np.int64) if channel == "col" else (
        a.astype(np.int64) @ (b.astype(np.int64) - 11))
    epi = _epilogue(rng, channel, m, n)
    for out in OUTS:
        kw = dict(channel=channel, out=out, **(epi if out != "s32" else {}))
        tiles = qmatmul(a, b, 11, amx=True, relu=out == "u8", **kw)
        vnni = qmatmul(a, b, 11, amx=False, relu=out == "u8", **kw)
        assert tiles.tobytes() == vnni.tobytes(), out
        if out == "s32":
            np.testing.assert_array_equal(tiles, wide)


def test_tile_rows_shape_the_row_split():
    """Split over threads, the AMX driver's blocks of rows are whole 32-row blocks (a block
    cut to 17 rows wastes 15 tile rows); panels go first when there are as many."""
    rows = gemm_blocks(1040, 512, 2, amx.BLOCK)
    assert [r0 % 32 for r0, *_ in rows] == [0] * 4 and rows[-1][1] == 1040
    assert all(j0 == 0 and j1 == 512 for *_, j0, j1 in rows)
    panels = gemm_blocks(197, 768, 2, amx.BLOCK)  # 12 panels, 7 blocks of rows
    assert {(r0, r1) for r0, r1, *_ in panels} == {(0, 197)} and len(panels) == 4
    assert gemm_blocks(197, 768, 2)[0][:2] != (0, 197)  # 6-row VNNI tiles: rows


@needs_amx
@pytest.mark.parametrize("m,k,n", [(197, 768, 768), (1040, 256, 128)])
def test_two_threads_give_one_threads_bytes(m, k, n):
    rng = np.random.default_rng(m)
    a, b = _operands(rng, "col", m, k, n)
    epi = _epilogue(rng, "col", m, n)
    with num_threads(1):
        one = qmatmul(a, b, 5, out="u8", **epi)
    with num_threads(2):
        two = qmatmul(a, b, 5, out="u8", **epi)
    assert one.tobytes() == two.tobytes() == qmatmul(a, b, 5, out="u8", amx=False,
                                                     **epi).tobytes()


@needs_amx
@pytest.mark.parametrize("post", [None, ("u8", 0.05, 128, 1.5, 0.25, True)])
def test_dense_and_its_quantized_chain_match_the_portable_path(post):
    """QDense (int8 dense / MatMul / 1x1 conv rows) takes the host's tiles; the portable
    driver (vnni=False) sums the same integers: same bytes, the ``mid`` chain included."""
    rng = np.random.default_rng(5)
    x, w = rng.integers(0, 256, (3, 70, 192), dtype=np.uint8), rng.integers(
        -128, 128, (192, 96), dtype=np.int8)
    scale = rng.uniform(1e-4, 1e-3, 96).astype(np.float32)
    kernels = [QDense(w, "uint8", 9, scale, None, ("u8", 0.1, 3), post=post, vnni=v)
               for v in (None, False)]
    assert kernels[0].cfg.amx and not kernels[1].cfg.amx
    got = [k(x, np.empty((3, 70, 96), np.uint8)) for k in kernels]
    assert got[0].tobytes() == got[1].tobytes()
    assert len(np.unique(got[0])) > 20  # the check sees real values, not a clamped block


@needs_amx
@pytest.mark.parametrize("c,o,kernel,stride", [(32, 48, 3, 1), (48, 40, 3, 2), (128, 96, 1, 1)])
def test_conv_unfold_gemm_matches_the_portable_path(c, o, kernel, stride):
    """QConv2d's unfold blocks call the "row" driver by address: tiles (``tdpbsud``, the int8
    weight as A) where the host has them, the same bytes as the portable driver."""
    rng = np.random.default_rng(c + o)
    x = rng.integers(0, 256, (2, c, 23, 21), dtype=np.uint8)
    w = rng.integers(-128, 128, (o, c, kernel, kernel), dtype=np.int8)
    pad = kernel // 2
    attrs = {"strides": (stride, stride), "padding": (pad,) * 4, "dilation": (1, 1)}
    scale = rng.uniform(1e-4, 1e-3, o).astype(np.float32)
    kernels = [QConv2d(w, attrs, "uint8", 7, scale, None, ("u8", 0.05, 2), vnni=v)
               for v in (None, False)]
    assert kernels[0].cfg.amx and not kernels[1].cfg.amx
    oh, ow = (23 + 2 * pad - kernel) // stride + 1, (21 + 2 * pad - kernel) // stride + 1
    got = [k(x, np.empty((2, o, oh, ow), np.uint8)) for k in kernels]
    assert got[0].tobytes() == got[1].tobytes()
    assert len(np.unique(got[0])) > 20


@needs_amx
def test_batch_matmul_row_term_matches_the_portable_path():
    """int8 batch matmul ("col" with a per-row term: two activations' zero points)."""
    rng = np.random.default_rng(6)
    a = rng.integers(0, 256, (2, 3, 50, 128), dtype=np.uint8)
    b = rng.integers(0, 256, (2, 3, 128, 192), dtype=np.uint8)
    kernels = [QBatchMatmul(("uint8", 120), ("uint8", 131), 1.0, None, "s32", vnni=v)
               for v in (None, False)]
    assert kernels[0].cfg.amx
    got = [k(a, b, np.empty((2, 3, 50, 192), np.int32)) for k in kernels]
    np.testing.assert_array_equal(got[0], got[1])
    want = (a.astype(np.int64) - 120) @ (b.astype(np.int64) - 131)
    np.testing.assert_array_equal(got[0], want)


_CHILD_SHAPES = [(64, 128, 128), (40, 60, 33), (33, 100, 70)]


def digest_report() -> dict:
    """What this process picks and a digest of its outputs on _CHILD_SHAPES (both
    orientations, int32 and requantized)."""
    digest = hashlib.sha256()
    for channel in ("col", "row"):
        for m, k, n in _CHILD_SHAPES:
            a, b = _operands(np.random.default_rng(m + k + n), channel, m, k, n)
            for out in ("s32", "u8"):
                digest.update(qmatmul(a, b, 7, channel=channel, out=out, scale=0.01,
                                      out_scale=0.3, out_zero=4).tobytes())
    cfg = QGemmConfig("col", "u8", host_vnni())
    return {"amx": host_amx(), "cfg_amx": cfg.amx, "symbol": cfg.symbol, "vnni": host_vnni(),
            "digest": digest.hexdigest()}


_CHILD = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, {root!r})
    from tests.backend.kernels.test_int8_amx import digest_report
    print(json.dumps(digest_report()))
""")


@pytest.mark.parametrize("isa", ["avx512", "avx2"])
def test_a_capped_child_gets_the_same_bytes(isa, tmp_path):
    """Under MSC_CPU_ISA=avx512 (an AMD EPYC's set) and avx2 the child picks no tiles and
    computes the very bytes this process computes (on tiles where the host has them)."""
    report, here = capped_report(_CHILD.format(root=ROOT), isa, tmp_path), digest_report()
    assert report["digest"] == here["digest"]
    assert not report["amx"] and not report["cfg_amx"] and "_amx_" not in report["symbol"]
    assert report["vnni"] == (isa == "avx512" and here["vnni"])


_FORK = textwrap.dedent("""
    import os, sys
    import numpy as np
    sys.path.insert(0, {root!r})
    from msc.backend.kernels.int8.gemm import host_amx, qmatmul
    assert host_amx()
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (64, 128), dtype=np.uint8)
    b = rng.integers(-128, 128, (128, 64), dtype=np.int8)
    want = qmatmul(a, b, amx=False)
    pid = os.fork()
    if pid == 0:  # the child asks nothing: the permission came with the fork
        os._exit(0 if np.array_equal(qmatmul(a, b, amx=True), want) else 3)
    _, status = os.waitpid(pid, 0)
    print(status)
""")


@needs_amx
def test_a_forked_child_inherits_the_tile_permission():
    out = subprocess.run([sys.executable, "-c", _FORK.format(root=ROOT)], check=True,
                         capture_output=True, text=True, timeout=600)
    assert out.stdout.split()[-1] == "0"  # not SIGILL (132 / signal 4), not a wrong result
