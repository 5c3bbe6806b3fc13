"""A corpus of real model architectures, each run through every user path and compared with
torch eager, so that a conversion is either right, or refused with a typed ``msc.errors``
error: never a silent wrong answer.

The architectures come from the public lists torch.compile benchmarks itself on
(``benchmarks/dynamo/timm_models_list.txt`` and ``huggingface_models_list.txt`` in pytorch):

* ``own``: blocks timm has and transformers lacks, written here at small sizes (Inception-v3,
  GhostNet, NFNet, RepVGG, MobileNetV3, TF EfficientNet). They keep the patterns that
  matter to a converter: subclasses of ``nn.Conv2d`` / ``nn.BatchNorm2d`` that override
  ``forward``, ``count_include_pad=False`` pooling, hard-sigmoid written as arithmetic.
* ``vision`` and ``text``: transformers models built from small configs (2 layers or stages,
  hidden 32-64, vocabulary <= 512, sequence 8-16).

Nothing is downloaded (no ``from_pretrained``); weights are random (``torch.manual_seed``),
moved by N(0, 0.02) noise so that zero biases and unit norms cannot hide a mix-up; every
model is in eval mode.

Tolerance (float32): an output matches when ``max|out - ref| <= 1e-4 * max|ref|``; any shape
difference, NaN or larger error is ``WRONG``. A typed ``msc.errors`` exception is ``refused``
(a correct answer: msc said it cannot), any other exception is ``error``.

    >>> result = run_model("repvgg", paths=("fx",), tmp=Path("/tmp/c"))   # doctest: +SKIP
    >>> result["fx"]["status"], result["fx"]["max_err"]                     # doctest: +SKIP
    ('match', 4.7e-07)
"""

from __future__ import annotations

import math
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from torch import nn

from msc import relax
from msc.codegen import to_onnx, to_relax, to_torch
from msc.errors import MSCError
from msc.frontends import translate
from tests.helpers.timm_blocks import OWN

RTOL = 1e-4  # of max|reference|: the float32 budget for a whole model
PATHS = ("fx", "export", "onnx", "to_torch", "to_onnx")
IMAGE = (1, 3, 32, 32)
SEQ = 12


# --------------------------------------------------------------------------------------------
# transformers models from small configs: (model class, config class, config kwargs, input).

def kw(*base: dict, **kwargs) -> dict:
    """Keyword arguments of a config class, written as they are passed to it."""
    return {key: value for part in base for key, value in part.items()} | kwargs


VOCAB = 256
_ATTN = kw(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
_VIT = kw(image_size=32, patch_size=8, **_ATTN)
_BERT = kw(vocab_size=VOCAB, max_position_embeddings=64, **_ATTN)
_DECODER = kw(_BERT, num_key_value_heads=2, head_dim=8)
_STAGES = kw(hidden_sizes=[16, 32], depths=[1, 1], num_stages=2)

VISION = {
    "resnet": ("ResNetForImageClassification", "ResNetConfig",
               kw(embedding_size=16, num_labels=10, **_STAGES)),
    "convnextv2": ("ConvNextV2ForImageClassification", "ConvNextV2Config",
                   kw(patch_size=4, num_labels=10, **_STAGES)),
    "vit": ("ViTModel", "ViTConfig", _VIT),
    "deit": ("DeiTForImageClassificationWithTeacher", "DeiTConfig", kw(num_labels=10, **_VIT)),
    "beit": ("BeitModel", "BeitConfig", kw(use_relative_position_bias=True, **_VIT)),
    "swin": ("SwinModel", "SwinConfig", kw(image_size=32, patch_size=4, embed_dim=16,
                                             depths=[1, 1], num_heads=[2, 2], window_size=4)),
    "dinov2": ("Dinov2Model", "Dinov2Config", kw(_VIT, intermediate_size=None, mlp_ratio=2)),
    "mobilenetv2": ("MobileNetV2ForImageClassification", "MobileNetV2Config",
                    kw(image_size=32, depth_multiplier=0.25, num_labels=10)),
    "mobilevit": ("MobileViTForImageClassification", "MobileViTConfig",
                  kw(image_size=32, hidden_sizes=[16, 24, 32], num_attention_heads=2,
                       neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 64], num_labels=10)),
    "efficientnet": ("EfficientNetForImageClassification", "EfficientNetConfig",
                     kw(image_size=32, width_coefficient=0.25, depth_coefficient=1.0,
                          kernel_sizes=[3, 5], in_channels=[32, 16], out_channels=[16, 24],
                          strides=[1, 2], num_block_repeats=[1, 1], expand_ratios=[1, 6],
                          hidden_dim=320, num_labels=10)),
    "regnet": ("RegNetForImageClassification", "RegNetConfig",
               kw(embedding_size=16, groups_width=8, num_labels=10, **_STAGES)),
    "levit": ("LevitForImageClassification", "LevitConfig",
              kw(image_size=64, hidden_sizes=[32, 48, 64], num_attention_heads=[2, 2, 2],
                   depths=[1, 1, 1], key_dim=[8, 8, 8], mlp_ratio=[2, 2, 2],
                   attention_ratio=[2, 2, 2], num_labels=10)),
    "poolformer": ("PoolFormerForImageClassification", "PoolFormerConfig",
                   kw(hidden_sizes=[16, 32], depths=[1, 1], num_encoder_blocks=2,
                        patch_sizes=[7, 3], strides=[4, 2], padding=[2, 1], num_labels=10)),
    "siglip_vision": ("SiglipVisionModel", "SiglipVisionConfig", _VIT),
}

TEXT = {
    "albert": ("AlbertForMaskedLM", "AlbertConfig", kw(_BERT, embedding_size=16)),
    "bart": ("BartForCausalLM", "BartConfig",
             kw(vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2,
                  encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
                  decoder_ffn_dim=64, max_position_embeddings=64)),
    "bert": ("BertForMaskedLM", "BertConfig", _BERT),
    "distilbert": ("DistilBertForMaskedLM", "DistilBertConfig",
                   kw(vocab_size=VOCAB, dim=32, n_layers=2, n_heads=4, hidden_dim=64,
                        max_position_embeddings=64)),
    "electra": ("ElectraForCausalLM", "ElectraConfig",
                kw(_BERT, embedding_size=16, is_decoder=True)),
    "gpt2": ("GPT2LMHeadModel", "GPT2Config",
             kw(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=64)),
    "gpt_neo": ("GPTNeoForCausalLM", "GPTNeoConfig",
                kw(vocab_size=VOCAB, hidden_size=32, num_layers=2, num_heads=4,
                     attention_types=[[["global", "local"], 1]], window_size=8,
                     max_position_embeddings=64, intermediate_size=64)),
    "opt": ("OPTForCausalLM", "OPTConfig",
            kw(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, ffn_dim=64,
                 num_attention_heads=4, max_position_embeddings=64, word_embed_proj_dim=32)),
    "roberta": ("RobertaForMaskedLM", "RobertaConfig", _BERT),
    "t5_encoder": ("T5EncoderModel", "T5Config",
                   kw(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2,
                        num_heads=4)),
    "xlnet": ("XLNetLMHeadModel", "XLNetConfig",
              kw(vocab_size=VOCAB, d_model=32, n_layer=2, n_head=4, d_inner=64)),
    "mobilebert": ("MobileBertForMaskedLM", "MobileBertConfig",
                   kw(_BERT, embedding_size=16, intra_bottleneck_size=16,
                        true_hidden_size=16, intermediate_size=32,
                        num_feedforward_networks=2)),
    "llama": ("LlamaForCausalLM", "LlamaConfig", _DECODER),
    "gemma2": ("Gemma2ForCausalLM", "Gemma2Config", kw(_DECODER, sliding_window=8)),
    "gemma3": ("Gemma3ForCausalLM", "Gemma3TextConfig", kw(_DECODER, sliding_window=8)),
    "qwen3": ("Qwen3ForCausalLM", "Qwen3Config", _DECODER),
    "mistral": ("MistralForCausalLM", "MistralConfig", kw(_DECODER, sliding_window=8)),
    "whisper_encoder": ("WhisperForAudioClassification", "WhisperConfig",
                        kw(num_mel_bins=16, d_model=32, encoder_layers=2,
                             encoder_attention_heads=4, encoder_ffn_dim=64,
                             max_source_positions=16, vocab_size=VOCAB, num_labels=4)),
    "wav2vec2": ("Wav2Vec2Model", "Wav2Vec2Config",
                 kw(_ATTN, conv_dim=[16, 16], conv_stride=[5, 2], conv_kernel=[10, 3],
                      num_conv_pos_embeddings=8, num_conv_pos_embedding_groups=4)),
}

def _input(key: str, shape: tuple) -> np.ndarray:
    rng = np.random.default_rng(1)
    if key == "input_ids":
        return rng.integers(0, VOCAB, shape, dtype=np.int64)
    return rng.standard_normal(shape, dtype=np.float32)


_SHAPES = {"levit": (1, 3, 64, 64), "whisper_encoder": (1, 16, 32), "wav2vec2": (1, 400)}
_KEYS = {"whisper_encoder": "input_features", "wav2vec2": "input_values"}


class FirstOutput(nn.Module):
    """Calls a transformers model by keyword and keeps output 0 (logits or last hidden
    state), so every path compares one tensor."""

    def __init__(self, model: nn.Module, key: str):
        super().__init__()
        self.model, self.key = model, key

    def forward(self, x):
        return self.model(**{self.key: x}, return_dict=False)[0]


def hf_model(model_class: str, config_class: str, kwargs: dict) -> nn.Module:
    """The model from a config (eager attention, no cache): raises ImportError when the
    installed transformers lacks the class, which the corpus records as the skip reason."""
    import transformers

    transformers.logging.set_verbosity_error()  # token ids beyond the toy vocabulary
    missing = [n for n in (model_class, config_class) if not hasattr(transformers, n)]
    if missing:
        raise ImportError(f"transformers {transformers.__version__} has no {missing[0]}")
    config = getattr(transformers, config_class)(attn_implementation="eager", use_cache=False,
                                                 **kwargs)
    return getattr(transformers, model_class)(config)


# --------------------------------------------------------------------------------------------
# The registry: name -> () -> (model, input_info, numpy inputs).

def perturb(model: nn.Module) -> nn.Module:
    """Moves every parameter by N(0, 0.02) noise and gives batch norms non-trivial running
    statistics: fresh zero biases, unit gammas and (0, 1) statistics would hide a mix-up."""
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.02)
        for module in model.modules():
            if isinstance(module, nn.modules.batchnorm._BatchNorm):
                module.running_mean.normal_(0, 0.1)
                module.running_var.uniform_(0.5, 1.5)
    return model.eval()


def _case(build: Callable[[], nn.Module], key: str, shape: tuple) -> Callable:
    def make():
        torch.manual_seed(0)
        model = perturb(build())
        x = _input(key, shape)
        return model, [(list(shape), str(x.dtype))], [x]
    return make


def _hf_case(name: str, spec: tuple, key: str, shape: tuple) -> Callable:
    return _case(lambda: FirstOutput(hf_model(*spec), key), key, _SHAPES.get(name, shape))


def registry() -> tuple[dict, dict]:
    """``(models, families)``: every model's builder and the family each belongs to."""
    models, families = {}, {}
    for name, build in OWN.items():
        models[name], families[name] = _case(build, "pixel_values", IMAGE), "own"
    for name, spec in VISION.items():
        models[name], families[name] = _hf_case(name, spec, "pixel_values", IMAGE), "vision"
    for name, spec in TEXT.items():
        key = _KEYS.get(name, "input_ids")
        models[name], families[name] = _hf_case(name, spec, key, (1, SEQ)), "text"
    return models, families


MODELS, FAMILIES = registry()


# --------------------------------------------------------------------------------------------
# Running one model through the paths.

def leaves(value) -> list[np.ndarray]:
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in leaves(v)]
    if isinstance(value, torch.Tensor):
        return [value.detach().numpy()]
    return [np.asarray(value.numpy() if hasattr(value, "numpy") else value)]


def compare(outputs: list, reference: list) -> tuple[str, float, str]:
    """``(status, max_err, message)``: a count or shape difference is WRONG, as is NaN."""
    if len(outputs) != len(reference):
        return "WRONG", math.inf, f"{len(outputs)} outputs, torch gives {len(reference)}"
    worst = 0.0
    for out, ref in zip(outputs, reference):
        if out.shape != ref.shape:
            return "WRONG", math.inf, f"shape {list(out.shape)}, torch gives {list(ref.shape)}"
        if not ref.size:
            continue
        err = float(np.max(np.abs(out.astype(np.float64) - ref)))
        worst = max(worst, math.inf if math.isnan(err) else err)
        if not worst <= RTOL * float(np.max(np.abs(ref))):  # NaN compares False: WRONG
            return "WRONG", worst, f"max error {worst:.3g} > {RTOL:g} * max|torch|"
    return "match", worst, ""


def _timed(fn, *args):
    start = time.perf_counter()
    return fn(*args), time.perf_counter() - start


def _import_torch(case: dict, via: str | None):
    # to_torch and to_onnx take the graph of the user's path (fx, export when fx fails),
    # which is the fx path's graph whenever that one exists
    if via is None and isinstance(case.get("fx"), tuple):
        return case["fx"]
    key = via or "default"
    if key not in case:
        case[key] = translate.from_torch(case["make"]()[0], case["info"], via=via)
    return case[key]


def _import_onnx(case: dict):
    path = case["tmp"] / "model.onnx"
    args = tuple(torch.from_numpy(x) for x in case["inputs"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            torch.onnx.export(case["make"]()[0], args, str(path), dynamo=False)
        except Exception:  # noqa: BLE001  (the TorchScript exporter is gone or refuses)
            torch.onnx.export(case["make"]()[0], args, str(path), dynamo=True,
                              external_data=False)
    return translate.from_onnx(str(path))


def _build_relax(graph_weights, case: dict, path: str):
    mod = to_relax(*graph_weights, build_folder=str(case["tmp"] / path))
    vm = relax.VirtualMachine(relax.build(mod, target="llvm"), relax.cpu())
    return lambda: leaves(vm["main"](*case["inputs"]))


def _build_torch(graph_weights, case: dict, path: str):
    module = to_torch(*graph_weights, build_folder=str(case["tmp"] / path))
    return lambda: leaves(_no_grad(module, case["inputs"]))


@torch.no_grad()
def _no_grad(module, inputs: list):
    return module(*[torch.from_numpy(x) for x in inputs])


def _build_onnx(graph_weights, case: dict, path: str):
    import onnxruntime as ort


    proto = to_onnx(*graph_weights)
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {i.name: x for i, x in zip(session.get_inputs(), case["inputs"])}
    return lambda: session.run(None, feeds)


# path -> (import, build): import gives (graph, weights), build gives a runner of the result.
ROUTES = {
    "fx": (lambda case: _import_torch(case, "fx"), _build_relax),
    "export": (lambda case: _import_torch(case, "export"), _build_relax),
    "onnx": (_import_onnx, _build_relax),
    "to_torch": (lambda case: _import_torch(case, None), _build_torch),
    "to_onnx": (lambda case: _import_torch(case, None), _build_onnx),
}


def outcome(err: BaseException) -> dict:
    """A typed msc error is a refusal (the right answer when msc cannot); anything else is
    an error of msc (or of torch's exporter on the onnx path)."""
    lines = str(err).strip().splitlines() or [""]
    ops = sorted({str(item.get("op")) for item in getattr(err, "items", ())})
    text = f"{type(err).__name__}: {lines[0][:300]}" + (f" ({', '.join(ops)})" if ops else "")
    return {"status": "refused" if isinstance(err, MSCError) else "error", "message": text}


_EMPTY = {"status": "error", "max_err": math.nan, "message": "", "import_s": 0.0, "build_s": 0.0}


def run_path(path: str, case: dict) -> dict:
    result = dict(_EMPTY)
    load, build = ROUTES[path]
    try:
        graph_weights, result["import_s"] = _timed(load, case)
        runner, result["build_s"] = _timed(build, graph_weights, case, path)
        status, result["max_err"], result["message"] = compare(runner(), case["reference"])
        result["status"] = status
    except Exception as err:  # noqa: BLE001  (every failure is a row of the table)
        result.update(outcome(err))
    return result


def run_model(name: str, paths=PATHS, tmp: Path | None = None) -> dict[str, dict]:
    """path -> ``{"status", "max_err", "message", "import_s", "build_s"}`` for ``name``;
    status is "match", "WRONG", "refused", "error" or "skipped" (the installed transformers
    lacks the model); the tolerance is the module's."""
    try:
        model, info, inputs = MODELS[name]()
    except ImportError as err:  # the installed transformers lacks the architecture
        return {p: {**_EMPTY, "status": "skipped", "message": str(err)} for p in paths}
    tmp = Path(tmp or tempfile.mkdtemp(prefix=f"corpus_{name}_")) / name
    tmp.mkdir(parents=True, exist_ok=True)
    reference = leaves(_no_grad(model, inputs))
    # each tracer gets a fresh copy (same seed, same weights): tracing can leave state on a
    # model (Swin keeps a traced window size), and one path must not spoil the next
    case = {"make": MODELS[name], "info": info, "inputs": inputs, "reference": reference,
            "tmp": tmp}
    return {path: run_path(path, case) for path in paths}
