"""Tiny Hugging Face models from random configs (no downloads), shared by the tests that
import them (from_torch) and write them out again (to_onnx)."""

VOCAB = 100


def tiny_hf_models(transformers, layers: int, hidden: int = 32) -> dict:
    """name -> a builder of BERT, GPT-2, ViT, T5 encoder, DistilBERT: ``hidden`` wide (MLP
    twice that), 4 heads, ``layers`` layers, vocabulary ``VOCAB``."""
    T, h = transformers, hidden
    return {
        "bert": lambda: T.BertModel(T.BertConfig(
            vocab_size=VOCAB, hidden_size=h, num_hidden_layers=layers, num_attention_heads=4,
            intermediate_size=2 * h, max_position_embeddings=64)),
        "gpt2": lambda: T.GPT2Model(T.GPT2Config(
            vocab_size=VOCAB, n_embd=h, n_layer=layers, n_head=4, n_positions=64,
            use_cache=False)),
        "vit": lambda: T.ViTModel(T.ViTConfig(
            image_size=32, patch_size=8, hidden_size=h, num_hidden_layers=layers,
            num_attention_heads=4, intermediate_size=2 * h)),
        "t5_encoder": lambda: T.T5EncoderModel(T.T5Config(
            vocab_size=VOCAB, d_model=h, d_kv=h // 4, d_ff=2 * h, num_layers=layers, num_heads=4,
            use_cache=False)),
        "distilbert": lambda: T.DistilBertModel(T.DistilBertConfig(
            vocab_size=VOCAB, dim=h, n_layers=layers, n_heads=4, hidden_dim=2 * h,
            max_position_embeddings=64)),
    }
