"""The Shaw page's sentences (relviz.figures.shaw): each carries its k, and k = 0 says there is no position."""
from __future__ import annotations

from relviz.figures import shaw


def test_matrix_table_and_depth_sentences_follow_k():
    relative, clipped, index = shaw.matrix_captions(3)
    assert "Toeplitz" in relative
    assert "|j − i| < 3" in clipped and "offset 3 from offset 103" in clipped
    assert "clipped + 3, in 0…6" in index
    assert "7 vectors" in shaw.table_caption(3) and "≥ 3)" in shaw.table_caption(3)
    assert "farther than 3 positions" in shaw.depth_text(3) and "information from 6 back" in shaw.depth_text(3)
    none = shaw.matrix_captions(0)
    assert "no position information" in none[1] and "the table has one row" in none[2]
    assert "1 vector, w[0]" in shaw.table_caption(0) and "12.5 BLEU" in shaw.depth_text(0)


def test_unclipped_caption_only_when_k_reaches_the_longest_offset():
    assert shaw.unclipped_caption(shaw.shaw_offsets(10, 10, k=3)) is None        # offsets ±9: clipped
    text = shaw.unclipped_caption(shaw.shaw_offsets(4, 6, k=9, q_offset=1))      # offsets −4 … 4
    assert text.startswith("**k = 9 ≥ 4, the longest offset of this matrix: nothing is clipped.**")
    assert "uses only 9 of its 19 rows, those of offsets −4 … 4" in text
    assert shaw.unclipped_caption(shaw.shaw_offsets(1, 1, k=5)) is None          # one cell, offset 0


def test_compare_and_seed_table_captions_count_rows():
    assert shaw.compare_caption(8).startswith("**Shaw, k = 8:** 17 table rows. Exact inside |j − i| ≤ 8")
    assert "(here 8)" in shaw.seed_table_caption(8) and "with 47 rows that are never read" in shaw.seed_table_caption(8)
