"""This CPU's fp32 FMA peak, one thread: measured with an llvmlite kernel, and by formula.

    .venv/bin/python benchmarks/peak.py [--accumulators 16] [--repeats 7] [--min-time 0.1]

The probe is a loop of ``--accumulators`` independent vector FMA chains (``acc = acc * 0.5 +
0.5``) as wide as the host allows: LLVM reports the host features and
``msc.backend.vector_lanes`` picks 16 fp32 lanes with AVX-512, 8 with AVX/AVX2, else 4. With
more chains in flight than FMA latency x FMA pipes, the loop runs at the core's FMA throughput,
which is the highest fp32 rate any kernel can reach.

The formula peak is 2 FMA pipes x lanes x 2 flop x clock, with the clock from /proc/cpuinfo.
On a VM that is the nominal clock, not the one the core actually runs at, and some cores
(Zen 4) execute a 512-bit FMA as two 256-bit halves, so the formula can overstate what is
reachable; that is why both are reported.
"""

from __future__ import annotations

import ctypes
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from llvmlite import ir

from benchmarks.common import per_call
from msc.backend import JIT, host_target, vector_lanes
from msc.backend.llvm.loops import F32, I64, entry_alloca, for_range

TRIPS = 1_000_000  # loop trips per call: a few ms at 100 GFLOP/s


@dataclass(frozen=True)
class FmaProbe:
    """One compiled probe: ``run()`` performs ``flops`` floating-point operations."""

    run: object
    flops: float
    lanes: int
    accumulators: int


def probe_module(lanes: int, accumulators: int) -> tuple[ir.Module, str]:
    """``float probe(i64 n)``: n trips of ``accumulators`` independent ``<lanes x float>``
    fmuladds; returns the sum of the accumulators so nothing is dead code."""
    vec = ir.VectorType(F32, lanes)
    module = ir.Module(name="msc_bench_peak")
    symbol = f"msc_bench_fma_peak_v{lanes}_a{accumulators}"
    fn = ir.Function(module, ir.FunctionType(F32, [I64]), symbol)
    fma = ir.Function(module, ir.FunctionType(vec, [vec] * 3), f"llvm.fmuladd.v{lanes}f32")
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    half = ir.Constant(vec, [0.5] * lanes)
    slots = [entry_alloca(builder, vec, f"acc{j}") for j in range(accumulators)]
    for slot in slots:
        builder.store(ir.Constant(vec, [0.0] * lanes), slot)
    with for_range(builder, fn.args[0]):
        for slot in slots:
            builder.store(builder.call(fma, [builder.load(slot), half, half]), slot)
    total = builder.load(slots[0])
    for slot in slots[1:]:
        total = builder.fadd(total, builder.load(slot))
    builder.ret(builder.extract_element(total, ir.Constant(ir.IntType(32), 0)))
    return module, symbol


def fma_probe(accumulators: int = 16, lanes: int | None = None) -> FmaProbe:
    """Compile the probe for the host's widest vector (or ``lanes``), uncached."""
    lanes = lanes or vector_lanes()
    module, symbol = probe_module(lanes, accumulators)
    fn = JIT(cache=None).compile(module, [symbol]).cfunc(symbol, ctypes.c_float, ctypes.c_int64)
    return FmaProbe(lambda: fn(TRIPS), 2.0 * lanes * accumulators * TRIPS, lanes, accumulators)


def cpuinfo_mhz() -> float | None:
    """The first ``cpu MHz`` in /proc/cpuinfo (nominal on a VM), or None where there is none."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return None
    values = [line.split(":")[1] for line in lines if line.startswith("cpu MHz")]
    return float(values[0]) if values else None


def formula_peak(lanes: int | None = None, fma_pipes: int = 2) -> float | None:
    """GFLOP/s = pipes x lanes x 2 x nominal clock; None when the clock is unknown."""
    mhz = cpuinfo_mhz()
    return fma_pipes * (lanes or vector_lanes()) * 2 * mhz / 1e3 if mhz else None


def gflops(probe: FmaProbe, min_time: float) -> float:
    """One timed run of at least ``min_time`` seconds."""
    return probe.flops / per_call(probe.run, min_time) / 1e9


def measured_peak(probe: FmaProbe | None = None, repeats: int = 7,
                  min_time: float = 0.1) -> float:
    """Best GFLOP/s over ``repeats`` runs; the best run is the one least disturbed by load."""
    probe = probe or fma_probe()
    probe.run()
    return max(gflops(probe, min_time) for _ in range(repeats))


def describe_host() -> str:
    target = host_target()
    return (f"LLVM cpu {target.cpu}, {vector_lanes()} fp32 lanes, /proc/cpuinfo clock "
            f"{cpuinfo_mhz()} MHz (nominal)")


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accumulators", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--min-time", type=float, default=0.1)
    args = parser.parse_args()
    probe = fma_probe(args.accumulators)
    measured, formula = measured_peak(probe, args.repeats, args.min_time), formula_peak()
    print(describe_host())
    print(f"measured FMA peak ({probe.accumulators} chains x {probe.lanes} lanes): "
          f"{measured:.1f} GFLOP/s")
    if formula:
        print(f"formula peak 2 pipes x {probe.lanes} lanes x 2 x nominal clock: "
              f"{formula:.1f} GFLOP/s (measured = {100 * measured / formula:.0f}% of it)")


if __name__ == "__main__":
    main()
