"""Tiny random Hugging Face models with a word-level tokenizer, saved for the "Your model" tests (no network)."""
from __future__ import annotations

from pathlib import Path

WORDS = ["[PAD]", "[UNK]", "the", "cat", "sat", "on", "mat", "a", "dog", "ran", "."]


def save_tokenizer(directory: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Whitespace()])
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]", pad_token="[PAD]",
                            model_max_length=64).save_pretrained(directory)


def tiny_t5_with_tokenizer(directory: Path) -> Path:
    import torch
    from transformers import T5Config, T5Model

    torch.manual_seed(0)
    config = T5Config(vocab_size=len(WORDS), d_model=16, d_kv=4, d_ff=8, num_heads=2, num_layers=2,
                      num_decoder_layers=2, relative_attention_num_buckets=8, relative_attention_max_distance=20)
    model = T5Model(config)
    for p in model.parameters():
        torch.nn.init.normal_(p)
    model.save_pretrained(directory)
    save_tokenizer(directory)
    return directory


def tiny_gpt2_with_tokenizer(directory: Path) -> Path:
    import torch
    from transformers import GPT2Config, GPT2Model

    torch.manual_seed(0)
    model = GPT2Model(GPT2Config(vocab_size=len(WORDS), n_embd=8, n_layer=2, n_head=2, n_positions=32,
                                      bos_token_id=None, eos_token_id=None))
    for p in model.parameters():
        torch.nn.init.normal_(p)
    model.save_pretrained(directory)
    save_tokenizer(directory)
    return directory


def write_large_t5_checkpoint(directory: Path, *, d_model: int = 1024, layers: int = 12) -> int:
    """A T5-shaped, 2-shard safetensors checkpoint of zeros with real tensor names (~1.3 GB at the
    defaults), to time ``relviz inspect`` on a large directory; returns its size in bytes. Not a test
    fixture: the closing note's measurement, ``python -c "from hf_support import ...; ..."``."""
    import json

    import torch
    from safetensors.torch import save_file

    directory.mkdir(parents=True, exist_ok=True)
    heads, ff, vocab = d_model // 64, 4 * d_model, 32128
    (directory / "config.json").write_text(json.dumps({
        "model_type": "t5", "d_model": d_model, "d_kv": 64, "d_ff": ff, "num_heads": heads, "num_layers": layers,
        "num_decoder_layers": layers, "relative_attention_num_buckets": 32, "relative_attention_max_distance": 128,
        "vocab_size": vocab}))
    tensors = {"shared.weight": torch.zeros(vocab, d_model)}
    for stack, ff_layer in (("encoder", 1), ("decoder", 2)):
        for i in range(layers):
            for n in "qkvo":
                tensors[f"{stack}.block.{i}.layer.0.SelfAttention.{n}.weight"] = torch.zeros(d_model, d_model)
            tensors[f"{stack}.block.{i}.layer.{ff_layer}.DenseReluDense.wi.weight"] = torch.zeros(ff, d_model)
            tensors[f"{stack}.block.{i}.layer.{ff_layer}.DenseReluDense.wo.weight"] = torch.zeros(d_model, ff)
        tensors[f"{stack}.block.0.layer.0.SelfAttention.relative_attention_bias.weight"] = torch.randn(32, heads)
    names = sorted(tensors)
    weight_map = {}
    for k, part in enumerate((names[:len(names) // 2], names[len(names) // 2:])):
        shard = f"model-0000{k + 1}-of-00002.safetensors"
        save_file({n: tensors[n] for n in part}, str(directory / shard))
        weight_map.update({n: shard for n in part})
    (directory / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return sum(p.stat().st_size for p in directory.glob("*.safetensors"))


def tiny_causal_lm_with_tokenizer(directory: Path, model_type: str, **fields) -> Path:
    """A tiny random causal LM of any family transformers builds from a config (Llama, Qwen3-Next, ...)."""
    import torch
    from transformers import AutoModelForCausalLM, CONFIG_MAPPING

    torch.manual_seed(0)
    config = CONFIG_MAPPING[model_type](**{"vocab_size": len(WORDS), "hidden_size": 32, "num_attention_heads": 2,
                                           "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 16,
                                           "max_position_embeddings": 64, "pad_token_id": 0, "bos_token_id": None,
                                           "eos_token_id": None, **fields})
    AutoModelForCausalLM.from_config(config).save_pretrained(directory)
    save_tokenizer(directory)
    return directory
