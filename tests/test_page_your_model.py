"""The "Your model" page in AppTest, with tiny saved models listed through RELVIZ_MODELS (no network)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from page_support import run_page
from plotly_data import canvases, decode, figure_json, heatmap_values
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
    names = [t["name"] for t in charts(at)[0]["data"]]
    assert len(names) == 16 and names[0] == "head 1: slope 0.7071"            # 2^(−8/16)
    published = {e["label"] + " (published config)" for g in ("rope", "alibi") for e in load_presets()[g]}
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
