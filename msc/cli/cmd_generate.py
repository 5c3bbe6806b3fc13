"""``msc generate MODEL --prompt-ids 1,2,3``: tokens from a decoder LLM, with a tokens/s report.

MODEL is ``file.py:factory`` returning a transformers causal LM (GPT-2, Llama, Qwen3,
Mistral, Gemma-2, OPT, ...). Its decode step goes the user's path (frontends/torch/decoder.py
-> from_torch -> MSCGraph -> to_relax -> build) and msc.generation's Generator runs it:
prefill of the prompt, then one call per new token on caches written in place.
"""

from __future__ import annotations

import time

from ..errors import ValidationError
from . import options
from .loaders import load_torch_module

NAME = "generate"
HELP = "generate tokens with a decoder LLM (KV cache, greedy or sampled), tokens/s report"
EPILOG = """examples:
  msc generate lm.py:make_model --prompt-ids 1,2,3 --max-new-tokens 64
  msc generate lm.py:make_model --prompt-ids 1,2,3 --temperature 0.8 --top-k 40 --seed 0
  msc generate lm.py:make_model --prompt-ids 5,6 --stop-ids 2 --threads 1
MODEL is file.py:factory returning a transformers causal LM (random weights are fine). The
new token ids are printed on one line, then the compile time, prefill time and decode rate.
Greedy (the default, --temperature 0) gives the tokens of transformers' generate(do_sample=
False). Generation stops after a --stop-ids token (default: the model's eos_token_id; pass
--stop-ids none to run the whole --max-new-tokens).
"""


def add_arguments(p) -> None:
    p.epilog = EPILOG
    p.add_argument("model", metavar="MODEL", help="file.py:factory returning a causal LM")
    p.add_argument("--prompt-ids", required=True, metavar="IDS",
                   help="the prompt's token ids, comma-separated (example: 1,2,3)")
    p.add_argument("--max-new-tokens", type=options.positive_int, default=32, metavar="N",
                   help="tokens to generate at most (default 32)")
    p.add_argument("--max-len", type=options.positive_int, default=None, metavar="L",
                   help="cache rows (default: prompt length + --max-new-tokens)")
    p.add_argument("--stop-ids", default=None, metavar="IDS",
                   help="stop after any of these token ids (default: the model's "
                        "eos_token_id; 'none' for no stop)")
    p.add_argument("--temperature", type=float, default=0.0, metavar="T",
                   help="0 (the default) is greedy; above 0 samples softmax(logits / T)")
    p.add_argument("--top-k", type=int, default=0, metavar="K",
                   help="sample among the K most likely tokens only (0: all)")
    p.add_argument("--top-p", type=float, default=1.0, metavar="P",
                   help="sample among the most likely tokens whose probability reaches P")
    p.add_argument("--seed", type=int, default=None, help="seed of the sampling")
    options.add_threads(p)


def _ids(text: str, key: str = "--prompt-ids") -> list[int]:
    try:
        ids = [int(t) for t in text.replace(" ", "").split(",") if t]
    except ValueError:
        raise ValidationError(f"token ids must be integers separated by commas, got {text!r}",
                              key=key, hint=f"example: {key} 1,2,3") from None
    if not ids or min(ids) < 0:
        raise ValidationError(f"need one or more token ids >= 0, got {text!r}",
                              key=key, hint=f"example: {key} 1,2,3")
    return ids


def _stop_ids(text: str) -> list[int]:
    return [] if text.strip().lower() == "none" else _ids(text, "--stop-ids")


def _default_stops(module) -> list[int]:
    eos = getattr(getattr(module, "config", None), "eos_token_id", None)
    return [] if eos is None else [int(e) for e in (eos if isinstance(eos, list) else [eos])]


def run(args) -> int:
    from msc import relax
    from msc.codegen import to_relax
    from msc.frontends.torch.decoder import decoder_from_torch
    from msc.generation import Generator

    prompt = _ids(args.prompt_ids)
    given_stops = None if args.stop_ids is None else _stop_ids(args.stop_ids)
    module = load_torch_module(args.model)
    max_len = args.max_len or len(prompt) + args.max_new_tokens
    start = time.perf_counter()
    graph, weights = decoder_from_torch(module, max_len)
    gen = Generator(relax.build(to_relax(graph, weights)), num_threads=args.threads)
    compiled = time.perf_counter() - start
    stops = _default_stops(module) if given_stops is None else given_stops
    result = gen.generate(prompt, args.max_new_tokens, stop_tokens=stops,
                          temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
                          seed=args.seed)
    print(",".join(str(t) for t in result.tokens))
    print(f"compile: {compiled:.2f} s (decode step, max_len {max_len})")
    print(f"prefill: {result.prompt_length} tokens in {result.prefill_seconds * 1e3:.1f} ms")
    steps = len(result.tokens) - 1
    print(f"decode: {steps} tokens in {result.decode_seconds:.3f} s = "
          f"{result.decode_tokens_per_second:.1f} tokens/s"
          + (" (stopped on a stop token)" if result.stopped else ""))
    return 0
