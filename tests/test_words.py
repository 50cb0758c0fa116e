"""Counts in words: a count of one reads singular wherever relviz prints one (relviz._words.counted)."""
from __future__ import annotations

from relviz._words import article, counted, minus, signed
from relviz.mechanisms.alibi import Alibi
from relviz.mechanisms.pattern import AttentionPattern
from relviz.mechanisms.rope2d import Rope2DLayer
from relviz.mechanisms.swin_bias import SwinBias


def test_counted_agrees_with_its_number():
    assert counted(1, "pair") == "1 pair" and counted(0, "pair") == "0 pairs" and counted(4096, "pair") == "4,096 pairs"
    assert counted(1, "patch", "patches") == "1 patch" and counted(2, "patch", "patches") == "2 patches"
    assert counted(-1, "frame", spec="+d") == "-1 frame" and counted(0, "frame", spec="+d") == "+0 frames"


def test_a_negative_number_is_written_with_a_true_minus_sign():
    assert minus(-3) == "\u22123" and minus(0) == "0" and minus(None) == "None" and minus(-10000, ",.0f") == "\u221210,000"
    assert signed(2) == "+2" and signed(0) == "0" and signed(-3) == "\u22123"


def test_a_mechanism_of_one_head_or_one_key_says_so_in_the_singular():
    assert Alibi(heads=1).label() == "ALiBi 1 head" and Alibi(heads=16).label() == "ALiBi 16 heads"
    assert "only the last 1 key (j > i − 1)" in AttentionPattern(causal=True, window=1).describe()
    assert "own chunk of 1 position" in AttentionPattern(causal=True, chunk=1).describe()
    assert "rows × 1 head," in SwinBias(stage=0, block=0, window=2, heads=1, continuous=False).describe()
    assert Rope2DLayer("dinov3", 16, 100.0, prefix=1).describe().endswith("; the CLS token is not rotated")
    assert Rope2DLayer("dinov3", 16, 100.0, prefix=5).describe().endswith(
        "; the first 5 tokens (CLS and registers) are not rotated")


def test_the_wavelength_caption_counts_its_pairs_in_words_that_fit():
    """Gemma 3's local layers at 131,072 positions read 'the other 0 never do (red)'."""
    from relviz import hf
    from relviz.layer_strip import layer_views
    from relviz.mechanisms.view_kinds import Wavelengths

    def caption(length: int) -> str:
        plan = hf.from_config({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
                               "num_hidden_layers": 1, "max_position_embeddings": length})
        (view,) = [v for v in layer_views(plan.layer(0), length) if isinstance(v, Wavelengths)]
        return view.caption

    assert "every one of its 8 pairs completes at least one turn (green)." in caption(131072)
    assert "the other 0" not in caption(131072)
    assert "3 of 8 pairs complete at least one turn (green); the other 5 never do (red)" in caption(64)
    assert "1 of 8 pairs completes at least one turn" in caption(16)


def test_an_before_a_number_read_with_a_vowel_sound():
    """The Images page said "a 8-frame video" and "a 8 × 8 image" (M-RoPE's sequence, frames and sides 1-64)."""
    from relviz.vision.mrope import ids_words

    assert [article(n) for n in (1, 8, 11, 16, 18, 64, 80, 110, 800, 8000, 11_000, 18_500, 100_000)] == \
        ["a", "an", "an", "a", "an", "a", "an", "a", "an", "an", "an", "an", "a"]
    words = ids_words(8, 11, 8)
    assert "an 8 × 11 image" in words and "an 8-frame video" in words and " a 8" not in words
    assert "a 16 × 16 image" in ids_words(16, 16, 4) and "a 4-frame video" in ids_words(16, 16, 4)
