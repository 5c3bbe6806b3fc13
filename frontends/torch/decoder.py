"""A transformers decoder LLM as one decode step with a static KV cache, for ``from_torch``.

``decoder_from_torch(model, max_len)`` wraps a causal LM (GPT-2, Llama, Qwen3, Mistral,
Gemma-2, OPT, ...) in :class:`DecodeStep` and imports it. The step's signature is the
contract :class:`msc.generation.Generator` reads, by position::

    step(input_ids [1, n] int64, positions [n] int64,
         past_k_0, past_v_0, past_k_1, ...  [1, kv_heads, max_len, head_dim] float32)
      -> (logits [1, 1, vocab] of the last position, present_k_0, present_v_0, ...)

Why this shape: the caches are preallocated to ``max_len`` and the new keys and values are
written at ``positions`` (``index_copy`` along the sequence axis), so the VM can update them
in place (backend/fuse/patterns/cache.py) instead of concatenating a longer cache every token.
Attention then reads the whole buffer through an additive mask built here from
``positions``: key ``k`` is visible from query ``q`` when ``k <= q`` (and ``q - k < window``
on sliding-window layers), so rows not yet written never count. ``n`` is dynamic: the prompt
is one call (prefill), each new token another (decode).

The model's own attention code runs (eager), with its rotary embeddings, grouped-query heads
and Gemma-2's soft-capping; only the cache object and the masks come from here. Models whose
config lists ``layer_types`` take a mask per layer type; the others one mask, sliding when
``config.sliding_window`` is set (Mistral).
"""

from __future__ import annotations

import inspect

import torch
from torch import nn

from msc.errors import UnsupportedOpError

__all__ = ["DecodeStep", "decoder_from_torch", "decoder_input_info"]


def _config_ints(model) -> tuple[int, int, int]:
    """(layers, kv heads, head dim) of a transformers decoder's config."""
    config = getattr(model, "config", None)
    layers = getattr(config, "num_hidden_layers", None)
    heads = getattr(config, "num_attention_heads", None)
    if not isinstance(layers, int) or not isinstance(heads, int) or not callable(
            getattr(model, "generate", None)):
        raise UnsupportedOpError(
            f"{type(model).__name__} is not a transformers causal LM (its config names no "
            "num_hidden_layers / num_attention_heads)",
            op="decoder", hint="pass a transformers causal LM (GPT-2, Llama, Qwen3, Mistral, "
                               "Gemma-2, OPT, ...)")
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    return layers, kv_heads, head_dim


class _Layer:
    """One layer's cache as transformers' attention sees it (keys, values)."""

    is_sliding = False

    def __init__(self, keys: torch.Tensor, values: torch.Tensor):
        self.keys, self.values = keys, values


def _step_cache(past: tuple, positions: torch.Tensor):
    """A transformers ``Cache`` over the step's inputs whose update writes the new keys and
    values at ``positions`` (a functional ``index_copy``: the traced graph says it, the VM
    does it in place) and returns the whole buffer."""
    from transformers.cache_utils import Cache

    class StepCache(Cache):
        def __init__(self):
            self.layers = [_Layer(past[i], past[i + 1]) for i in range(0, len(past), 2)]

        def update(self, key_states, value_states, layer_idx, *args, **kwargs):
            layer = self.layers[layer_idx]
            layer.keys = torch.index_copy(layer.keys, 2, positions, key_states)
            layer.values = torch.index_copy(layer.values, 2, positions, value_states)
            return layer.keys, layer.values

        def get_seq_length(self, layer_idx: int = 0) -> int:
            return 0  # positions and masks are given: nothing reads this

        @property
        def is_compileable(self) -> bool:
            return False

    return StepCache()


class DecodeStep(nn.Module):
    """``model`` (a transformers causal LM, eval mode) as one decode step over ``max_len``
    cache rows; see the module docstring for its inputs and outputs."""

    def __init__(self, model: nn.Module, max_len: int):
        super().__init__()
        self.model, self.max_len = model, int(max_len)
        self.layers, self.kv_heads, self.head_dim = _config_ints(model)
        config = model.config
        # transformers 5.2x renames forward's past_key_values to cache (the old name warns)
        self.cache_key = ("cache" if "cache" in inspect.signature(model.forward).parameters
                          else "past_key_values")
        self.window = getattr(config, "sliding_window", None)
        self.layer_types = getattr(config, "layer_types", None)
        model.config._attn_implementation = "eager"  # the attention msc reads op by op
        names = ["input_ids", "positions"] + [f"past_{kv}_{i}" for i in range(self.layers)
                                              for kv in "kv"]
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD

        def forward(*args):  # a named parameter per cache: torch.export binds by signature
            return self.step(*args)
        forward.__signature__ = inspect.Signature([inspect.Parameter(n, kind) for n in names])
        self.forward = forward

    def cache_shape(self) -> tuple:
        return (1, self.kv_heads, self.max_len, self.head_dim)

    def _mask(self, positions: torch.Tensor, window) -> torch.Tensor:
        keys = torch.arange(self.max_len)[None, :]
        query = positions[:, None]
        visible = keys <= query
        if window:
            visible = visible & (keys > query - window)
        return ((~visible).to(torch.float32) * torch.finfo(torch.float32).min)[None, None]

    def masks(self, positions: torch.Tensor):
        full = self._mask(positions, None)
        if self.layer_types:
            return {"full_attention": full,
                    "sliding_attention": self._mask(positions, self.window)}
        return self._mask(positions, self.window) if self.window else full

    def step(self, input_ids, positions, *past):
        cache = _step_cache(past, positions)
        out = self.model(input_ids=input_ids, position_ids=positions[None],
                         cache_position=positions, attention_mask=self.masks(positions),
                         use_cache=True, logits_to_keep=1, return_dict=True,
                         **{self.cache_key: cache})
        return (out.logits, *(t for layer in cache.layers for t in (layer.keys, layer.values)))


def decoder_input_info(step: DecodeStep) -> list:
    """from_torch's input_info of a step: ``n`` (the new tokens) is dynamic."""
    cache = (list(step.cache_shape()), "float32")
    return [([1, "n"], "int64"), (["n"], "int64")] + [cache] * (2 * step.layers)


def decoder_from_torch(model: nn.Module, max_len: int, as_msc: bool = True, **kwargs):
    """Import ``model``'s decode step with caches of ``max_len`` rows (prompt + new tokens):
    ``(graph, weights)``, or the Relax module with ``as_msc=False``. ``kwargs`` go to
    ``from_torch``."""
    from .api import from_torch

    kwargs.setdefault("via", "export")  # fx cannot trace transformers decoders
    step = DecodeStep(model.eval(), max_len).eval()
    with torch.no_grad():
        return from_torch(step, decoder_input_info(step), as_msc=as_msc, **kwargs)
