"""Token generation over a compiled decode step: prefill, then a decode loop.

A decode step is a Relax function of one of two layouts, told apart by its parameters:

- **static cache** (``frontends.torch.decoder``): the new token ids ``[1, n]`` (int64), their
  positions ``[n]`` (int64) and each layer's past keys and values ``[1, kv_heads, max_len,
  head_dim]``; it returns the last position's logits and the present keys and values. The
  caches are allocated once, ``max_len`` rows each; when the build writes them in place
  (``backend/fuse/patterns/cache.py``) a step costs the new token's rows, not the cache's.
- **growing past** (the ONNX layout optimum and onnxruntime-genai use): ``input_ids [1, n]``,
  ``attention_mask [1, past + n]``, ``position_ids [1, n]`` and ``past_key_values.{i}.key /
  value [1, kv_heads, past, head_dim]``; it returns logits and the present keys and values,
  ``past + n`` rows, which the next step takes as its past (the first step's past is empty).
  Decode pasts are left-padded to a multiple of ``bucket`` rows (masked), so the VM plans
  once per bucket instead of once per token.

::

    from msc import relax
    from msc.codegen import to_relax
    from msc.frontends.torch.decoder import decoder_from_torch
    from msc.generation import Generator

    graph, weights = decoder_from_torch(model, max_len=64)
    gen = Generator(relax.build(to_relax(graph, weights)))
    result = gen.generate([1, 2, 3], max_new_tokens=16)            # greedy
    result = gen.generate([1, 2, 3], 16, temperature=0.8, top_k=40, top_p=0.95, seed=0)
    result.tokens, result.decode_tokens_per_second

Greedy decoding picks the first largest logit (numpy's argmax, as torch's), so it is token for
token what transformers' ``generate(do_sample=False)`` gives on the same weights.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from .errors import ValidationError
from .relax.struct_info import TensorStructInfo

__all__ = ["GenerationResult", "Generator", "generate", "next_token"]


@dataclass
class GenerationResult:
    """The new tokens (the prompt left out) and where the time went."""

    tokens: list
    prompt_length: int
    prefill_seconds: float = 0.0
    decode_seconds: float = 0.0
    stopped: bool = False  # ended on a stop token (it is the last of ``tokens``)
    step_seconds: list = field(default_factory=list)

    @property
    def decode_tokens_per_second(self) -> float:
        """Tokens made by the decode loop (all but the first, which prefill gives) per
        second of that loop."""
        steps = len(self.tokens) - 1
        return steps / self.decode_seconds if steps > 0 and self.decode_seconds > 0 else 0.0


def next_token(logits: np.ndarray, rng: np.random.Generator | None = None,
               temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0) -> int:
    """The next token from one position's logits: argmax when ``temperature`` is 0, else a
    draw from softmax(logits / temperature) restricted to the ``top_k`` largest and then to
    the smallest set of them whose probability reaches ``top_p``."""
    logits = np.asarray(logits, dtype=np.float64).reshape(-1)
    if temperature <= 0:
        return int(np.argmax(logits))
    order = np.argsort(-logits, kind="stable")
    if top_k > 0:
        order = order[:top_k]
    scaled = logits[order] / temperature
    probs = np.exp(scaled - scaled.max())
    probs /= probs.sum()
    if top_p < 1.0:
        keep = int(np.searchsorted(np.cumsum(probs), top_p)) + 1
        order, probs = order[:keep], probs[:keep] / probs[:keep].sum()
    rng = rng if rng is not None else np.random.default_rng()
    return int(order[rng.choice(len(order), p=probs)])


class Generator:
    """Generates tokens with a compiled decode step (an Executable or a VirtualMachine).

    Args:
        model: ``relax.build``'s Executable, or a VirtualMachine made from one.
        function: the decode step's name in it.
        num_threads: kernel threads of the VM made here (None: the process-wide count).
        bucket: a growing-past step's decode pasts are left-padded to a multiple of this
            many rows (0: never), so the VM plans once per bucket, not once per token.
    """

    def __init__(self, model, function: str = "main", num_threads: int | None = None,
                 bucket: int = 64):
        from . import relax  # the VM loads on first use, as relax.VirtualMachine does

        vm = model if hasattr(model, "executable") and hasattr(model, "__getitem__") else \
            relax.VirtualMachine(model, relax.cpu(), num_threads=num_threads)
        self.step = vm[function]
        self.growing = _int_inputs(self.step) == 3  # ids, attention mask, position ids
        self.cache_shapes, self.cache_dtypes = _cache_signature(self.step, self.growing)
        self.max_len = None if self.growing else self.cache_shapes[0][2]
        self.bucket = int(bucket) if self.growing else 0
        self.padding_checked: bool | None = None  # padded step == exact step, seen once

    def new_cache(self) -> list:
        """Zeroed caches, one array per layer's keys and per layer's values (empty pasts for
        a growing-past step)."""
        return [np.zeros(s, d) for s, d in zip(self.cache_shapes, self.cache_dtypes)]

    def generate(self, prompt_ids: Iterable[int], max_new_tokens: int, *,
                 stop_tokens: Iterable[int] = (), temperature: float = 0.0, top_k: int = 0,
                 top_p: float = 1.0, seed: int | None = None) -> GenerationResult:
        """Up to ``max_new_tokens`` tokens after ``prompt_ids``; stops after a token of
        ``stop_tokens``. Sampling (``temperature`` > 0) draws from a generator seeded with
        ``seed``, so equal seeds give equal tokens."""
        prompt = np.asarray(list(prompt_ids), dtype=np.int64)
        self._check_lengths(prompt, max_new_tokens, top_p)
        stops, rng = {int(t) for t in stop_tokens}, np.random.default_rng(seed)
        result = GenerationResult([], len(prompt))
        cache = self.new_cache()
        ids, positions = prompt[None, :], np.arange(len(prompt), dtype=np.int64)
        for i in range(max_new_tokens):
            start = time.perf_counter()
            logits, cache = self._run(ids, positions, cache)
            token = next_token(logits[0, -1], rng, temperature, top_k, top_p)
            spent = time.perf_counter() - start
            if i == 0:
                result.prefill_seconds = spent
            else:
                result.decode_seconds += spent
                result.step_seconds.append(spent)
            result.tokens.append(token)
            if token in stops:
                result.stopped = True
                break
            ids = np.array([[token]], dtype=np.int64)
            positions = np.array([len(prompt) + i], dtype=np.int64)
        return result

    def _run(self, ids: np.ndarray, positions: np.ndarray, cache: list) -> tuple:
        if self.growing:
            return self._run_growing(ids, positions, cache)
        arrays = _arrays(self.step(ids, positions, *cache))
        return arrays[0][:, -1:], arrays[1:]

    def _run_growing(self, ids: np.ndarray, positions: np.ndarray, cache: list) -> tuple:
        """One step of a growing-past model. Each step has a new past length, so the VM
        would plan every token; a decode step's past is instead left-padded to the next
        multiple of ``bucket`` rows, the padding masked by zeros of the attention mask.
        Keys keep their distance to the query (the new row is last, as unpadded), so causal
        and sliding-window masks and position ids mean what they did. A layer whose cache
        keeps only a window (Mistral's and Gemma-2's sliding layers) is not padded; the mask
        is. The first padded step is checked against the exact one: a model that reads its
        mask otherwise then runs unpadded (slow, right)."""
        past = int(positions[0])  # rows of the whole history
        pad = self._padding(ids, past)
        if pad:
            rows = [pad if c.shape[2] == past else 0 for c in cache]
            mask = np.ones((1, pad + past + 1), dtype=np.int64)
            mask[:, :pad] = 0
            arrays = _arrays(self.step(ids, mask, positions[None], *_left_padded(cache, rows)))
            if self.padding_checked is None:
                exact = self._exact_growing(ids, positions, cache)
                self.padding_checked = _close(arrays[0], exact[0])
                arrays, rows = (arrays, rows) if self.padding_checked else (exact, [0] * len(rows))
            return arrays[0][:, -1:], [a[:, :, r:] for a, r in zip(arrays[1:], rows)]
        arrays = self._exact_growing(ids, positions, cache)
        return arrays[0][:, -1:], arrays[1:]

    def _exact_growing(self, ids, positions, cache) -> list:
        mask = np.ones((1, int(positions[-1]) + 1), dtype=np.int64)
        return _arrays(self.step(ids, mask, positions[None], *cache))

    def _padding(self, ids: np.ndarray, past: int) -> int:
        """Rows of padding for this step: decode steps (one token) only."""
        if self.bucket <= 0 or ids.shape[1] != 1 or past == 0 or self.padding_checked is False:
            return 0
        return -past % self.bucket

    def _check_lengths(self, prompt: np.ndarray, max_new_tokens: int, top_p: float) -> None:
        if prompt.ndim != 1 or prompt.size == 0:
            raise ValidationError("the prompt must be a non-empty list of token ids",
                                  key="prompt_ids")
        if max_new_tokens < 1:
            raise ValidationError(f"max_new_tokens is {max_new_tokens}; ask for 1 or more",
                                  key="max_new_tokens")
        if not 0.0 < top_p <= 1.0:
            raise ValidationError(f"top_p is {top_p}; it must be in (0, 1]", key="top_p")
        # the last token made is not fed back: prompt + new - 1 rows are written
        need = len(prompt) + max_new_tokens - 1
        if self.max_len is not None and need > self.max_len:
            raise ValidationError(
                f"{len(prompt)} prompt tokens + {max_new_tokens} new ones need {need} cache "
                f"rows; the step was compiled with max_len={self.max_len}", key="max_len",
                hint="import the decoder again with a larger max_len, or ask for fewer tokens")


def _arrays(out) -> list:
    return [o.numpy() if hasattr(o, "numpy") else np.asarray(o) for o in out]


def _left_padded(cache: list, rows: list) -> list:
    """Each layer's cache after its ``rows`` zero rows."""
    padded = []
    for c, pad in zip(cache, rows):
        out = np.zeros(c.shape[:2] + (pad + c.shape[2],) + c.shape[3:], c.dtype)
        out[:, :, pad:] = c
        padded.append(out)
    return padded


def _close(got: np.ndarray, want: np.ndarray) -> bool:
    """Padded logits against exact ones: equal but for the order of float sums."""
    scale = max(1.0, float(np.abs(want).max()))
    return got.shape == want.shape and bool(np.allclose(got, want, rtol=1e-4,
                                                        atol=1e-4 * scale))


def generate(model, prompt_ids: Iterable[int], max_new_tokens: int, **kwargs) -> list:
    """The new tokens of ``Generator(model).generate(prompt_ids, max_new_tokens, **kwargs)``."""
    return Generator(model).generate(prompt_ids, max_new_tokens, **kwargs).tokens


def _int_inputs(step) -> int:
    """How many int64 parameters lead the step's signature (2: static cache, 3: growing)."""
    count = 0
    for p in step.params:
        if getattr(p, "dtype", "") != "int64":
            break
        count += 1
    return count


def _cache_signature(step, growing: bool) -> tuple[list, list]:
    """Shapes (an empty past for a growing step) and dtypes of the cache parameters, checked
    against the decode-step contract."""
    params, lead = step.params, 3 if growing else 2
    rank = [getattr(p, "ndim", -1) for p in params]
    if (len(params) < lead + 2 or (len(params) - lead) % 2
            or rank[:lead] != ([2, 2, 2] if growing else [2, 1])
            or any(r != 4 for r in rank[lead:])):
        raise ValidationError(
            f"{step.name!r} is not a decode step: parameters {step.names}",
            key=step.name, hint="expected (input_ids [1, n] int64, positions [n] int64, then "
                                "keys and values [1, heads, max_len, dim] per layer), or the "
                                "ONNX layout (input_ids, attention_mask, position_ids, "
                                "past_key_values.*); make one with frontends.torch.decoder")
    dtypes = [p.dtype for p in params[lead:]]
    shapes = [_static(p, n, growing) for p, n in zip(params[lead:], step.names[lead:])]
    if not growing and len({s[2] for s in shapes}) != 1:
        raise ValidationError(f"the caches of {step.name!r} differ in length: {shapes}",
                              key=step.name)
    return shapes, dtypes


def _static(sinfo: TensorStructInfo, name: str, growing: bool) -> tuple:
    """The cache's shape; a growing past's length (dim 2) is 0, the step's first past."""
    dims = [getattr(d, "value", None) for d in (sinfo.values or ())]
    if growing and len(dims) == 4:
        dims[2] = 0
    if None in dims or not dims:
        raise ValidationError(f"cache parameter {name!r} has a dynamic shape",
                              key=name, hint="caches are preallocated: give max_len")
    return tuple(int(d) for d in dims)
