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
