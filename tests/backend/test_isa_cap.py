"""The AVX2-only path on any host: ``$MSC_CPU_ISA=avx2`` caps the features LLVM compiles for
(llvm/jit.py's capped_target), and the backend must then pick no kernel that needs AVX-512
(512-bit VNNI, VBMI lookups, the 32-register pixel tile, 16-lane GEMM panels) while every
result still matches onnxruntime."""

import textwrap

import pytest

from msc.backend.llvm.jit import HostTarget, capped_target, vector_lanes
from msc.errors import BuildError
from tests.helpers.isa_child import ROOT, capped_report

ZEN4 = HostTarget("x86_64-unknown-linux-gnu", "znver4",
                  "+avx,+avx2,+fma,+avx512f,+avx512bw,+avx512vl,+avx512vnni,+avx512vbmi,"
                  "-amx-int8,+amx-tile,+evex512,-avx10.1,+f16c")


def test_avx2_cap_drops_every_avx512_feature():
    capped = capped_target(ZEN4, "avx2")
    assert capped.cpu == "x86-64-v3"  # a named CPU would bring AVX-512 back
    on = {f[1:] for f in capped.features.split(",") if f.startswith("+")}
    assert on == {"avx", "avx2", "fma", "f16c"}
    assert "-avx512vnni" in capped.features.split(",") and not capped.has("amx-tile")
    assert vector_lanes(capped) == 8 and vector_lanes(ZEN4) == 16
    assert capped.key_parts() != ZEN4.key_parts()  # its kernels never share cache entries


def test_native_and_empty_leave_the_host_alone():
    assert capped_target(ZEN4, "") is ZEN4 and capped_target(ZEN4, "native") is ZEN4


def test_unknown_isa_is_refused():
    with pytest.raises(BuildError, match="MSC_CPU_ISA"):
        capped_target(ZEN4, "avx9000")


# A child process: host_target() is read once per process, and a fresh kernel cache makes
# every kernel compile here (a cache hit would skip the IR the check reads).
_CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    sys.path.insert(0, {root!r})
    from msc.backend.llvm import jit as jit_module
    seen = []
    codegen = jit_module.JIT._codegen
    def recording(self, text, entry_points, name):
        seen.append(text)
        return codegen(self, text, entry_points, name)
    jit_module.JIT._codegen = recording

    from benchmarks import blocks
    from benchmarks.common import msc_executable, msc_runner, ort_session
    from msc.backend.kernels import pixel_conv
    from msc.backend.kernels.int8 import gemm as int8_gemm
    from msc.backend.kernels.int8 import lut as int8_lut
    from msc.backend.llvm.jit import host_target, vector_lanes
    from msc.compression.quantize.testing import ort_qdq, tiny_conv_onnx

    models = {{"dw3": blocks.depthwise(24, 15, 3, 2, "relu6"),
              "dw5": blocks.depthwise(19, 9, 5, 1, "swish"),
              "se": blocks.squeeze_excite(40, 7, "hsig"),
              "ir": blocks.inverted_residual(8, 10, 3, 3, "hswish", True),
              "fire": blocks.fire(12, 9, 4, 8)}}
    rng = np.random.default_rng(0)
    calib = [rng.standard_normal((1, 3, 12, 12)).astype(np.float32) for _ in range(4)]
    models["int8"] = ort_qdq(tiny_conv_onnx(), calib)
    errors = {{}}
    for name, model in models.items():
        x = calib[0] if name == "int8" else blocks._input(model)
        for threads in (1, 2):
            got = msc_runner(msc_executable(model), threads)(x)
            want = ort_session(model, threads)(x)
            scale = float(np.abs(want).max()) or 1.0
            errors[f"{{name}}/{{threads}}"] = float(np.abs(got - want).max()) / scale
    print(json.dumps({{
        "features": host_target().features, "cpu": host_target().cpu,
        "lanes": vector_lanes(), "vnni": int8_gemm.host_vnni(), "vbmi": int8_lut.host_vbmi(),
        "pixel": pixel_conv.pixel_conv_available(), "errors": errors, "units": len(seen),
        "avx512_calls": sum("llvm.x86.avx512" in text for text in seen),
        "wide_panels": sum("_l16_" in text or "x64_" in text for text in seen)}}))
""")


def test_avx2_only_host_picks_no_avx512_kernel_and_matches_onnxruntime(tmp_path):
    pytest.importorskip("onnxruntime")
    report = capped_report(_CHILD.format(root=ROOT), "avx2", tmp_path)
    assert report["cpu"] == "x86-64-v3" and "+avx512" not in report["features"]
    assert report["lanes"] == 8
    assert not report["vnni"] and not report["vbmi"] and not report["pixel"]
    assert report["units"] > 5  # kernels were compiled here, and their IR was read
    assert report["avx512_calls"] == 0 and report["wide_panels"] == 0
    # float blocks: float32 rounding; int8: onnxruntime and msc may round a requantized
    # value to neighbouring codes, one code step is ~1% of the output range
    for name, err in report["errors"].items():
        assert err < (0.05 if name.startswith("int8") else 1e-4), (name, err)


def test_cache_sizes_come_from_the_host(tmp_path):
    """Blocking reads the host's caches (Linux sysfs), instruction caches skipped; defaults
    (the tuned Zen 4 sizes) when the host does not say."""
    from msc.backend.kernels import direct_conv, pixel_conv
    from msc.backend.runtime.threads import cache_bytes

    for index, (level, kind, size) in enumerate([(1, "Instruction", "32K"), (1, "Data", "48K"),
                                                 (2, "Unified", "2048K"), (3, "Unified", "1M")]):
        folder = tmp_path / f"index{index}"
        folder.mkdir()
        for name, text in (("level", level), ("type", kind), ("size", size)):
            (folder / name).write_text(f"{text}\n")
    root = str(tmp_path)
    assert [cache_bytes(n, root) for n in (1, 2, 3)] == [48 << 10, 2 << 20, 1 << 20]
    missing = str(tmp_path / "nowhere")
    assert [cache_bytes(n, missing) for n in (1, 2, 3)] == [32 << 10, 1 << 20, 8 << 20]
    assert direct_conv._L2_BYTES == cache_bytes(2) // 2
    assert pixel_conv._KC_BYTES == cache_bytes(2) // 4
