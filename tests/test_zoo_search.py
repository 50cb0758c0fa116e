"""The zoo's settings searched (relviz.zoo_search): a fast subset of `python -m relviz bench --only zoo_search`, a case
for each field varied, each exact against what transformers runs or refused naming the field, never silent."""
from __future__ import annotations

import re

import pytest

pytest.importorskip("transformers")

from relviz.model_plan import read_plan  # noqa: E402
from relviz.zoo_search import EXACT, FIELDS, REFUSED, SILENT, cases, classify, counts, search  # noqa: E402

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
