"""The zoo's settings searched (relviz.zoo_search): a fast subset of `python -m relviz bench --only zoo_search`, a case
for each field varied, each exact against what transformers runs or refused naming the field, never silent."""
from __future__ import annotations

import re

import pytest

pytest.importorskip("transformers")

from relviz.mechanisms.pattern import AttentionPattern  # noqa: E402
from relviz.model_plan import read_plan  # noqa: E402
from relviz.zoo_search import (EXACT, FIELDS, REFUSED, SILENT, TRANSFORMERS, cases, classify, counts,  # noqa: E402
                               search)

#: (model_type, field, value): a case of every field; those the search found silent before their fix marked
CASES = [
    ("llama", "rope_type", "linear ×2"),
    ("llama", "rope_type", "dynamic ×2, original 16"),
    ("llama", "rope_type", "yarn ×4 mscale 0.707 mscale_all_dim 1"),
    ("llama", "rope_type", "longrope"),
    ("llama", "rope_type", "llama3 ×8 low 1 high 4"),
    ("gemma3_text", "rope_type", "yarn ×4 attention_factor 0.8 β 16/2 untruncated"),   # was silent (truncate)
    ("llama", "rope_theta", "12345"),
    ("llama", "rope_parameters", "left out"),
    ("beam", "rope_parameters", "as rope_scaling"),   # was silent: its NoPE layers' query scale read rope_parameters only
    ("llama", "partial_rotary_factor", "0.5 (0.25 where it was 0.5)"),    # was silent: Llama's rule turns every dim
    ("gpt_neox", "partial_rotary_factor", "0.5 (0.25 where it was 0.5)"),  # ... GPT-NeoX's reads it
    ("gptj", "rotary_dim", "half"),
    ("llama", "head_dim", "2 × hidden/heads"),
    ("qwen2", "sliding_window", "4096"),
    ("gemma3_text", "layer_types", "alternating"),
    ("llama", "max_position_embeddings", "16 (below the probe's 20)"),
    ("gemma3_text", "attention scaling", "halved / flipped"),
    ("minicpm3", "rope_type", "yarn ×4 mscale 0.707 mscale_all_dim 1"),   # was silent: MLA's softmax scale × mscale²
    ("minimax", "sliding_window", "4096"),   # was silent: its window applies on its attention layers (full_attention)
]


def _case(model_type: str, field: str, value: str):
    return next(c for c in cases(model_type, [field]) if c.value == value)


def test_the_cases_cover_every_field_varied():
    assert {field for _, field, _ in CASES} == set(FIELDS)


@pytest.mark.parametrize("model_type, field, value", CASES, ids=lambda v: str(v)[:24])
def test_a_varied_setting_is_read_exactly(model_type, field, value):
    result = classify(_case(model_type, field, value))
    assert result.outcome == EXACT, result.reason


def test_a_partial_rotary_factor_no_table_row_decides_is_refused_naming_the_field():
    """Arcee (no row in the family table): whether its default rule reads partial_rotary_factor is not relviz's to
    guess (Llama's ignores it, GPT-NeoX's reads it), so the reading refuses, naming the field."""
    case = _case("arcee", "partial_rotary_factor", "0.5 (0.25 where it was 0.5)")
    with pytest.raises(ValueError, match=r"rope_parameters\.partial_rotary_factor is 0\.5 under the default RoPE rule"):
        read_plan(case.config)
    assert classify(case).outcome == REFUSED


def test_a_seeded_draw_is_the_same_draw_and_counts_every_case_once():
    first = search(["llama"], seed=3, per_field=1, fields=("rope_type",))
    again = search(["llama"], seed=3, per_field=1, fields=("rope_type",))
    assert [r.case.value for r in first] == [r.case.value for r in again] and len(first) == 1
    assert counts(first) == {"rope_type": {first[0].outcome: 1}} and first[0].outcome != SILENT


@pytest.mark.parametrize("model_type, field, named", [
    ("gemma3_text", "head_dim", "head_dim"),                 # its class's head_dim 256, not hidden_size / heads
    ("cohere", "rope_parameters", "rope_parameters (or rope_scaling, rope_theta)"),   # its class's own θ
    ("afmoe", "layer_types", "layer_types"),                 # its class's own pattern of windows
    ("zaya", "head_dim", "head_dim"),                        # its class's head_dim 128 (found by the full sweep)
])
def test_a_field_left_out_that_the_config_class_fills_its_own_way_is_refused_by_name(model_type, field, named):
    """Were silent: relviz derived the field the generic way (hidden/heads, θ 10,000, no windows) while the config
    class filled in its own default."""
    case = _case(model_type, field, "left out")
    with pytest.raises(ValueError, match=re.escape(f"config field {named} is left out: the '{model_type}' config class")):
        read_plan(case.config)
    assert classify(case).outcome == REFUSED


def test_granite_swa_reads_a_base_per_layer_and_no_rope_where_it_is_0():
    """Was silent: layer_rope_theta (a θ per layer, 0 for a layer without RoPE) wins over rope_parameters' θ in
    transformers, and relviz read rope_parameters' alone."""
    from relviz.model_plan import OBSERVED
    from relviz.observe import verified_plan
    from relviz.zoo import tiny_config

    config = {**tiny_config("granite_swa"), "layer_rope_theta": [1e4, 0, 5e5, 0, 1e4, 0, 1e4, 0]}
    config["rope_parameters"] = {**config["rope_parameters"], "rope_theta": 12345.0}
    plan = verified_plan(config, causal_lm=True)
    assert [p.label().split(" · ")[0] for p in plan.all_layers()][:4] == ["RoPE θ 10k", "NoPE", "RoPE θ 500k", "NoPE"]
    assert all(p.read_from == OBSERVED for p in plan.all_layers())


def test_smollm3_alternating_layer_types_with_use_sliding_window_false_windows_as_transformers_does():
    """Was silent: SmolLM3's model builds each layer's mask from layer_types alone (use_sliding_window only derives
    them), and relviz read no window where use_sliding_window was false."""
    from relviz.observe import verified_plan

    case = _case("smollm3", "layer_types", "alternating")
    assert case.config["use_sliding_window"] is False
    plan = read_plan(case.config)
    assert [p.find(AttentionPattern).window for p in plan.all_layers()][:2] == [case.config["sliding_window"], None]
    verified_plan(case.config, causal_lm=True)          # the observer: every layer equals what transformers ran
    assert classify(case).outcome == EXACT


@pytest.mark.parametrize("model_type", ["qwen2_moe", "qwen2"])
def test_a_sliding_layer_type_with_the_window_switched_off_is_refused_naming_both_fields(model_type):
    """Was silent for Qwen2-MoE: its config class sets the window to 0 where use_sliding_window is false, so its
    sliding layers mask every key (Qwen2's clears it, and its mask cannot be built); relviz read them causal."""
    case = _case(model_type, "layer_types", "alternating")
    with pytest.raises(ValueError, match=r"config field layer_types makes layer 0 'sliding_attention' while "
                                         r"use_sliding_window is false"):
        read_plan(case.config)
    assert classify(case).outcome != SILENT


def test_qwen2_moe_derives_every_other_layer_sliding_below_max_window_layers():
    """Qwen2-MoE's class, where a config leaves layer_types out: sliding on layers 0, 2, ... below max_window_layers
    (Qwen2's: from it on); read as the class derives it, and held against what transformers ran."""
    from relviz.observe import verified_plan
    from relviz.zoo import tiny_config

    config = {**tiny_config("qwen2_moe"), "use_sliding_window": True, "sliding_window": 4096, "max_window_layers": 5}
    del config["layer_types"]
    plan = verified_plan(config, causal_lm=True)
    assert [p.find(AttentionPattern).window for p in plan.all_layers()] == [4096, None, 4096, None, 4096, None, None, None]


def test_the_window_mask_table_says_what_each_familys_modeling_builds():
    """relviz.mechanisms.families.WINDOW_MASK, read again from transformers' source: an ``every_layer`` family picks
    the sliding-window mask for the whole model from sliding_window alone and never indexes masks by layer_types; a
    ``never`` family calls no sliding-window mask at all."""
    import pathlib
    import sys

    from relviz.mechanisms.families import BIDIRECTIONAL, WINDOW_MASK
    from relviz.observe_build import auto_config

    def source(model_type: str) -> str:
        folder = pathlib.Path(sys.modules[auto_config()[model_type].__module__].__file__).parent
        return "".join(p.read_text() for p in sorted(folder.glob("modeling_*.py")))

    for model_type in WINDOW_MASK["every_layer"]:
        text = source(model_type)
        assert "else create_sliding_window_causal_mask" in text and not re.search(
            r"mask_mapping\[\s*self\.config\.layer_types\[", text), model_type
    for model_type in WINDOW_MASK["never"]:
        text = source(model_type)
        assert "create_sliding_window_causal_mask" not in text and "bidirectional_sliding_window" not in text, model_type
    for model_type in BIDIRECTIONAL:        # ... and a rotary encoder outside the table masks bidirectionally only
        text = source(model_type)
        assert "create_bidirectional_mask" in text and "create_causal_mask" not in text, model_type


@pytest.mark.parametrize("model_type, field, value, windows", [
    # was silent: Llama's model never reads sliding_window (a Mistral checkpoint converted to llama keeps it)
    ("llama", "sliding_window", "4096, where the family holds none", [None] * 8),
    # was silent: Mistral's windows every layer from sliding_window alone, whatever layer_types a config carries
    ("mistral", "layer_types", "alternating, where the family holds none", [4096] * 8),
    # was silent once the zoo walked the encoders: DeBERTa-v2's model never reads sliding_window either
    ("deberta-v2", "sliding_window", "4096, where the family holds none", [None] * 8),
])
def test_a_window_field_the_family_does_not_read_its_way_is_read_as_transformers_masks(model_type, field, value,
                                                                                       windows):
    case = _case(model_type, field, value)
    assert [p.find(AttentionPattern).window for p in read_plan(case.config).all_layers()] == windows
    assert classify(case).outcome == EXACT


def test_a_shrunk_model_whose_buffers_pass_the_cap_is_refused_before_it_is_allocated():
    """GPT-Neo keeps a causal mask buffer of max_position_embeddings² per layer: at 100,000 the search's case took
    23 GB and was killed. Counted on the meta device, it is refused with the reason (the reading itself stands)."""
    case = _case("gpt_neo", "max_position_embeddings", "100000")
    result = classify(case)
    assert result.outcome == REFUSED and "GiB of buffers" in result.reason


def test_a_rotary_encoder_outside_the_table_is_read_as_an_encoder():
    """EuroBERT has RoPE settings and no row in the family table: the standard reading had made it a causal decoder
    (silent on every case, once the zoo walked the masked LMs); transformers masks it bidirectionally."""
    case = _case("eurobert", "rope_theta", "12345")
    assert {p.find(AttentionPattern).causal for p in read_plan(case.config).all_layers()} == {False}
    assert classify(case).outcome == EXACT


@pytest.mark.parametrize("field, value, outcome", [
    ("max_position_embeddings", "16 (below the probe's 20)", TRANSFORMERS),
    ("sliding_window", "4096, where the family holds none", REFUSED)])
def test_a_case_relviz_refuses_to_read_asks_transformers_only_whether_it_runs(field, value, outcome):
    """CamemBERT (outside the table, no RoPE) is refused by the reading; whether transformers runs it decides
    refused or refused by transformers, and the observer without its probes (transformers_refusal) says the same as
    the whole observer (verified_plan)."""
    from relviz.observe import REFUSED_BY_TRANSFORMERS, transformers_refusal, verified_plan

    case = _case("camembert", field, value)
    with pytest.raises(ValueError, match="not in relviz's family table"):
        read_plan(case.config)
    result = classify(case)
    assert result.outcome == outcome and "not in relviz's family table" in result.reason
    try:
        verified_plan(case.config, causal_lm=True)
        whole = ""
    except ValueError as exc:
        whole = str(exc)
    assert bool(transformers_refusal(case.config, causal_lm=True)) == any(w in whole for w in REFUSED_BY_TRANSFORMERS) \
        == (outcome == TRANSFORMERS)


def test_search_takes_whole_numbers_of_workers():
    with pytest.raises(ValueError, match="workers must be a whole number"):
        search(["llama"], workers=0)
