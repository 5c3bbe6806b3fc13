"""Decoder LLM speed: prefill and decode tokens/s, msc (float, int8, int4 weights) against
transformers eager, onnxruntime (float and MatMulNBits int4) and the memory-bandwidth
roofline, batch 1, at 1 and 2 threads.

    .venv/bin/python benchmarks/generate.py                      # Llama 768 x 12 (134M params)
    .venv/bin/python benchmarks/generate.py --model gpt2         # GPT-2 small (124M)
    .venv/bin/python benchmarks/generate.py --threads 1 --pasts 128 --repeats 3
    .venv/bin/python benchmarks/generate.py --quick              # a tiny config, one point
    .venv/bin/python benchmarks/generate.py --variants float     # leave int8 / int4 out

msc runs the decode step of frontends/torch/decoder.py through the user's path (from_torch ->
MSCGraph -> to_relax -> build), one build per past length with ``max_len = past + 16`` cache
rows (attention reads the whole buffer, masked). transformers runs the same model eagerly
with its DynamicCache, cropped back to the past length after every timed step. onnxruntime
runs the same model's decode step exported by torch.onnx.export in optimum's layout
(tests/helpers/decoders.py: past_key_values.* in, present.* out; written once to --out).
Weight-only: msc int8 (per channel) and int4 (symmetric groups of 128) are
``compression.weight_only.quantize_weights`` (RTN) on the imported step, every linear a
``matmul_nbits`` on packed weights; onnxruntime int4 is its own ``MatMulNBitsQuantizer``
(4 bits, block 128, symmetric) on the same exported model.

* prefill: one call on ``--prefill`` prompt tokens (msc: the step with n = 128);
* decode at past P: one new token with P tokens in the cache, tokens/s = 1 / seconds;
* roofline: a decode step reads every weight once, so tokens/s <= bandwidth / weight bytes,
  where the weight bytes leave out the token embedding table (one row is read) unless the
  LM head shares it; for int8 / int4 the packed bytes (codes, scales, zero points) of the
  quantized linears replace their float bytes. The cache read (2 x layers x kv heads x P x head dim x 4
  bytes) is shown apart: it is not a weight. The bandwidth is the best of three probes
  (``bandwidth_probes``): one numpy stream reads at ~10 GB/s here while a dense kernel
  reading many weight rows at once gets twice that, so a copy alone would understate it.

Ratios are the other's time over msc's: above 1.00x msc is faster. Timings are interleaved
(msc, torch, onnxruntime, msc, ...) and the best of ``--repeats`` rounds counts;
the machine may be shared, so read ratios, not absolute figures.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

# this folder has a transformers.py of its own: the package must win `import transformers`
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import torch

from benchmarks.common import best_interleaved, per_call, print_table

STEP_ROWS = 16  # cache rows past the measured position (max_len = past + STEP_ROWS)

CONFIGS = {
    "llama": ("LlamaForCausalLM", "LlamaConfig",
              {"vocab_size": 32000, "hidden_size": 768, "intermediate_size": 2048,
               "num_hidden_layers": 12, "num_attention_heads": 12,
               "num_key_value_heads": 12, "max_position_embeddings": 2048}),
    "gpt2": ("GPT2LMHeadModel", "GPT2Config",
             {"vocab_size": 50257, "n_embd": 768, "n_layer": 12, "n_head": 12,
              "n_positions": 2048}),
    "tiny": ("LlamaForCausalLM", "LlamaConfig",
             {"vocab_size": 256, "hidden_size": 64, "intermediate_size": 128,
              "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
              "max_position_embeddings": 256}),
}


def make_model(name: str) -> torch.nn.Module:
    import transformers

    transformers.logging.set_verbosity_error()
    model_class, config_class, kwargs = CONFIGS[name]
    torch.manual_seed(0)
    config = getattr(transformers, config_class)(attn_implementation="eager", **kwargs)
    return getattr(transformers, model_class)(config).eval()


def weight_bytes(model) -> int:
    """Bytes a decode step reads: every parameter once, the input embedding as one row
    unless the output head is the same tensor."""
    params = {id(p): p for p in model.parameters()}
    total = sum(p.numel() * p.element_size() for p in params.values())
    embed = model.get_input_embeddings().weight
    head = model.get_output_embeddings().weight
    if embed is not head:
        total -= (embed.shape[0] - 1) * embed.shape[1] * embed.element_size()
    return total


def cache_bytes(step, past: int) -> int:
    return 2 * step.layers * step.kv_heads * past * step.head_dim * 4


def _best_seconds(fn, repeats: int) -> float:
    fn()  # first touch: page faults are not bandwidth
    return min(per_call(fn, 0.2) for _ in range(repeats))


def bandwidth_probes(repeats: int, megabytes: int = 512) -> dict:
    """Read bandwidth (bytes/s) by three probes: numpy's dot of a large array with itself
    (one stream), numpy's copy (read + write-allocate + write: 3 x the bytes), and a
    [1, K] x [K, N] dense call of msc's backend on a constant weight of half that size, at 1 and 2 threads
    (many rows read at once, as a decode step reads its weights). A decode step cannot read
    its weights faster than the best of them."""
    from msc import relax
    from msc.relax.op import make_call

    src = np.ones(megabytes * 2**20 // 4, dtype=np.float32)
    dst = np.empty_like(src)
    probes = {"numpy dot": src.nbytes / _best_seconds(lambda: np.dot(src, src), repeats),
              "numpy copy": 3 * src.nbytes / _best_seconds(lambda: np.copyto(dst, src),
                                                           repeats)}
    k = 1024  # a constant weight, as a model's: the build lays it out for the kernel
    weight = np.random.default_rng(0).standard_normal((k, src.size // k // 2), np.float32)
    x = relax.Var("x", relax.TensorStructInfo((1, k), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(make_call("matmul", x, relax.const(weight)))
        bb.emit_func_output(out)
    ex = relax.build(bb.get())
    row = np.ones((1, k), np.float32)
    for n in (1, 2):
        f = relax.VirtualMachine(ex, relax.cpu(), num_threads=n)["main"]
        probes[f"msc dense, {n} thread(s)"] = weight.nbytes / _best_seconds(
            lambda f=f: f(row), repeats)
    return probes


# variant -> weight_only config (None: float)
VARIANTS = {"float": None, "int8": {"bits": 8, "group_size": None},
            "int4": {"bits": 4, "group_size": 128, "symmetric": True}}


class MscStep:
    """The imported, built decode step with its caches (max_len = past + STEP_ROWS);
    ``quant``: a weight_only config (RTN), or None for float weights."""

    def __init__(self, model, max_len: int, quant: dict | None = None):
        from msc import relax
        from msc.codegen import to_relax
        from msc.frontends.torch.decoder import DecodeStep, decoder_from_torch
        from msc.generation import Generator

        start = time.perf_counter()
        graph, weights = decoder_from_torch(model, max_len)
        self.saved_bytes = 0  # float bytes of the quantized linears minus their packed bytes
        if quant is not None:
            from msc.compression.weight_only import quantize_weights

            graph, weights, report = quantize_weights(graph, weights,
                                                      config={**quant, "method": "rtn"})
            sizes = report.to_dict()["bytes"]
            self.saved_bytes = sizes["float"] - sizes["packed"]
        self.ex = relax.build(to_relax(graph, weights))
        self.build_seconds = time.perf_counter() - start
        self.gen = Generator(self.ex)
        self.cache = self.gen.new_cache()
        self.shape = DecodeStep(model, max_len)

    def prefill(self, n: int):
        ids = (np.arange(n, dtype=np.int64) % 1000)[None]
        return lambda: self.gen.step(ids, np.arange(n, dtype=np.int64), *self.cache)

    def decode(self, past: int):
        ids, at = np.array([[5]], dtype=np.int64), np.array([past], dtype=np.int64)
        return lambda: self.gen.step(ids, at, *self.cache)


def torch_prefill(model, n: int):
    ids = (torch.arange(n) % 1000)[None]

    def run():
        with torch.no_grad():
            model(ids, use_cache=True)
    return run


def torch_decode(model, past: int):
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    with torch.no_grad():
        model((torch.arange(past) % 1000)[None], past_key_values=cache, use_cache=True)
    ids = torch.tensor([[5]])

    def run():
        with torch.no_grad():
            model(ids, past_key_values=cache, use_cache=True)
        cache.crop(-1)  # drop the new row: the next call decodes at the same past length
    return run


class OrtStep:
    """onnxruntime on the same model's decode step exported to ONNX (optimum's layout:
    past_key_values.* in, present.* out; tests/helpers/decoders.py), with ``n`` threads."""

    def __init__(self, model, folder: Path, int4: bool = False):
        from tests.helpers.decoders import export_onnx_decoder

        self.path = folder / "decode_step.onnx"
        if not self.path.exists():
            export_onnx_decoder(model, self.path)
        if int4:
            self.path = _ort_int4(self.path, folder / "decode_step_int4.onnx")
        self.sessions: dict = {}

    def session(self, n: int):
        import onnxruntime as ort

        if n not in self.sessions:
            options = ort.SessionOptions()
            options.intra_op_num_threads, options.inter_op_num_threads = n, 1
            self.sessions[n] = ort.InferenceSession(str(self.path), options,
                                                    providers=["CPUExecutionProvider"])
        return self.sessions[n]

    def call(self, n: int, past: int, new: int):
        session = self.session(n)
        inputs = session.get_inputs()
        caches = {i.name: np.zeros((1, i.shape[1], past, i.shape[3]), np.float32)
                  for i in inputs[3:]}
        feeds = {"input_ids": (np.arange(new, dtype=np.int64) % 1000)[None],
                 "attention_mask": np.ones((1, past + new), np.int64),
                 "position_ids": np.arange(past, past + new, dtype=np.int64)[None], **caches}
        return lambda: session.run(None, feeds)


def _ort_int4(source: Path, path: Path) -> Path:
    """onnxruntime's own MatMulNBits int4 (block 128, symmetric) of the exported step."""
    if not path.exists():
        import onnx
        from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

        quantizer = MatMulNBitsQuantizer(onnx.load(str(source)), bits=4, block_size=128,
                                         is_symmetric=True)
        quantizer.process()
        onnx.save(quantizer.model.model, str(path))
    return path


def in_threads(fn, n: int):
    from msc.backend.runtime.threads import num_threads

    def run():
        torch.set_num_threads(n)
        with num_threads(n):
            fn()
    return run


def _contenders(args, n: int, msc: dict, torch_fn, orts: dict, past: int, new: int):
    fns = {**{f"msc {k}": in_threads(f, n) for k, f in msc.items()},
           "torch": in_threads(torch_fn, n)}
    fns.update({name: ort.call(n, past, new) for name, ort in orts.items()})
    return best_interleaved(fns, args.repeats, lambda f: per_call(f, args.min_time))


def _cell(best: dict, who: str, rate: bool) -> str:
    if who not in best:
        return "-"
    return f"{1 / best[who]:.1f}" if rate else f"{best[who] * 1e3:.1f}"


def _ratio(best: dict, other: str, mine: str) -> str:
    return f"{best[other] / best[mine]:.2f}x" if other in best and mine in best else "-"


COLUMNS = ["threads", "what", "msc float", "msc int8", "msc int4", "transformers",
           "ort float", "ort int4", "msc / transformers", "msc / ort (float)",
           "msc / ort (int4)", "% roofline float", "% roofline int8", "% roofline int4",
           "KV read"]


def _row(n, what: str, best: dict, rate: bool, roofs: dict, kv: str) -> list:
    cells = [_cell(best, w, rate) for w in ("msc float", "msc int8", "msc int4", "torch",
                                               "ort float", "ort int4")]
    percent = [f"{100 / best[f'msc {v}'] / roofs[v]:.0f}%" if rate and f"msc {v}" in best
               else "-" for v in ("float", "int8", "int4")]
    return [n, what, *cells, _ratio(best, "torch", "msc float"),
            _ratio(best, "ort float", "msc float"), _ratio(best, "ort int4", "msc int4"),
            *percent, kv]


def measure(args, model) -> list:
    orts = {} if args.no_ort else {"ort float": OrtStep(model, args.out)}
    if not args.no_ort and "int4" in args.variants:
        orts["ort int4"] = OrtStep(model, args.out, int4=True)
    lengths = sorted({*args.pasts, args.prefill})
    steps = {(v, p): MscStep(model, p + STEP_ROWS, VARIANTS[v])
             for v in args.variants for p in lengths}
    wbytes = weight_bytes(model)
    probes = bandwidth_probes(args.repeats)
    bw = max(probes.values())
    saved = {v: steps[v, lengths[0]].saved_bytes for v in args.variants}
    roofs = {v: bw / (wbytes - saved[v]) for v in args.variants}
    print("read bandwidth probes: " + ", ".join(f"{k} {v / 1e9:.2f} GB/s"
                                                for k, v in probes.items()))
    print(f"best bandwidth {bw / 1e9:.2f} GB/s; weights read per token and roofline: "
          + "; ".join(f"{v} {(wbytes - saved[v]) / 1e6:.1f} MB, {roofs[v]:.1f} tok/s"
                      for v in args.variants))
    print("msc build s: " + ", ".join(f"{v} {steps[v, p].build_seconds:.1f} (max_len "
                                      f"{p + STEP_ROWS})" for v, p in steps), flush=True)
    rows = []
    for n in args.threads:
        best = _contenders(args, n, {v: steps[v, args.prefill].prefill(args.prefill)
                                     for v in args.variants},
                           torch_prefill(model, args.prefill), orts, 0, args.prefill)
        rows.append(_row(n, f"prefill {args.prefill} (ms)", best, False, roofs, "-"))
        print(rows[-1], flush=True)
        for past in args.pasts:
            best = _contenders(args, n, {v: steps[v, past].decode(past) for v in args.variants},
                               torch_decode(model, past), orts, past, 1)
            kv = cache_bytes(steps[args.variants[0], past].shape, past)
            rows.append(_row(n, f"decode @ {past} (tok/s)", best, True, roofs,
                             f"{kv / 1e6:.1f} MB"))
            print(rows[-1], flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=sorted(CONFIGS), default="llama")
    parser.add_argument("--threads", type=lambda s: [int(t) for t in s.split(",")],
                        default=[1, 2])
    parser.add_argument("--pasts", type=lambda s: [int(t) for t in s.split(",")],
                        default=[128, 1024])
    parser.add_argument("--prefill", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--min-time", type=float, default=0.3)
    parser.add_argument("--no-ort", action="store_true", help="leave onnxruntime out")
    parser.add_argument("--variants", type=lambda s: s.split(","),
                        default=["float", "int8", "int4"],
                        help="msc weight variants: float, int8, int4 (int4 adds ort int4)")
    parser.add_argument("--out", type=Path, default=Path("out/bench_generate"),
                        help="folder of the exported ONNX decode step (reused when there)")
    parser.add_argument("--quick", action="store_true",
                        help="the tiny config, 1 thread, past 32, prefill 16, 1 round")
    args = parser.parse_args()
    if args.quick:
        args.model, args.threads, args.pasts, args.prefill = "tiny", [1], [32], 16
        args.repeats, args.min_time = 1, 0.05
    args.out = args.out / args.model
    args.out.mkdir(parents=True, exist_ok=True)
    model = make_model(args.model)
    params = sum(p.numel() for p in model.parameters())
    print(f"model: {args.model} ({params / 1e6:.1f}M parameters), batch 1, float32")
    rows = measure(args, model)
    print_table(COLUMNS, rows)


if __name__ == "__main__":
    main()
