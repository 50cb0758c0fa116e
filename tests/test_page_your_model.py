"""The "Your model" page in AppTest, with tiny saved models listed through RELVIZ_MODELS (no network)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from page_support import run_page
from plotly_data import canvases, decode, figure_json, heatmap_values, title
from relviz.rope import load_presets

pytest.importorskip("transformers", reason="the tiny models are built with transformers (pip install 'relviz[hf]')")
from hf_support import tiny_gpt2_with_tokenizer, tiny_t5_with_tokenizer  # noqa: E402


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    return tiny_t5_with_tokenizer(root / "tiny-t5"), tiny_gpt2_with_tokenizer(root / "tiny-gpt2")


@pytest.fixture
def listed(models, monkeypatch):
    t5, gpt2 = models
    monkeypatch.setenv("RELVIZ_MODELS", f"{t5}:gpt=/{gpt2}:/no/such/dir")
    monkeypatch.delenv("RELVIZ_MAX_MODEL_MB", raising=False)
    return models


def charts(at) -> list[dict]:
    return [figure_json(c) for c in at.get("plotly_chart")]


@pytest.mark.parametrize("link, key, value, lo, hi", [
    ({"ym_model": "tiny-t5", "ym_stack": "decoder"}, "ym_head", 20, 1, 2),   # the tiny T5 has 2 heads
    ({"ym_model": "gpt"}, "ym_n", 256, 8, 32),                              # and the tiny GPT-2 32 positions
])
def test_a_link_value_outside_the_weights_range_is_refused_naming_it(listed, link, key, value, lo, hi):
    """The weights' controls (tests/test_link_ranges.py sweeps the other dynamic keys)."""
    at = run_page("your_model", timeout=120, **link, **{key: value})
    slider = at.slider(key=key)
    assert (slider.min, slider.max) == (lo, hi)
    assert any(f"`{key}={value}` ({key} must be from {lo} to {hi} with the page's other settings)" in w.value
               for w in at.warning), [w.value for w in at.warning]


def test_t5_bias_map_is_what_the_model_adds(listed):
    from transformers import T5Model

    # 136 positions: drawn in the browser from the per-offset bias (a canvas picture, every cell exact)
    at = run_page("your_model", timeout=120, ym_model="tiny-t5", ym_stack="decoder", ym_head=2, ym_L=136)
    assert not at.error
    assert at.selectbox(key="ym_model").options[:2] == ["tiny-t5", "gpt"]   # the missing directory is not listed
    assert at.radio(key="ym_stack").options == ["encoder", "decoder"]       # the bidirectional side first
    (heat,) = [c for c in canvases(at) if c["value_label"] == "bias"]
    z = heatmap_values(heat)
    model = T5Model.from_pretrained(str(listed[0]))
    expected = model.decoder.block[0].layer[0].SelfAttention.compute_bias(136, 136)[0, 1].detach().numpy()
    assert np.array_equal(z, expected.astype(np.float32))


def test_own_attention_of_every_layer_and_head(listed):
    from relviz import hf

    at = run_page("your_model", timeout=120, ym_model="gpt", ym_text="the cat sat on the mat")
    assert not at.error
    grid = charts(at)[-1]
    heatmaps = [t for t in grid["data"] if t["type"] == "heatmap"]
    assert len(heatmaps) == 4                                                # 2 layers × 2 heads
    tokenizer, model = hf.load_model(listed[1])
    _, weights = hf.model_attention(tokenizer, model, "the cat sat on the mat")
    assert np.allclose(decode(heatmaps[0]["z"]), weights[0, 0].numpy(), atol=1e-6)
    tokens = tokenizer.convert_ids_to_tokens(tokenizer("the cat sat on the mat")["input_ids"])
    assert grid["layout"]["xaxis3"]["ticktext"] == tokens and grid["layout"]["yaxis"]["ticktext"] == tokens
    assert all(t["coloraxis"] == "coloraxis" for t in heatmaps)             # one scale, one colour bar
    assert grid["layout"]["coloraxis"]["cmax"] == pytest.approx(float(weights[..., 1:, :].max()), rel=1e-6)
    assert "j − i = " in heatmaps[0]["hovertemplate"]
    assert any("how Toeplitz" in m.label for m in at.metric)


def test_published_configs_need_no_weights(monkeypatch):
    monkeypatch.setenv("RELVIZ_MODELS", "")
    at = run_page("your_model", ym_model="BLOOM 560M (published config)")
    assert not at.error
    assert any("No model directories are configured" in c.value for c in at.caption)
    (names,) = [[t["name"] for t in c["data"] if "name" in t] for c in charts(at)   # a line per head; its colour bar
                if any("slope" in str(t.get("name")) for t in c["data"])]
    assert len(names) == 16 and names[0] == "head 1: slope 0.7071"            # 2^(−8/16)
    published = {e["label"] + " (published config)" for g in ("rope", "alibi", "models") for e in load_presets()[g]}
    assert published <= set(at.selectbox(key="ym_model").options)
    assert "Phi-3-mini 128k (LongRoPE) (published config)" in published


def test_a_path_in_the_link_is_not_an_option(listed):
    at = run_page("your_model", ym_model="/etc")
    assert not at.error and at.selectbox(key="ym_model").value == "tiny-t5"


def test_model_size_limit_refuses_to_run(listed, monkeypatch):
    monkeypatch.setenv("RELVIZ_MAX_MODEL_MB", "0")
    at = run_page("your_model", timeout=120, ym_model="gpt")
    assert any("the operator allows running models up to 0 MB" in e.value for e in at.error)
    assert charts(at)                                                        # the structure is still shown


# ---- the layer strip and a layer's views (published configs; no weights needed) ---------------------

from streamlit.testing.v1 import AppTest  # noqa: E402

from relviz.layer_strip import VIEW_KINDS  # noqa: E402
from relviz.app.tours import TODAY  # noqa: E402

APP = str(Path(__file__).resolve().parents[1] / "app.py")
from relviz.model_presets import model_presets, preset_config, preset_plan  # noqa: E402
from relviz.layer_strip import context_length  # noqa: E402

PRESETS = {key: entry["label"] + " (published config)" for key, entry in model_presets().items()}


def strip_layers(at) -> list[set[int]]:
    """Each strip's layers: the chosen stack's strip first, then every other stack's."""
    strips = [c for c in charts(at) if c["data"] and all(t["type"] == "bar" for t in c["data"])]
    return [{int(x) for t in strip["data"] for x in decode(t["x"])} for strip in strips]


@pytest.mark.parametrize("key", list(PRESETS))
def test_every_preset_draws_its_strip_and_a_layer_at_both_ends_of_the_length(key, monkeypatch):
    monkeypatch.setenv("RELVIZ_MODELS", "")
    plan = preset_plan(key)
    last = len(plan.plans[plan.stack_names[0]]) - 1
    for length, layer in (("own", last), ("16", 0)):
        at = run_page("your_model", ym_model=PRESETS[key], ym_len=length, ym_layer=layer)
        assert not at.error, [e.value for e in at.error]
        strips = strip_layers(at)
        assert strips[0] == set(range(last + 1))                            # one cell per layer
        assert [len(s) for s in strips] == [len(plan.plans[name]) for name in plan.stack_names]  # every stack
        described = [c.value for c in at.caption if c.value.startswith("**")]
        assert described and f"layer {layer}" in described[0]
        named = context_length(plan, preset_config(model_presets()[key])) is not None  # T5's config names none
        assert (f"at {16:,} positions" if length == "16" else "the model's own context" if named else
                "at 4,096 positions (its config.json names no context length)") in described[0]


@pytest.mark.parametrize("view", list(VIEW_KINDS))
def test_every_view_kind(view, monkeypatch):
    monkeypatch.setenv("RELVIZ_MODELS", "")
    at = run_page("your_model", ym_model=PRESETS["models/gpt-oss-20b"], ym_layer=0, ym_view=view)
    assert not at.error
    titles = [m.value for m in at.markdown if m.value.startswith("**") and "positions" in m.value]
    expected = {"rotation": ["wavelength"], "pattern": ["keys each query"], "sinks": ["sink"],
                "all": ["wavelength", "keys each query", "sink"]}
    if view in expected:
        assert [w for w in expected[view] if any(w in t for t in titles)] == expected[view], titles
    else:   # GPT-OSS has no bias or temperature view: the page says so and shows all
        assert any(f"no {view} view" in c.value for c in at.caption)


def test_the_temperature_of_llama_4s_nope_layer_at_10m(monkeypatch):
    monkeypatch.setenv("RELVIZ_MODELS", "")
    at = run_page("your_model", ym_model=PRESETS["models/llama-4-scout"], ym_layer=3, ym_view="temperature")
    assert not at.error
    (curve,) = [c for c in charts(at) if c["data"][0].get("line", {}).get("shape") == "hv"]
    x, y = decode(curve["data"][0]["x"]), decode(curve["data"][0]["y"])
    assert x[-1] == 10_485_760 and y[-1] == pytest.approx(1 + 0.1 * np.log(np.floor(10_485_760 / 8192) + 1))


def test_side_by_side(monkeypatch):
    monkeypatch.setenv("RELVIZ_MODELS", "")
    at = run_page("your_model", ym_model=PRESETS["rope/llama-3.1-8b"], ym_vs=PRESETS["models/llama-4-scout"],
                  ym_layer=3, ym_layer2=3, ym_view="pattern")
    assert not at.error
    strips = [c for c in charts(at) if c["data"] and all(t["type"] == "bar" for t in c["data"])]
    assert [s["layout"]["title"]["text"] for s in strips] == [PRESETS["rope/llama-3.1-8b"], PRESETS["models/llama-4-scout"]]
    assert at.slider(key="ym_layer2").value == 3
    assert sum("keys each query" in m.value for m in at.markdown) == 2


def test_bad_link_values_are_refused_with_the_notice(monkeypatch):
    monkeypatch.setenv("RELVIZ_MODELS", "")
    at = AppTest.from_file(APP, default_timeout=60)
    for key, value in dict(ym_model=PRESETS["models/gemma-3-27b"], ym_len="12345", ym_view="nonsense",
                           ym_layer="inf").items():
        at.query_params[key] = value
    at.switch_page("pages/your_model.py").run()
    assert not at.exception and not at.error
    (notice,) = [w.value for w in at.warning if "Ignored in the link" in w.value]
    assert "ym_len=12345" in notice and "ym_view=nonsense" in notice and "ym_layer=inf" in notice
    assert at.select_slider(key="ym_len").value == "own" and at.selectbox(key="ym_view").value == "all"


def test_divergence_notes_sit_beside_the_picture(monkeypatch, tmp_path):
    import json

    (tmp_path / "config.json").write_text(json.dumps({"model_type": "falcon", "alibi": True, "num_hidden_layers": 2,
                                                      "num_attention_heads": 4, "hidden_size": 64}))
    monkeypatch.setenv("RELVIZ_MODELS", f"falcon-alibi={tmp_path}")
    at = run_page("your_model", ym_model="falcon-alibi")
    assert not at.error
    assert any("Where transformers departs" in m.value for m in at.markdown)
    assert any("adds the ALiBi bias twice" in i.value for i in at.info)


@pytest.mark.parametrize("number", range(len(TODAY.steps)))
def test_each_step_of_the_todays_models_tour_opens_its_exact_view(number, monkeypatch):
    monkeypatch.setenv("RELVIZ_MODELS", "")
    step = TODAY.steps[number]
    at = AppTest.from_file(APP, default_timeout=60)
    for key, value in step.params.items():
        at.query_params[key] = value
    at.switch_page(f"pages/{step.page}.py").run()
    assert not at.exception and not at.error
    assert not [w.value for w in at.warning if "Ignored in the link" in str(w.value)]
    if step.page != "your_model":        # the tour's steps on other pages (images): their controls took the link
        assert {k: str(at.session_state[k]) for k in step.params} == step.params
        return
    assert at.selectbox(key="ym_model").value == step.params["ym_model"]
    assert at.slider(key="ym_layer").value == int(step.params["ym_layer"])


def test_a_gpt_oss_directory_shows_each_heads_sink_share(tmp_path, monkeypatch):
    """With weights the sink curves are the checkpoint's logits, one per head (a config alone: illustrative)."""
    from test_hf_families import FAMILIES, _run

    family = next(f for f in FAMILIES if f.model_type == "gpt_oss")
    model, plan, _, _ = _run(family, tmp_path)
    monkeypatch.setenv("RELVIZ_MODELS", f"tiny-gpt-oss={tmp_path}")
    at = run_page("your_model", timeout=120, ym_model="tiny-gpt-oss", ym_layer=0, ym_view="sinks")
    assert not at.error
    (chart,) = [c for c in charts(at) if any("sink logit" in str(t.get("name")) for t in c["data"])]
    logits = model.layers[0].self_attn.sinks.detach().double().numpy()
    assert [t["name"] for t in chart["data"]] == [f"head {h + 1}: sink logit {s:.3g}" for h, s in enumerate(logits)]
    keys = decode(chart["data"][0]["customdata"])
    share = decode(chart["data"][0]["y"])
    assert np.allclose(share, 1 / (1 + keys * np.exp(-logits[0])))
    assert not any("illustrative" in t["name"] for t in chart["data"])


def test_a_rope_directory_and_a_hybrid_one_run_their_own_attention_and_show_no_server_path(tmp_path, monkeypatch):
    """A RoPE-only directory offers its own attention (the plan keeps its directory); a hybrid's strip has a
    token-mixer row with its linear-attention layers; the page names each by its label, never its path."""
    from hf_support import tiny_causal_lm_with_tokenizer

    llama = tiny_causal_lm_with_tokenizer(tmp_path / "tiny-llama", "llama", num_hidden_layers=2)
    hybrid = tiny_causal_lm_with_tokenizer(tmp_path / "tiny-next", "qwen3_next", num_hidden_layers=4,
                                           linear_num_value_heads=2, linear_num_key_heads=2, linear_key_head_dim=8,
                                           linear_value_head_dim=8, num_experts=2, num_experts_per_tok=1,
                                           moe_intermediate_size=8, shared_expert_intermediate_size=8)
    monkeypatch.setenv("RELVIZ_MODELS", f"{llama}:{hybrid}")
    monkeypatch.delenv("RELVIZ_MAX_MODEL_MB", raising=False)
    for name, layers in (("tiny-llama", 2), ("tiny-next", 1)):
        at = run_page("your_model", timeout=180, ym_model=name, ym_text="the cat sat on the mat")
        assert not at.error, name
        assert any(s.value == "Its own attention on your text" for s in at.subheader), name
        grid = charts(at)[-1]
        assert len([t for t in grid["data"] if t["type"] == "heatmap"]) == 2 * layers    # attending layers × heads
        shown = " ".join(str(e.value) for kind in ("markdown", "caption", "info") for e in at.get(kind))
        assert str(tmp_path) not in shown and f"model directory '{name}'" in shown
    strip = charts(at)[0]
    names = {t["name"] for t in strip["data"]}
    assert "token mixer: linear attention, no attention" in names and "token mixer: softmax attention" in names


def test_a_shipped_toy_checkpoint_is_a_model_the_page_draws():
    """relviz's own t5-shift checkpoint, read as a plan (relviz.toy_plan): strip and views, its learned T5
    bias map exactly what the toy model adds (per offset, from its own table)."""
    from relviz.training import list_checkpoints, load_checkpoint

    at = run_page("your_model", timeout=120, ym_model="t5-shift (relviz toy model)", ym_head=2, ym_L=24)
    assert not at.error and not at.exception
    shipped = {info.name for info in list_checkpoints()}
    assert {option.removesuffix(" (relviz toy model)") for option in at.selectbox(key="ym_model").options
            if option.endswith(" (relviz toy model)")} == shipped                     # all ten schemes draw
    position = load_checkpoint("t5-shift").model.position
    with torch.no_grad():
        per_offset = position.prepare(24, torch.zeros(1, 24, 1))[1].numpy()           # head 2: [2L − 1]
    expected = per_offset[np.arange(24)[None, :] - np.arange(24)[:, None] + 23]       # [L, L]
    heats = [c for c in charts(at) if any(t["type"] == "heatmap" for t in c["data"])] + \
        [c for c in canvases(at) if c.get("value_label") == "bias"]
    assert any(np.array_equal(heatmap_values(h), expected) for h in heats)


def test_a_toy_checkpoint_draws_each_layers_structure_as_the_live_attention_page_does():
    """fire-shift, layer 2 (FIRE's function is each layer's own), 'structure' view: the heatmap and words are the
    structure the Live attention page draws for that layer (relviz.inspection.position_structure), at the model's
    own 64 positions, future cells blank."""
    from relviz.inspection import position_structure
    from relviz.training import load_checkpoint

    at = run_page("your_model", timeout=120, ym_model="fire-shift (relviz toy model)", ym_layer=2, ym_view="structure")
    assert not at.error and not at.exception
    structure = position_structure(load_checkpoint("fire-shift").model, 64, 2)
    drawn = [c for c in charts(at) if title(c).startswith(structure.title)]
    assert len(drawn) == 1
    expected = np.where(np.triu(np.ones((64, 64), dtype=bool), 1), np.nan, structure.values[0])
    assert np.array_equal(heatmap_values(drawn[0]), expected, equal_nan=True)
    assert any(c.value == structure.caption for c in at.caption)


def test_the_context_slider_stops_at_the_models_own_context():
    """Issue 33, defect 14: the slider ran to 16,777,216 for every model."""
    at = run_page("your_model", ym_model=PRESETS["rope/llama-3.1-8b"])
    slider = at.select_slider(key="ym_len")
    assert slider.options[0] == "own" and slider.options[-1] == "65536" and "own: 131,072" in slider.help
    at = run_page("your_model", ym_model=PRESETS["rope/llama-3.1-8b"], ym_len="1048576")
    assert at.select_slider(key="ym_len").value == "own" and not at.exception


def test_a_toy_checkpoint_with_vector_tables_draws_its_norms_and_similarity():
    """shaw-shift: its layer views are the toy scheme's vector-table views (a line chart and a heatmap)."""
    at = run_page("your_model", timeout=120, ym_model="shaw-shift (relviz toy model)", ym_layer=1)
    assert not at.error and not at.exception
    titles = [f["layout"].get("title", {}).get("text", "") for f in charts(at)]
    kinds = [{t["type"] for t in f["data"]} for f in charts(at)]
    assert {"heatmap"} in kinds and any("scatter" in k for k in kinds), (titles, kinds)


def _page_text(at) -> str:
    """Everything the page writes for a visitor: texts, captions, notices and errors."""
    kinds = ("markdown", "caption", "info", "error", "warning", "subheader", "title")
    return " ".join(str(e.value) for kind in kinds for e in at.get(kind))


def test_hostile_missing_and_broken_directories_never_show_their_path(models, tmp_path, monkeypatch):
    """Messages written for the command line name the path (no weights in /srv/..., a directory gone since it was
    listed, a tokenizer transformers cannot load): the page says why with the operator's name for it instead."""
    import json
    import shutil

    from hf_support import tiny_causal_lm_with_tokenizer

    no_weights = tmp_path / "no-weights"          # T5's table lives in the weights: config.json alone is not enough
    no_weights.mkdir()
    shutil.copy(models[0] / "config.json", no_weights / "config.json")
    broken = tmp_path / "broken-json"
    broken.mkdir()
    (broken / "config.json").write_text("{not json", encoding="utf-8")
    hostile = tmp_path / "hostile"
    hostile.mkdir()
    (hostile / "config.json").write_text(json.dumps({"model_type": "llama", "num_hidden_layers": 10 ** 9,
                                                     "hidden_size": 64, "num_attention_heads": 4}), encoding="utf-8")
    bad_tokenizer = tiny_causal_lm_with_tokenizer(tmp_path / "bad-tokenizer", "llama", num_hidden_layers=1)
    (bad_tokenizer / "tokenizer.json").write_text("{not a tokenizer", encoding="utf-8")
    no_tokenizer = tmp_path / "no-tokenizer"
    shutil.copytree(bad_tokenizer, no_tokenizer)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (no_tokenizer / name).unlink(missing_ok=True)
    gone = tmp_path / "gone"
    shutil.copytree(no_tokenizer, gone)
    monkeypatch.setenv("RELVIZ_MODELS", ":".join(map(str, (no_weights, broken, hostile, bad_tokenizer, no_tokenizer,
                                                            gone))))
    monkeypatch.delenv("RELVIZ_MAX_MODEL_MB", raising=False)
    run_page("your_model", timeout=120, ym_model="no-weights")    # lists every directory (the list is cached)
    shutil.rmtree(gone)                                            # ... then one disappears
    said = {"no-weights": "no model.safetensors or model.safetensors.index.json in the model directory 'no-weights'",
            "broken-json": "config.json is not valid JSON",
            "hostile": "num_hidden_layers",
            "bad-tokenizer": "This model could not be run on text here: JSONDecodeError",
            "no-tokenizer": "no tokenizer files",
            "gone": "the model directory 'gone' is not a model directory"}
    for name, why in said.items():
        at = run_page("your_model", timeout=180, ym_model=name)
        shown = _page_text(at)
        assert why in shown, (name, shown[-600:])
        assert str(tmp_path) not in shown and "/tmp" not in shown, name
    from relviz import hf

    monkeypatch.setattr(hf, "can_observe", lambda: False)           # a server without transformers
    shown = _page_text(run_page("your_model", timeout=180, ym_model="bad-tokenizer"))
    assert "Running a model on text needs transformers, which this server does not have installed" in shown


def test_a_vision_stack_says_its_positions_are_patches_not_the_decoders_context(monkeypatch):
    """Qwen2.5-VL's vision tower is not drawn 'at 128,000 positions': that is its text decoder's context."""
    monkeypatch.setenv("RELVIZ_MODELS", "")
    label = PRESETS["models/qwen2.5-vl-7b"]
    for stack, said in (("vision", "patches of an image, not a sequence (their grid follows the image's size; "
                                   "patch_size 14 px, and config.json names no image size): 2-D RoPE"),
                        ("decoder", "at 128,000 positions (the model's own context)")):
        at = run_page("your_model", ym_model=label, ym_stack=stack, ym_layer=3)
        (described,) = [c.value for c in at.caption if c.value.startswith(f"**{stack} layer 3**")]
        assert said in described and (stack == "decoder") == ("128,000" in described), described
    at = run_page("your_model", ym_model=label, ym_stack="vision", ym_vs=PRESETS["rope/llama-3.1-8b"])
    headers = [m.value for m in at.markdown if m.value.startswith("**Qwen2.5-VL") or m.value.startswith("**Llama")]
    assert any("(patches of an image)" in h for h in headers) and any("at 131,072 positions" in h for h in headers)


def test_a_vision_encoders_grid_comes_from_its_config():
    from relviz import hf, layer_strip

    plan = hf.from_config({"model_type": "pixtral", "hidden_size": 64, "num_attention_heads": 4,
                           "num_hidden_layers": 2, "image_size": 1024, "patch_size": 16})
    assert "image_size 1024 px at patch_size 16 px gives 64 × 64 = 4,096 patches)" in layer_strip.extent(plan.layer(0))
    llama = hf.from_config({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
                            "num_hidden_layers": 2})
    assert layer_strip.extent(llama.layer(0)) is None


def test_deberta_reads_an_embedding_index_not_a_bias_and_its_title_once(monkeypatch):
    """Seen at 1440 × 900: DeBERTa's curve said 'bias added to the logit' beside a caption that says it is not a
    bias, and its title stood twice (the page's heading over the figure's own)."""
    monkeypatch.setenv("RELVIZ_MODELS", "")
    at = run_page("your_model", ym_model=PRESETS["models/deberta-v3-base"])
    (curve,) = [c for c in charts(at) if "relative embedding each offset" in str(c["layout"].get("title", {}))]
    assert curve["layout"]["yaxis"]["title"]["text"] == "relative embedding read (bucketed j − i)"
    assert "embedding = %{y" in curve["data"][0]["hovertemplate"] and "bias" not in curve["data"][0]["hovertemplate"]
    assert not any("relative embedding each offset" in m.value for m in at.markdown)
    assert any(m.value == "**Which keys each query sees over 512 positions**" for m in at.markdown)


def test_a_layer_move_sends_the_same_strip_and_each_views_exact_figure(monkeypatch):
    """A layer move keeps the strip's figure byte for byte (the chosen layer is outlined by CSS, so the browser
    draws nothing anew), and each view's figure, taken from the content-keyed cache (view_spec), is the JSON its
    own view_figure gives: layers 0-2 of Llama 4 Scout apply the same mechanisms and send the same figures."""
    import json

    import plotly.io as pio

    from relviz import layer_strip as lv
    from relviz.figures.layers import view_figure

    monkeypatch.setenv("RELVIZ_MODELS", "")
    plan = preset_plan("models/llama-4-scout")
    own = context_length(plan, preset_config(model_presets()["models/llama-4-scout"]))
    at = run_page("your_model", ym_model=PRESETS["models/llama-4-scout"], ym_layer=0)
    sent = {}
    for layer in (0, 1, 2, 3, 4):
        if layer:
            at.slider(key="ym_layer").set_value(layer).run()
            assert not at.exception, [e.value for e in at.exception]
        specs = [element.proto.spec for element in at.get("plotly_chart")]
        views = [v for v in lv.layer_views(plan.layer(layer), own) if view_figure(v) is not None]
        assert [json.loads(s) for s in specs[1:]] == [json.loads(pio.to_json(view_figure(v), validate=False))
                                                      for v in views]
        sent[layer] = specs
    assert len({s[0] for s in sent.values()}) == 1                   # the strip: one figure for every layer
    assert sent[0] == sent[1] == sent[2] == sent[4] != sent[3]       # a NoPE layer's views differ


def test_a_umt5_models_bias_map_follows_the_layer(tmp_path, monkeypatch):
    """UMT5 has a bias table in every layer, so the weights' section below the layer's fragment follows the layer:
    the page runs the layer's part in the page's own run there, and the map is the chosen layer's table."""
    import torch
    from transformers import UMT5Config, UMT5Model

    torch.manual_seed(0)
    config = UMT5Config(vocab_size=32, d_model=16, d_kv=4, d_ff=8, num_heads=2, num_layers=2, num_decoder_layers=2,
                        relative_attention_num_buckets=8, relative_attention_max_distance=20)
    UMT5Model(config).save_pretrained(tmp_path / "tiny-umt5")
    monkeypatch.setenv("RELVIZ_MODELS", str(tmp_path / "tiny-umt5"))
    for layer in (0, 1):
        at = run_page("your_model", timeout=120, ym_model="tiny-umt5", ym_stack="encoder", ym_layer=layer)
        assert not at.exception and not at.error
        assert at.slider(key="ym_layer").value == layer
        assert any(f"table of layer {layer})" in c.value for c in at.caption), [c.value for c in at.caption]
