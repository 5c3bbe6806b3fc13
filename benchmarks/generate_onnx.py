"""The ONNX decode path's generation speed: the six small decoders of the tests
(tests/helpers/decoders.py: hidden 32, 2 layers) exported in optimum's layout, imported by
from_onnx and generated with msc.generation.Generator, against the static-cache step of
from_torch and onnxruntime on the same export, 1 thread, batch 1.

    .venv/bin/python benchmarks/generate_onnx.py                    # all six, 48 new tokens
    .venv/bin/python benchmarks/generate_onnx.py --models llama,gpt2 --new 20

Columns (decode tokens/s: every token after the first, best of ``--repeats`` generations,
each on a new VM, so the plans it needs are made during it):
* msc ONNX, unpadded: ``bucket=0``, a new past length every token, so a VM plan per token;
* msc ONNX, bucket 64: decode pasts left-padded to a multiple of 64 rows, one plan per bucket;
* msc from_torch: the static-cache step (caches of prompt + new rows written in place);
* onnxruntime: the same export, its present fed back as the next past.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from benchmarks.common import print_table


def _msc_rate(ex, prompt: list, new: int, repeats: int, **kwargs) -> float:
    """Best of ``repeats`` generations, each on a new VM: its plans are made as it goes, as
    a user's first generation makes them (chains compiled earlier in the process are
    reused: that is the point of the table-read dims)."""
    from msc.generation import Generator

    return max(Generator(ex, num_threads=1, **kwargs).generate(prompt, new)
               .decode_tokens_per_second for _ in range(repeats))


def _ort_rate(path: Path, prompt: list, new: int, repeats: int) -> float:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = 1, 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    shapes = [(1, i.shape[1], 0, i.shape[3]) for i in session.get_inputs()[3:]]
    best = 0.0
    for _ in range(repeats):
        caches = [np.zeros(s, np.float32) for s in shapes]
        ids, pos = np.array([prompt]), np.arange(len(prompt))
        seconds = 0.0
        for step in range(new):
            start = time.perf_counter()
            out = session.run(None, dict(zip(names, [
                ids, np.ones((1, int(pos[-1]) + 1), np.int64), pos[None], *caches])))
            token = int(out[0][0, -1].argmax())
            seconds += time.perf_counter() - start if step else 0.0
            caches, ids, pos = out[1:], np.array([[token]]), np.array([int(pos[-1]) + 1])
        best = max(best, (new - 1) / seconds)
    return best


def measure(name: str, args, folder: Path) -> list:
    from msc import relax
    from msc.codegen import to_relax
    from msc.frontends import translate
    from msc.frontends.torch.decoder import decoder_from_torch
    from tests.helpers.decoders import PROMPT, decoder, export_onnx_decoder

    model = decoder(name)
    path = folder / f"{name}.onnx"
    export_onnx_decoder(model, path)
    ex = relax.build(to_relax(*translate.from_onnx(str(path))))
    rates = [_msc_rate(ex, PROMPT, args.new, args.repeats, bucket=b) for b in (0, 64)]
    static = relax.build(to_relax(*decoder_from_torch(model, len(PROMPT) + args.new)))
    rates.append(_msc_rate(static, PROMPT, args.new, args.repeats))
    rates.append(_ort_rate(path, PROMPT, args.new, args.repeats))
    return [name, *(f"{r:.1f}" for r in rates), f"{rates[1] / rates[0]:.1f}x",
            f"{rates[1] / rates[3]:.2f}x"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="gpt2,llama,qwen3,mistral,gemma2,opt")
    parser.add_argument("--new", type=int, default=48, help="new tokens per generation (the configs have 64 positions)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            rows.append(measure(name, args, Path(tmp)))
            print(rows[-1], flush=True)
    print_table(["model", "msc ONNX unpadded tok/s", "msc ONNX bucket 64 tok/s",
                 "msc from_torch static tok/s", "onnxruntime tok/s", "bucket / unpadded",
                 "bucket / onnxruntime"], rows)


if __name__ == "__main__":
    main()
