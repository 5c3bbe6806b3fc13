"""The ONNX front door for decoder LLMs: a decode step exported by torch.onnx.export in the
layout optimum and onnxruntime-genai use (past_key_values.{i}.key / value with a symbolic
past length in, logits and present.{i}.key / value out) goes from_onnx -> MSCGraph ->
to_relax -> build, matches onnxruntime at every past length (an empty past included), and
generates transformers' greedy tokens."""

import numpy as np
import pytest

from msc import relax
from msc.codegen import to_relax
from msc.frontends import translate
from msc.generation import Generator
from tests.helpers.decoders import DECODERS, PROMPT, decoder, export_onnx_decoder, reference_tokens

ort = pytest.importorskip("onnxruntime")


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    model = decoder("llama")
    path = tmp_path_factory.mktemp("decoder") / "llama.onnx"
    export_onnx_decoder(model, path)
    graph, weights = translate.from_onnx(str(path))
    return model, path, Generator(relax.build(to_relax(graph, weights)))


@pytest.mark.parametrize("past, new", [(0, 5), (6, 1), (3, 4)])
def test_the_step_matches_onnxruntime(llama, past, new):
    _, path, gen = llama
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(past)
    caches = [rng.standard_normal(s[:2] + (past,) + s[3:]).astype(np.float32)
              for s in gen.cache_shapes]
    feeds = [rng.integers(0, 256, (1, new)), np.ones((1, past + new), np.int64),
             np.arange(past, past + new)[None], *caches]
    want = session.run(None, dict(zip([i.name for i in session.get_inputs()], feeds)))
    got = gen.step(*feeds)
    for mine, theirs in zip(got, want):
        np.testing.assert_allclose(mine.numpy(), theirs, rtol=1e-4, atol=1e-5)


def test_greedy_tokens_are_transformers(llama):
    model, _, gen = llama
    assert gen.growing and gen.max_len is None
    assert gen.generate(PROMPT, 8).tokens == reference_tokens(model, PROMPT, 8)


@pytest.mark.parametrize("name", [n for n in DECODERS if n != "llama"])
def test_every_architecture_generates_transformers_tokens(tmp_path, name):
    """GPT-2 (its export's mask expands to a shape computed as Where(shape == -1, 1, shape)),
    Qwen3, Mistral and Gemma-2 (sliding windows: the prompt and new tokens pass 8) and OPT.
    Decode pasts are left-padded to a bucket of rows, so the VM plans prefill, the bucket
    and the one exact step the padding is checked against, not a plan per token. The
    sliding-window exports keep only the window's rows: their padded mask is refused by
    that check, and they run unpadded."""
    model = decoder(name)
    export_onnx_decoder(model, tmp_path / f"{name}.onnx")
    graph, weights = translate.from_onnx(str(tmp_path / f"{name}.onnx"))
    gen = Generator(relax.build(to_relax(graph, weights)), bucket=8)
    assert gen.generate(PROMPT, 6).tokens == reference_tokens(model, PROMPT, 6)
    sliding = name in ("mistral", "gemma2")
    assert gen.padding_checked is not sliding
    if not sliding:  # prefill (past 0), the exact check (past 10), pasts 11-15 padded to 16
        assert len(gen.step._entries) == 3
