"""Cost grows linearly in the graph, and nothing recurses in its depth.

A chain of a few op kinds (MatMul, Add, Sigmoid, Mul, Tanh, Neg, Transpose pairs) goes through
every stage of the tool at two lengths, through benchmarks/scaling.py's own stage runner:
from_onnx, from_torch, from_relax, TVMScript printing and parsing, the Relax / torch / ONNX
codegens, relax.build, the graph JSON round trip and a VM run (checked against numpy). The work
is counted, not timed: the Python calls a stage makes (cProfile's count, C functions included)
grow by the length ratio (4x) up to a small slack. The longer chain runs under a recursion
limit a few hundred frames above the test, far below its length. Seconds at 1k to 100k joints:
``benchmarks/scaling.py``.
"""

import cProfile
import inspect
import pstats
import sys

import pytest

pytest.importorskip("torch")

from benchmarks.scaling import STAGES, Run
from benchmarks.scaling_models import Chain

SHORT, LONG = 150, 600
SLACK = 1.06  # a stage may make 6% more calls per joint on the long chain, not more
HEADROOM = 300  # frames the stages may use above the test; the long chain is twice as deep


def _count_calls(fn):
    profile = cProfile.Profile()
    profile.enable()
    try:
        result = fn()
    finally:
        profile.disable()
    return result, pstats.Stats(profile).total_calls


def _run(size: int, folder, measure) -> Run:
    chain = Chain("mixed", size)
    x = chain.input()
    run = Run(chain.onnx(), chain.torch(), [((1, 4), "float32")], [x], chain.reference(x),
              1, STAGES, 1e-4, measure)
    run.all(str(folder))
    return run


@pytest.fixture(scope="module")
def counts(tmp_path_factory):
    _run(16, tmp_path_factory.mktemp("warm"), lambda fn: (fn(), 0))  # kernels, caches
    short = _run(SHORT, tmp_path_factory.mktemp("short"), _count_calls)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack(0)) + HEADROOM)
    try:
        long = _run(LONG, tmp_path_factory.mktemp("long"), _count_calls)
    finally:
        sys.setrecursionlimit(limit)
    return short, long


def test_every_stage_ran_on_both_chains_and_the_vm_matched_numpy(counts):
    short, long = counts
    assert list(short.times) == list(long.times)
    assert sorted(short.times) == sorted(STAGES)
    assert long.facts["joints"] >= LONG > HEADROOM  # deeper than the recursion headroom
    assert long.facts["run max rel err"] <= 1e-4


@pytest.mark.parametrize("stage", STAGES)
def test_calls_grow_linearly(counts, stage):
    short, long = counts
    ratio = long.times[stage] / short.times[stage]
    assert ratio <= SLACK * LONG / SHORT, f"{stage}: {ratio:.2f}x the calls for 4x the joints"
