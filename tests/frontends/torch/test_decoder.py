"""Decoder LLMs through the user's path with a KV cache: transformers model -> decode step
(frontends/torch/decoder.py) -> from_torch -> MSCGraph -> to_relax -> build -> Generator.
Greedy tokens must be transformers' ``generate(do_sample=False)`` token for token, for six
architectures (learned and rotary positions, grouped-query heads, sliding windows, Gemma-2's
soft-capping); the caches are written in place."""

import numpy as np
import pytest
import torch

from msc import relax
from msc.codegen import to_relax
from msc.errors import UnsupportedOpError, ValidationError
from msc.frontends.torch.decoder import DecodeStep, decoder_from_torch
from msc.generation import Generator, generate, next_token
from tests.helpers.decoders import DECODERS, PROMPT, decoder, reference_tokens

NEW = 16
MAX_LEN = 32


def _generator(model) -> Generator:
    graph, weights = decoder_from_torch(model, max_len=MAX_LEN)
    return Generator(relax.build(to_relax(graph, weights)))


@pytest.fixture(scope="module")
def llama():
    model = decoder("llama")
    return model, _generator(model)


@pytest.mark.parametrize("name", DECODERS)
def test_greedy_tokens_are_transformers(name):
    model = decoder(name)
    expected = reference_tokens(model, PROMPT, NEW)
    gen = _generator(model)
    assert gen.step.vm.executable.stats["fused"]["kv_cache_in_place"] == 2 * 2  # 2 layers
    assert gen.generate(PROMPT, NEW).tokens == expected


def test_the_step_matches_torch_and_writes_the_callers_cache(llama):
    model, gen = llama
    step = DecodeStep(model, MAX_LEN).eval()
    cache = gen.new_cache()
    ids, positions = np.array([PROMPT]), np.arange(len(PROMPT))
    with torch.no_grad():
        want = step(torch.tensor(ids), torch.tensor(positions),
                    *(torch.tensor(c) for c in cache))
    got = gen.step(ids, positions, *cache)
    np.testing.assert_allclose(got[0].numpy(), want[0].numpy(), rtol=1e-4, atol=1e-5)
    for mine, theirs, present in zip(cache, want[1:], got[1:]):
        assert np.shares_memory(present.numpy(), mine)  # in place: no copy of the cache
        np.testing.assert_allclose(mine, theirs.numpy(), rtol=1e-4, atol=1e-6)


def test_sampling_is_reproducible_and_top_k_1_is_greedy(llama):
    _, gen = llama
    greedy = gen.generate(PROMPT, 8).tokens
    assert gen.generate(PROMPT, 8, temperature=0.7, top_k=1, seed=3).tokens == greedy
    first = gen.generate(PROMPT, 8, temperature=1.5, top_p=0.9, seed=7).tokens
    assert gen.generate(PROMPT, 8, temperature=1.5, top_p=0.9, seed=7).tokens == first
    draws = {tuple(gen.generate(PROMPT, 8, temperature=1.5, seed=s).tokens) for s in range(4)}
    assert len(draws) > 1  # the seed matters at a high temperature


def test_next_token_restricts_to_top_k_and_top_p():
    logits = np.log(np.array([0.5, 0.3, 0.15, 0.05]))
    rng = np.random.default_rng(0)
    assert {next_token(logits, rng, 1.0, top_k=2) for _ in range(200)} == {0, 1}
    assert {next_token(logits, rng, 1.0, top_p=0.75) for _ in range(200)} == {0, 1}
    assert next_token(logits) == 0


def test_stop_tokens_and_lengths(llama):
    _, gen = llama
    tokens = gen.generate(PROMPT, 8).tokens
    stop = gen.generate(PROMPT, 8, stop_tokens=[tokens[2]])
    assert stop.stopped and stop.tokens == tokens[:tokens.index(tokens[2]) + 1]
    assert generate(gen.step.vm, PROMPT, 3) == tokens[:3]
    with pytest.raises(ValidationError, match="max_len=32"):
        gen.generate(PROMPT, MAX_LEN)
    with pytest.raises(ValidationError, match="prompt"):
        gen.generate([], 4)


def test_what_is_not_a_decoder_is_refused_by_name():
    with pytest.raises(UnsupportedOpError, match="Linear is not a transformers causal LM"):
        decoder_from_torch(torch.nn.Linear(2, 2), max_len=8)
    x = relax.Var("x", relax.TensorStructInfo((1, 4), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        bb.emit_func_output(x)
    with pytest.raises(ValidationError, match="not a decode step"):
        Generator(relax.build(bb.get()))
