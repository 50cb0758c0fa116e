"""The observer against the family table: what relviz's table says equals what transformers builds and runs,
layer by layer, or the observer says why it cannot look. Here one family for each kind of table entry (its
derive rules, hybrids, layers without RoPE, pair layouts, sinks, MLA); every family of the table and the whole
zoo (every text family transformers ships) are ``python -m relviz bench --only zoo`` (a full run here took
7.8 min at load 10: past CI's budget)."""
from __future__ import annotations

import pytest

transformers = pytest.importorskip("transformers")

from relviz.mechanisms.families import FAMILIES  # noqa: E402
from relviz.zoo import REASONS, sweep, summary, text_families, tiny_config  # noqa: E402

#: the refusals that say the observer could not look (never that relviz's table reads a family wrongly)
CANNOT_LOOK = {r.group for r in REASONS if not r.looked}
#: one family per kind of table entry
TABLE = ["llama", "gemma3_text", "llama4_text", "smollm3", "cohere2", "gpt_oss", "deepseek_v3", "qwen3_next", "bamba",
         "jamba", "falcon_h1", "recurrent_gemma", "lfm2", "exaone4", "afmoe", "ernie4_5", "glm4"]
assert set(TABLE) <= set(FAMILIES)


def test_the_zoo_is_transformers_own_list():
    families = text_families()
    assert len(families) > 150 and {"llama", "qwen3_next", "bamba", "exaone4"} <= set(families)
    assert tiny_config("jamba")["num_hidden_layers"] == 8
    bart, blenderbot = tiny_config("bart"), tiny_config("blenderbot")
    assert bart["encoder_layers"] == bart["decoder_layers"] == 8                    # from 12 and 12
    assert blenderbot["encoder_layers"] == blenderbot["decoder_layers"] == 2        # from 2 and 24
    assert tiny_config("gemma3n_text")["num_kv_shared_layers"] == 15 * 8 // 35      # in proportion


def test_without_transformers_every_entry_says_how_to_install_it(monkeypatch):
    """One guard (observe_build.transformers_module) behind the observer and the zoo: a server without the [hf]
    extra gets a ValueError saying pip install, never an ImportError traceback."""
    import sys

    from relviz.observe import verified_plan
    from relviz.observe_build import build
    monkeypatch.setitem(sys.modules, "transformers", None)           # import transformers raises ImportError
    unseen = {"model_type": "llama", "vocab_size": 1237}             # a config no other test has verified (cached)
    for call in (text_families, lambda: tiny_config("llama"), lambda: verified_plan(unseen), lambda: build(unseen)):
        with pytest.raises(ValueError, match=r"needs transformers: pip install 'relviz\[hf\]'"):
            call()


@pytest.mark.parametrize("model_type", TABLE)
def test_the_observer_agrees_with_the_family_table(model_type):
    (outcome,) = sweep([model_type])
    assert outcome.exact or outcome.group in CANNOT_LOOK, outcome.reason


def test_a_sweep_counts_every_family_once():
    """Bloom's attention does not go through eager_attention_forward: it is seen at its softmax, and its ALiBi on
    the tensor each layer is handed (relviz.observe_position.alibi_handed): exact. XLNet's relative attention has no
    mechanism in relviz: its table entry refuses it, saying what it runs; the others are exact."""
    outcomes = sweep(["llama", "afmoe", "bloom", "xlnet"])
    counts = summary(outcomes)
    assert counts["families"] == 4 and counts["exact"] == 3 and counts["built"] == 4
    assert counts["refused"] == {"its family table entry refuses it, saying what transformers runs there": 1}
    assert "refused by relviz's family table: XLNet's relative attention (Transformer-XL's)" in outcomes[3].reason


@pytest.mark.parametrize("model_type", ["gptj", "mimo_v2_flash", "axk1", "moshi", "bart", "whisper", "trocr",
                                        "deepseek_v32", "glm_moe_dsa", "hy_v4", "dots3_note_text"])
def test_families_the_sweep_found_are_read_exactly(model_type):
    """GPT-J attends outside eager_attention_forward (seen at its softmax, its rotation at apply_rotary_pos_emb,
    one tensor at a time); MiMo-V2-Flash has sinks on its sliding layers only; AXK1 is MLA with DeepSeek-V3's
    interleaved pairs; Moshi is causal whatever window its config holds; BART and Whisper are read as the causal
    LM transformers maps them to, their decoder alone (Whisper's base model wants audio features); TrOCR's softmax
    runs over [B·H, L, L] scores. DeepSeek sparse attention (relviz.mechanisms.indexer), one family per indexer
    rotation: DeepSeek-V3.2's half-split on the indexer's first dims, GLM-MoE-DSA's interleaved, HY-V4's half-split on
    its last dims, with layers that reuse another's choice (indexer_types) and sinks; dots3's indexed layers between
    sliding ones, its rotated part a share of head_dim per layer type."""
    (outcome,) = sweep([model_type])
    assert outcome.exact, outcome.reason


@pytest.mark.parametrize("model_type", ["nanochat", "gpt_neo", "openai-gpt", "beam", "granitemoe", "gemma3n_text",
                                        "opt"])
def test_families_whose_run_differed_are_read_exactly(model_type):
    """Each was refused because what ran differed from relviz's reading, and is read now through a general
    mechanism: NanoChat turns by −θ (the rotation's ``backwards``), GPT-Neo's local layers a window of window_size
    keys (layer types from attention_types' runs), OpenAI GPT masks with −1e4 (a fill the softmax proved a mask),
    Beam's layers without RoPE scale q by position (QueryPowerScale), GraniteMoE's softmax scale is
    attention_multiplier (FieldScale), Gemma 3n's is 1, and OPT scales q before its attention call."""
    (outcome,) = sweep([model_type])
    assert outcome.exact, outcome.reason


@pytest.mark.parametrize("model_type, reads", [
    ("ctrl", "sinusoidal absolute positions"), ("xlm", "learned absolute positions"),
    ("rwkv", "no attention on this layer: order reaches it through the WKV recurrence"),
    ("xmod", "learned absolute positions"), ("deepseek_v2", "RoPE"), ("zamba2", "state-space (Mamba)"),
    ("mllama", "this layer attends to the image's tokens only"),
    ("xlstm", "the matrix memory its gated recurrence updates token by token")])
def test_families_outside_the_first_sweep_are_read_exactly(model_type, reads):
    """CTRL indexes a sinusoid buffer in its own forward (found with the token embeddings zeroed); XLM pads with id 2,
    which the probe's tokens no longer hold; RWKV runs no softmax, only its WKV recurrence; X-MOD needs a default
    language (its config's first); DeepSeek-V2's class leaves the experts per token null; Zamba2's derived
    mamba_headdim is derived again after shrinking; Mllama's text model (built as MllamaForCausalLM, which the auto
    classes map only from the composite) skips its cross-attention layers on text, and the observer sees them not
    run; xLSTM's 512-wide heads keep it past the size cap until they are narrowed (nothing rotates), and its blocks
    start with zero gates and FFN (given random values, they mix tokens, forward only)."""
    from relviz.observe import verified_plan

    (outcome,) = sweep([model_type])
    assert outcome.exact, outcome.reason
    plan = verified_plan(tiny_config(model_type), causal_lm=True)
    assert any(reads in m.describe() for p in plan.all_layers() for m in p.mechanisms)


@pytest.mark.parametrize("model_type, reason", [
    ("cpmant", "its layers run over 44 positions for the 12 tokens given: the model adds 32 of its own"),
    ("prophetnet", "its layers run over 36 positions for the 12 tokens given: the model adds 24 of its own"),
    ("inkling_text", "hands layer 0's attention position_bias, a tensor over query and key positions")])
def test_what_relviz_does_not_read_is_refused_by_name(model_type, reason):
    """CPM-Ant prepends a learned prompt, ProphetNet runs streams that predict further ahead beside the main one,
    Inkling adds a position bias computed from the content: no mechanism of relviz's, so each is refused saying so."""
    (outcome,) = sweep([model_type])
    assert not outcome.exact and reason in outcome.reason, outcome.reason


def test_bigbird_is_read_exactly_with_full_attention_and_refused_plainly_when_block_sparse():
    """BigBird with attention_type original_full is BERT's learned table and full (or, as a decoder, causal)
    attention: exact. Its block_sparse attention (random blocks past 704 positions) is refused by its table entry,
    which says what it runs."""
    from relviz.mechanisms.pattern import AttentionPattern
    from relviz.observe import verified_plan

    config = {**tiny_config("big_bird"), "num_hidden_layers": 2, "attention_type": "original_full",
              "is_decoder": True}
    plan = verified_plan(config, causal_lm=True)
    assert [p.find(AttentionPattern).label() for p in plan.all_layers()] == ["causal", "causal"]
    (outcome,) = sweep(["big_bird"])
    assert not outcome.exact and "block_sparse" in outcome.reason and "random blocks" in outcome.reason
