"""The VM's own cost per op: msc vs onnxruntime on graphs of many tiny ops, in one run.

    .venv/bin/python benchmarks/vm_overhead.py                  # 5 tiny HF models + Add/Mul chain
    .venv/bin/python benchmarks/vm_overhead.py --models bert chain --profile 8

Graphs: small Hugging Face models (random weights from configs, tests/helpers/hf_models.py:
BERT, GPT-2, ViT, T5 encoder, DistilBERT; hidden 64, sequence 32, batch 1) exported to ONNX by
torch.onnx.export, and a chain of 200 Add/Mul nodes on [1, 8] float32 tensors. Every kernel is
tiny, so the time per call is mostly what each runtime pays per op around its kernels.

Both runtimes get one thread (``--threads``); msc runs the ONNX file through from_onnx ->
to_relax -> relax.build -> VirtualMachine, timed as users call it (``vm["main"](*arrays)``:
argument checks, plan lookup and result wrapping included). Outputs are compared first. Calls
are timed interleaved, each figure the best of ``--repeat`` rounds of ``--min-time`` seconds
(the median call of a round).
Columns: microseconds per call, msc / onnxruntime, microseconds per ONNX node for each, and
msc's "vm us": a call less its plan's generated function run alone (argument checks, plan
lookup, register file, result wrapping). The last line
is the geomean of msc / onnxruntime; ``uptime``'s load is printed with the figures. A graph
msc cannot import is listed as failed under the table (GPT-2's torch.onnx export does not
build yet: a matmul of its attention projection gets mismatched dims in to_relax).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse
import io
import statistics
import sys
import tempfile
import warnings
from functools import partial
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
# benchmarks/transformers.py would shadow the transformers package the HF models come from
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]
sys.path.insert(0, str(ROOT))

from benchmarks.common import best_interleaved, call_times, geomean

HF_NAMES = ("bert", "gpt2", "vit", "t5_encoder", "distilbert")
CHAIN = 200


# ---------------------------------------------------------------------------------------------
# Models.


def hf_onnx(name: str, layers: int, hidden: int, seq: int) -> tuple[bytes, list]:
    """(ONNX bytes, inputs) of one tiny HF model exported by torch.onnx.export."""
    import torch
    import transformers as T

    from tests.helpers.hf_models import VOCAB, tiny_hf_models

    T.logging.set_verbosity_error()
    torch.manual_seed(0)
    model = tiny_hf_models(T, layers, hidden)[name]().eval()
    gen = torch.Generator().manual_seed(1)
    if name == "vit":
        x, key = torch.randn(1, 3, 32, 32, generator=gen), "pixel_values"
    else:
        x, key = torch.randint(0, VOCAB, (1, seq), generator=gen), "input_ids"

    class Hidden(torch.nn.Module):  # keyword call: HF forwards take many positional params
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, x):
            # an explicit mask keeps GPT-2 off transformers' packed-sequence check (aten::diff,
            # which torch.onnx.export cannot write)
            mask = {} if key != "input_ids" else {"attention_mask": torch.ones_like(x)}
            return self.model(**{key: x}, **mask).last_hidden_state

    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Hidden().eval(), (x,), buffer, input_names=[key],
                          output_names=["hidden"], dynamo=False, opset_version=17)
    return buffer.getvalue(), [x.numpy()]


def chain_onnx(n: int = CHAIN) -> tuple[bytes, list]:
    """Add, Mul, Add, ... of [1, 8] float32 constants: ``n`` nodes, each a tiny kernel."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, inits, prev = [], [], "x"
    for i in range(n):
        c = (rng.random((1, 8)) * 0.1 + (0.0 if i % 2 == 0 else 0.95)).astype("float32")
        inits.append(numpy_helper.from_array(c, f"c{i}"))
        nodes.append(helper.make_node(("Add", "Mul")[i % 2], [prev, f"c{i}"], [f"t{i}"]))
        prev = f"t{i}"
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [1, 8])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return model.SerializeToString(), [rng.standard_normal((1, 8)).astype("float32")]


# ---------------------------------------------------------------------------------------------
# Runtimes.


def msc_call(onnx_bytes: bytes, threads: int):
    """(call, vm, instructions) of the model built by msc."""
    from msc import relax
    from msc.codegen import to_relax
    from msc.frontends import translate

    graph, weights = translate.from_onnx(onnx_bytes)
    with tempfile.TemporaryDirectory() as folder:
        mod = to_relax(graph, weights, build_folder=folder)
    vm = relax.VirtualMachine(relax.build(mod), relax.cpu(), num_threads=threads)
    return vm["main"], vm


def ort_call(onnx_bytes: bytes, threads: int):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    session = ort.InferenceSession(onnx_bytes, options, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return lambda *arrays: session.run(None, dict(zip(names, arrays)))


def best_of(calls: dict, args: list, repeat: int, min_time: float) -> dict:
    """Best median seconds per call of each runtime, rounds interleaved. A median of the calls
    made in ``min_time``, not a mean: on a loaded machine a preempted call would otherwise
    weigh on the small ones."""
    fns = {who: partial(fn, *args) for who, fn in calls.items()}
    return best_interleaved(fns, repeat, lambda f: statistics.median(call_times(f, min_time)),
                            warm=False)


def plan_only(fn, inputs: list):
    """The plan's generated function alone on the checked inputs: a call less this is what
    the VM itself costs (argument checks, plan lookup, register file, result wrapping)."""
    values, env = fn.check_args(inputs)
    plan = fn.entry(env).plan
    regs = plan.new_registers()
    regs[0], regs[1] = regs, env  # plan.REGS, plan.ENV

    def run(*_):
        for reg, value in zip(plan.params, values):  # the plan reuses parameter registers
            regs[reg] = value
        plan.runner.fn(regs)
    return run


# ---------------------------------------------------------------------------------------------
# The report.


def measure(name: str, onnx_bytes: bytes, inputs: list, args) -> dict:
    import onnx

    nodes = len(onnx.load_from_string(onnx_bytes).graph.node)
    msc_fn, vm = msc_call(onnx_bytes, args.threads)
    ort_fn = ort_call(onnx_bytes, args.threads)
    got = msc_fn(*inputs)
    got = got[0] if isinstance(got, tuple) else got
    np.testing.assert_allclose(got.numpy(), ort_fn(*inputs)[0], rtol=1e-3, atol=1e-4,
                               err_msg=f"{name}: msc and onnxruntime disagree")
    best = best_of({"msc": msc_fn, "ort": ort_fn, "plan": plan_only(msc_fn, inputs)}, inputs,
                   args.repeat, args.min_time)
    report = vm.profile(*inputs, number=50)
    if args.profile:
        print(f"\n{name}: msc profile\n{report.table(top=args.profile)}")
    instructions = sum(r.calls for r in report.rows) // report.runs
    return {"model": name, "nodes": nodes, "instrs": instructions, "msc": best["msc"],
            "ort": best["ort"], "vm": best["msc"] - best["plan"]}


def print_table(rows: list) -> None:
    print(f"{'model':<12}{'onnx nodes':>11}{'msc instrs':>11}{'msc us':>9}{'ort us':>9}"
          f"{'msc/ort':>9}{'msc us/node':>12}{'ort us/node':>12}{'vm us':>8}")
    for r in rows:
        print(f"{r['model']:<12}{r['nodes']:>11}{r['instrs']:>11}{r['msc'] * 1e6:>9.1f}"
              f"{r['ort'] * 1e6:>9.1f}{r['msc'] / r['ort']:>9.2f}"
              f"{r['msc'] / r['nodes'] * 1e6:>12.3f}{r['ort'] / r['nodes'] * 1e6:>12.3f}"
              f"{r['vm'] * 1e6:>8.1f}")
    ratios = [r["msc"] / r["ort"] for r in rows]
    print(f"geomean msc / onnxruntime: {geomean(ratios):.2f} over {len(rows)} graphs")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", nargs="+", default=[*HF_NAMES, "chain"],
                   choices=[*HF_NAMES, "chain"])
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--min-time", type=float, default=0.2)
    p.add_argument("--profile", type=int, default=0, metavar="N",
                   help="print msc's profile table (N rows) of each graph")
    args = p.parse_args(argv)
    rows, failed = [], []
    for name in args.models:
        try:
            made = chain_onnx() if name == "chain" else hf_onnx(name, args.layers, args.hidden,
                                                                args.seq)
            rows.append(measure(name, *made, args))
        except Exception as err:  # noqa: BLE001 - one model's failure must not end the report
            failed.append(f"{name}: {type(err).__name__}: {str(err)[:200]}")
    print(f"\nthreads {args.threads}, best of {args.repeat} x {args.min_time} s; load "
          f"{os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    print_table(rows)
    for line in failed:
        print("failed", line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
