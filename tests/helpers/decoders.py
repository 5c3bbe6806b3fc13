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


def export_onnx_decoder(model, path) -> None:
    """``model``'s decode step as ONNX in the layout optimum and onnxruntime-genai use:
    inputs ``input_ids [1, seq]``, ``attention_mask [1, total]``, ``position_ids [1, seq]``,
    ``past_key_values.{i}.key / value [1, kv_heads, past_i, head_dim]`` (symbolic, per layer),
    outputs ``logits`` and ``present.{i}.key / value`` (total rows). torch.onnx.export's
    TorchScript exporter, opset 17, through a DynamicCache filled from the past inputs."""
    from transformers import DynamicCache

    config = model.config
    layers = config.num_hidden_layers
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads

    class OnnxStep(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, position_ids, *past):
            cache = DynamicCache(config=config)
            for i in range(layers):
                cache.update(past[2 * i], past[2 * i + 1], i)
            out = self.model(input_ids=input_ids, attention_mask=attention_mask,
                             position_ids=position_ids, past_key_values=cache,
                             use_cache=True, return_dict=True)
            return (out.logits, *(t for layer in cache.layers for t in (layer.keys,
                                                                        layer.values)))

    names = [f"past_key_values.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    outs = ["logits"] + [n.replace("past_key_values", "present") for n in names]
    axes = {"input_ids": {1: "seq"}, "attention_mask": {1: "total"},
            "position_ids": {1: "seq"}, "logits": {1: "seq"},
            # a dim per layer: Gemma-2's sliding layers keep fewer rows than its full ones
            **{n: {2: f"past_{i // 2}"} for i, n in enumerate(names)},
            **{n: {2: f"total_{i // 2}"} for i, n in enumerate(outs[1:])}}
    past, new = 4, 3
    args = (torch.tensor([[1, 2, 3]]), torch.ones(1, past + new, dtype=torch.long),
            torch.arange(past, past + new)[None],
            *(torch.randn(1, kv_heads, past, head_dim) for _ in names))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation and tracer
        torch.onnx.export(OnnxStep().eval(), args, str(path), dynamo=False, opset_version=17,
                          input_names=["input_ids", "attention_mask", "position_ids", *names],
                          output_names=outs, dynamic_axes=axes)
