"""Counts in words: a count of one reads singular wherever relviz prints one (relviz._words.counted)."""
from __future__ import annotations

from relviz._words import counted
from relviz.mechanisms.alibi import Alibi
from relviz.mechanisms.pattern import AttentionPattern
from relviz.mechanisms.rope2d import Rope2DLayer
from relviz.mechanisms.swin_bias import SwinBias


def test_counted_agrees_with_its_number():
    assert counted(1, "pair") == "1 pair" and counted(0, "pair") == "0 pairs" and counted(4096, "pair") == "4,096 pairs"
    assert counted(1, "patch", "patches") == "1 patch" and counted(2, "patch", "patches") == "2 patches"
    assert counted(-1, "frame", spec="+d") == "-1 frame" and counted(0, "frame", spec="+d") == "+0 frames"


def test_a_mechanism_of_one_head_or_one_key_says_so_in_the_singular():
    assert Alibi(heads=1).label() == "ALiBi 1 head" and Alibi(heads=16).label() == "ALiBi 16 heads"
    assert "only the last 1 key (j > i − 1)" in AttentionPattern(causal=True, window=1).describe()
    assert "own chunk of 1 position" in AttentionPattern(causal=True, chunk=1).describe()
    assert "rows × 1 head," in SwinBias(stage=0, block=0, window=2, heads=1, continuous=False).describe()
    assert Rope2DLayer("dinov3", 16, 100.0, prefix=1).describe().endswith("; the CLS token is not rotated")
    assert Rope2DLayer("dinov3", 16, 100.0, prefix=5).describe().endswith(
        "; the first 5 tokens (CLS and registers) are not rotated")
