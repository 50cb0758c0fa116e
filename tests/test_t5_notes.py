"""Pitfall detection for T5 settings: the data is right, the sentences carry the numbers."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from relviz.positions import t5_bucket, t5_config
from relviz.t5_notes import t5_notes


def test_t5_defaults_bidirectional():
    notes = t5_notes(32, 128, True)
    assert notes.valid and notes.error is None
    assert (notes.buckets_per_direction, notes.max_exact, notes.log_buckets) == (16, 8, 8)
    assert notes.unused == (16,)
    assert notes.last_start == 91  # FACTS: the last bucket starts at 91, not 128
    kinds = notes.kinds()
    for kind in ("unused", "saturation", "split", "max_exact", "blind", "sharing"):
        assert kind in kinds
    assert "future_bucket0" not in kinds
    text = {n.kind: n.text for n in notes.notes}
    assert "16 per direction" in text["split"] and "8 exact + 8 logarithmic" in text["split"]
    assert "91" in text["saturation"] and "128" in text["saturation"]
    assert "bucket 16" in text["unused"]
    assert "cross-attention" in text["sharing"] and "all layers" in text["sharing"]
    assert "later layers" in text["blind"].lower()
    assert {n.kind: n.level for n in notes.notes}["unused"] == "warning"


def test_t5_defaults_unidirectional():
    notes = t5_notes(32, 128, False)
    assert notes.valid and notes.unused == ()
    assert notes.last_start == 113  # FACTS: 113 unidirectional
    assert (notes.buckets_per_direction, notes.max_exact) == (32, 16)
    assert "future_bucket0" in notes.kinds()
    text = {n.kind: n.text for n in notes.notes}["future_bucket0"]
    assert "bucket 0" in text and "decoder" in text and "causal mask" in text


def test_odd_num_buckets_wastes_the_last_bucket_too():
    notes = t5_notes(33, 128, True)
    assert notes.unused == (16, 32)
    assert "odd" in notes.unused_reasons[32]
    assert "odd num_buckets" in {n.kind: n.text for n in notes.notes}["unused"]


def test_log_region_too_short_skips_buckets():
    notes = t5_notes(32, 10, True)
    # Distances 8 and 9 go to buckets 8 and 12; 10 and beyond saturate at 15: 9-11, 13, 14 never used.
    assert notes.unused == (9, 10, 11, 13, 14, 16, 25, 26, 27, 29, 30)
    assert notes.unused_reasons[9].startswith("skipped")
    assert "saturation" not in notes.kinds()  # the last bucket begins exactly at max_distance here
    assert notes.last_start == 10


@pytest.mark.parametrize("nb, md, bidir, nearest", [
    (2, 128, True, (4, 128)), (3, 1024, True, (4, 1024)), (128, 32, True, (128, 33)), (128, 1, True, (128, 33)),
    (4, 1, True, (4, 2)), (2, 1, False, (2, 2)), (128, 64, False, (128, 65)),
])
def test_invalid_settings_give_the_library_message_and_the_nearest_valid_one(nb, md, bidir, nearest):
    notes = t5_notes(nb, md, bidir, q_len=10, k_len=10)
    assert not notes.valid and notes.nearest == nearest
    with pytest.raises(ValueError) as raised:
        t5_config(nb, md, bidir)
    assert notes.error == str(raised.value)
    assert notes.kinds() == ["invalid"]
    assert f"num_buckets = {nearest[0]}, max_distance = {nearest[1]}" in notes.notes[0].text
    assert t5_notes(*nearest, bidir).valid


def test_every_slider_combination_is_classified_like_the_library():
    """Every (num_buckets, max_distance, bidirectional) the page's sliders reach: valid iff t5_config accepts."""
    for bidir in (True, False):
        for nb in range(2, 129):
            per_dir = nb // 2 if bidir else nb
            max_exact = per_dir // 2
            for md in (1, 2, max_exact, max_exact + 1, 1024):
                if not 1 <= md <= 1024:
                    continue
                try:
                    t5_config(nb, md, bidir)
                    valid = True
                except ValueError:
                    valid = False
                assert valid == (max_exact >= 1 and md > max_exact)
    notes = t5_notes(3, 500, True)
    assert not notes.valid


@settings(max_examples=60, deadline=None)
@given(nb=st.integers(2, 128), md=st.integers(1, 1024), bidir=st.booleans())
def test_unused_buckets_and_last_start_match_a_brute_force_scan(nb, md, bidir):
    notes = t5_notes(nb, md, bidir)
    if not notes.valid:
        return
    offsets = torch.arange(-3 * md - 5, 3 * md + 6)
    buckets = t5_bucket(offsets, num_buckets=nb, max_distance=md, bidirectional=bidir)
    assert notes.unused == tuple(sorted(set(range(nb)) - set(buckets.tolist())))
    past = t5_bucket(-torch.arange(0, 3 * md + 5), num_buckets=nb, max_distance=md, bidirectional=bidir)
    last = notes.buckets_per_direction - 1
    assert notes.last_start == int(torch.nonzero(past == last)[0])
    assert notes.last_start <= md
    assert ("saturation" in notes.kinds()) == (notes.last_start < md)
    assert ("future_bucket0" in notes.kinds()) == (not bidir)
    if bidir:
        assert notes.buckets_per_direction in notes.unused  # num_buckets // 2 is never used
    if bidir and nb % 2:
        assert nb - 1 in notes.unused


def test_buckets_this_matrix_never_reaches():
    notes = t5_notes(32, 128, True, q_len=16, k_len=16)
    assert notes.longest == 15
    assert notes.unreached == (10, 11, 12, 13, 14, 15, 26, 27, 28, 29, 30, 31)
    assert "unreached" in notes.kinds()
    wide = t5_notes(32, 128, True, q_len=200, k_len=200)
    assert wide.unreached == () and "unreached" not in wide.kinds()
    shifted = t5_notes(32, 128, True, q_len=4, k_len=200, q_offset=196)  # queries are the last keys
    # offsets −199 … +3: the whole past side, and only the future buckets of +1, +2, +3
    assert set(range(32)) - set(shifted.unreached) - {16} == set(range(16)) | {17, 18, 19}


def test_unidirectional_max_exact_note_does_not_mention_a_halving():
    """Unidirectional T5 has no halving for the direction: max_exact = num_buckets // 2."""
    note = next(n for n in t5_notes(32, 128, False).notes if n.kind == "max_exact")
    assert "halving" not in note.text and "max_exact = 16" in note.text and "32 // 2" in note.text
    bidir = next(n for n in t5_notes(32, 128, True).notes if n.kind == "max_exact")
    assert "after the halving" in bidir.text and "16 // 2" in bidir.text


def test_training_coverage_of_buckets():
    """Bidirectional 32/128 at train length 32: |j − i| ≤ 31 seen, so buckets 0…11 and 17…27 hold seen
    offsets; 12…15 and 28…31 hold none and were shaped by nothing (the edge at 32 is a bucket edge)."""
    from relviz.t5_notes import t5_training_coverage

    coverage = t5_training_coverage(32, 128, True, train_length=32, extent=200)
    assert coverage.never_seen == (12, 13, 14, 15, 28, 29, 30, 31)
    assert coverage.shared_with_seen == ()
    text = coverage.sentence()
    assert "shaped by nothing" in text and "12–15, 28–31" in text
    # causal 32/128 at train length 20: bucket of distances 19…? holds both seen and unseen offsets
    coverage = t5_training_coverage(32, 128, False, train_length=20, extent=300)
    buckets = t5_bucket(-torch.arange(0, 301), num_buckets=32, max_distance=128, bidirectional=False)
    seen, unseen = set(buckets[:20].tolist()), set(buckets[20:].tolist())
    assert set(coverage.never_seen) == unseen - seen and set(coverage.shared_with_seen) == unseen & seen
    assert coverage.shared_with_seen and "reuse the bias" in coverage.sentence()


def test_live_attention_t5_caption_says_unseen_buckets_were_shaped_by_nothing():
    from relviz.inspection import parameter_caption
    from relviz.inspection import parameter_views
    from relviz.model import ModelConfig, build_model

    model = build_model(ModelConfig(scheme="t5"), seed=0).eval()
    view, = parameter_views(model, length=200, train_length=32)
    caption = parameter_caption(view)
    assert "shaped only by the shorter offsets" not in caption
    assert "shaped by nothing" in caption


def test_page_captions_carry_the_setting_numbers():
    from relviz import t5_notes as text
    both = t5_notes(32, 128, True)
    assert "|j − i| < 8" in text.map_caption(both) and "starts at 17." in text.map_caption(both)
    curve = text.distance_curve_caption(both)
    assert "up to 7;" in curve and "begins at **91**, before max_distance = 128" in curve
    assert "num_buckets // 2 = 16: bucket 16 itself is never used" in curve
    assert "32 buckets → 16 per direction → half of those, 8, exact" in text.budget_caption(both)
    assert "8 exact + 8 logarithmic per direction" in text.budget_caption(both)
    assert "hops of up to 7" in text.composition_caption(both) and "up to 14 exactly, three up to 21" \
        in text.composition_caption(both)
    assert text.compare_caption(both).startswith("**T5, 32 buckets:** exact up to |j − i| < 8")
    past = t5_notes(32, 128, False)
    assert past.max_exact == 16
    assert "upper triangle (future keys) is bucket 0" in text.map_caption(past)
    assert "stays at bucket 0" in text.distance_curve_caption(past)
    assert "All 32 buckets serve the past: 16 exact + 16 logarithmic" in text.budget_caption(past)
    assert "hops of up to 15" in text.composition_caption(past)
    bad = t5_notes(2, 128, True)
    assert not bad.valid
    assert (f"num_buckets = {bad.nearest[0]}, max_distance = {bad.nearest[1]}** (bidirectional)"
            in text.nearest_valid_text(bad))
    presets = [{"label": "A", "config": {"relative_attention_num_buckets": 32, "relative_attention_max_distance": 128,
                                         "num_heads": 8}},
               {"label": "B", "config": {"relative_attention_num_buckets": 64, "relative_attention_max_distance": 256,
                                         "num_heads": 4, "local_radius": 127}}]
    assert text.published_caption(presets) == ("Published: A 32 / 128, 8 heads; B 64 / 256, 4 heads, encoder sees "
                                               "±127 only (num_buckets / max_distance, from each model's "
                                               "config.json or paper).")
