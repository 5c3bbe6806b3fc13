"""The six decoder LLMs of the generation tests, from tests/helpers/corpus.py's small configs
(2 layers, hidden 32, vocabulary 256; grouped-query heads, Mistral's and Gemma-2's sliding
window of 8), random weights moved by N(0, 0.1) noise: with the default 0.02 init GPT-2 and
OPT repeat one token, so a greedy comparison would prove little."""

from __future__ import annotations

import torch

from tests.helpers.corpus import TEXT

DECODERS = ("gpt2", "llama", "qwen3", "mistral", "gemma2", "opt")
# longer than the sliding window (8) with the new tokens; no id is a model's pad token (1)
PROMPT = [5, 17, 3, 99, 42, 7, 11, 200, 13, 50]


def decoder(name: str, seed: int = 0, scale: float = 0.1) -> torch.nn.Module:
    """transformers' ``name`` causal LM from its small config, eval mode."""
    import transformers

    transformers.logging.set_verbosity_error()
    model_class, config_class, kwargs = TEXT[name]
    torch.manual_seed(seed)
    model = getattr(transformers, model_class)(getattr(transformers, config_class)(**kwargs))
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param) * scale)
    return model.eval()


def reference_tokens(model, prompt: list, new: int) -> list:
    """transformers' greedy ``generate``, every prompt token attended to, exactly ``new``."""
    ids = torch.tensor([prompt])
    out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new,
                         min_new_tokens=new, do_sample=False)
    return out[0, len(prompt):].tolist()
