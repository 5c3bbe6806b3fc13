"""``benchmarks/scaling.py --memory``: the VM's memory plan against the tensors and onnxruntime.

For resnet50 (onnx light zoo) and a BERT-base-sized encoder (transformers config, random
weights, sequence 128, batch 1, exported to ONNX), each in child processes of their own:

- sum of tensors: the bytes of every activation tensor the MSCGraph lists (each joint's
  outputs, constants left out): what a run that never reused memory would hold;
- plan peak: ``Plan.peak_bytes`` of the model's plan (pooled storages + result buffers),
  and ``planned_bytes`` (the same pooled buffers without reuse);
- run RSS growth: the peak resident memory during the first run minus the resident memory
  just before it (freed heap memory handed back with ``malloc_trim``, the high-water mark
  reset through ``/proc/self/clear_refs``), msc (plan made and kernels compiled beforehand)
  and onnxruntime (session created beforehand);
- peak RSS: of each whole child (import, load, translate + build or session, run):
  ``resource.getrusage`` before the high-water mark is reset, or the mark after the run.
"""

from __future__ import annotations

import ctypes
import gc
import json
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MB = 2 ** 20


def _rss_now() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def _peak_since_reset() -> int:
    """VmHWM: this process's resident high-water mark (since the last reset)."""
    with open("/proc/self/status") as f:
        line = next(ln for ln in f if ln.startswith("VmHWM"))
    return int(line.split()[1]) * 1024


def _reset_peak() -> int:
    """Give freed heap memory back (else the run reuses pages that loading the model left
    resident and its growth reads as ~0), reset the kernel's high-water mark (VmHWM); the
    resident bytes now."""
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return _rss_now()




def _maxrss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# ---------------------------------------------------------------------------------------------
# Children: each prints one JSON object on its last line.

def _inputs(model) -> dict:
    """Random inputs for the model's graph inputs that are not initializers (fixed seed)."""
    from onnx import helper

    rng = np.random.default_rng(0)
    known = {i.name for i in model.graph.initializer}
    feeds = {}
    for value in model.graph.input:
        if value.name in known:
            continue
        ttype = value.type.tensor_type
        shape = [d.dim_value or 1 for d in ttype.shape.dim]
        dtype = helper.tensor_dtype_to_np_dtype(ttype.elem_type)
        feeds[value.name] = (rng.integers(0, 1000, shape) if dtype.kind == "i"
                             else rng.standard_normal(shape)).astype(dtype)
    return feeds


def child_msc(path: str) -> dict:
    import onnx

    from msc import relax
    from msc.codegen import to_relax
    from msc.frontends import translate

    model = onnx.load(path)
    feeds = _inputs(model)
    graph, weights = translate.from_onnx(model)
    tensors = sum(t.get_size() * np.dtype(t.dtype).itemsize for node in graph.get_nodes()
                  if node.optype != "constant" for t in node.get_outputs())
    weight_bytes = sum(np.asarray(w).nbytes for w in weights.values())
    with tempfile.TemporaryDirectory() as folder:
        mod = to_relax(graph, weights, build_folder=folder)
    del model, graph
    fn = relax.VirtualMachine(relax.build(mod, target="llvm"), relax.cpu())["main"]
    _, env = fn.check_args(list(feeds.values()))
    plan = fn.entry(env).plan  # planned and compiled before the measured run
    setup_peak = _maxrss()  # getrusage, read before the reset below lowers the mark
    before = _reset_peak()
    fn(*feeds.values())
    return {"tensors": tensors, "weights": weight_bytes, "peak_bytes": plan.peak_bytes,
            "planned_bytes": plan.stats["planned_bytes"] + plan.stats["fresh_bytes"],
            "run_growth": _peak_since_reset() - before,
            "maxrss": max(setup_peak, _peak_since_reset())}


def child_ort(path: str) -> dict:
    import onnx
    import onnxruntime as ort

    feeds = _inputs(onnx.load(path))
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    setup_peak = _maxrss()  # getrusage, read before the reset below lowers the mark
    before = _reset_peak()
    session.run(None, feeds)
    return {"run_growth": _peak_since_reset() - before,
            "maxrss": max(setup_peak, _peak_since_reset())}


def child_export_bert(path: str) -> dict:
    import io

    import onnx
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    bert = transformers.BertModel(transformers.BertConfig(), add_pooling_layer=False).eval()

    class Encoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bert = bert

        def forward(self, ids):
            return self.bert(input_ids=ids).last_hidden_state

    buffer = io.BytesIO()
    ids = torch.randint(0, 1000, (1, 128))
    torch.onnx.export(Encoder().eval(), (ids,), buffer, opset_version=17, dynamo=False,
                      input_names=["ids"], output_names=["hidden"])
    onnx.save(onnx.load_from_string(buffer.getvalue()), path)
    return {"path": path}


_CHILDREN = {"msc": child_msc, "ort": child_ort, "export_bert": child_export_bert}


def _spawn(kind: str, path: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "benchmarks.scaling_memory", kind, path],
                          cwd=ROOT, capture_output=True, text=True, timeout=3600, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"scaling --memory: the {kind} child failed on {path}:\n"
                         f"{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _resnet50(folder: str) -> str:
    import onnx

    return str(Path(onnx.__file__).parent / "backend/test/data/light/light_resnet50.onnx")


def _bert_base(folder: str) -> str:
    return _spawn("export_bert", f"{folder}/bert_base.onnx")["path"]


def main() -> None:
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for name, make in (("resnet50", _resnet50), ("bert_base (seq 128)", _bert_base)):
            path = make(folder)
            rows.append((name, _spawn("msc", path), _spawn("ort", path)))
    print("\nmemory: MB; 'run growth' = peak RSS of the first run minus RSS before it")
    print("| model | weights | sum of tensors | plan peak | plan / sum | no reuse "
          "| msc run growth | ORT run growth | msc peak RSS | ORT peak RSS |")
    print("|---" * 10 + "|")
    for name, msc, ort in rows:
        cells = [msc["weights"], msc["tensors"], msc["peak_bytes"]]
        print(f"| {name} | " + " | ".join(f"{c / MB:.1f}" for c in cells)
              + f" | {msc['peak_bytes'] / msc['tensors']:.2f} | {msc['planned_bytes'] / MB:.1f}"
              + f" | {msc['run_growth'] / MB:.1f} | {ort['run_growth'] / MB:.1f}"
              + f" | {msc['maxrss'] / MB:.0f} | {ort['maxrss'] / MB:.0f} |")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] in _CHILDREN:
        sys.path.insert(0, str(ROOT))
        print(json.dumps(_CHILDREN[sys.argv[1]](sys.argv[2])))
    else:
        raise SystemExit("run benchmarks/scaling.py --memory")
