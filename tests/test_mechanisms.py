"""The mechanism registry and the plan reader: a mechanism is one file; hostile configs get a ValueError
naming the field; nothing outside the mechanism modules switches on a name."""
from __future__ import annotations

import json
import re
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from relviz.mechanisms import MECHANISMS
from relviz.mechanisms.families import FAMILIES
from relviz.model_plan import read_plan

REPO = Path(__file__).resolve().parents[1]

BASE = {
    "llama": {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 4,
              "max_position_embeddings": 4096, "rope_theta": 500000.0,
              "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                               "high_freq_factor": 4.0, "original_max_position_embeddings": 1024}},
    "gemma3_text": {"model_type": "gemma3_text", "hidden_size": 64, "num_attention_heads": 4, "head_dim": 16,
                    "num_hidden_layers": 3, "max_position_embeddings": 4096, "sliding_window": 512,
                    "layer_types": ["sliding_attention", "sliding_attention", "full_attention"],
                    "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                                        "full_attention": {"rope_type": "linear", "factor": 8.0,
                                                           "rope_theta": 1000000.0}}},
    "llama4_text": {"model_type": "llama4_text", "hidden_size": 64, "num_attention_heads": 4, "head_dim": 16,
                    "num_hidden_layers": 4, "max_position_embeddings": 4096, "attention_chunk_size": 1024,
                    "no_rope_layers": [1, 1, 1, 0], "floor_scale": 8192, "attn_scale": 0.1,
                    "layer_types": ["chunked_attention"] * 3 + ["full_attention"],
                    "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0}},
    "deepseek_v3": {"model_type": "deepseek_v3", "hidden_size": 64, "num_attention_heads": 4, "head_dim": 8,
                    "num_hidden_layers": 2, "qk_rope_head_dim": 8, "qk_nope_head_dim": 16, "qk_head_dim": 24,
                    "max_position_embeddings": 4096, "rope_interleave": True,
                    "rope_scaling": {"rope_type": "yarn", "factor": 40.0, "mscale": 1.0, "mscale_all_dim": 1.0,
                                     "original_max_position_embeddings": 1024}},
    "mpt": {"model_type": "mpt", "n_heads": 12, "n_layers": 2, "d_model": 96,
            "attn_config": {"alibi": True, "alibi_bias_max": 8}},
    "modernbert": {"model_type": "modernbert", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 3,
                   "local_attention": 128, "max_position_embeddings": 8192,
                   "layer_types": ["full_attention", "sliding_attention", "sliding_attention"],
                   "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 160000.0},
                                       "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}},
}

HOSTILE = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf, -1, -1.5, 0, 2 ** 40, 1e308, True, "x", "", [], {}, [1, 2],
                     {"a": {"b": {"c": 1}}}, None, "full_attention", ["sliding_attention"], 0.5]),
    st.integers(min_value=-(2 ** 64), max_value=2 ** 64),
    st.floats(allow_nan=True, allow_infinity=True),
    st.lists(st.sampled_from([0, 1, "full_attention", "sliding_attention", 2, None]), max_size=6),
)
FIELDS = ["num_hidden_layers", "num_attention_heads", "hidden_size", "head_dim", "max_position_embeddings",
          "sliding_window", "attention_chunk_size", "rope_theta", "layer_types", "no_rope_layers", "rope_parameters",
          "rope_scaling", "partial_rotary_factor", "floor_scale", "attn_scale", "qk_rope_head_dim",
          "qk_nope_head_dim", "qk_head_dim", "rope_interleave", "local_attention", "n_heads", "n_layers",
          "attn_config", "attn_temperature_tuning", "use_sliding_window"]
NESTED = ["rope_type", "rope_theta", "factor", "original_max_position_embeddings", "low_freq_factor",
          "high_freq_factor", "mscale_all_dim", "partial_rotary_factor", "alibi_bias_max", "alibi", "beta_fast"]


def _exercise(config: dict) -> None:
    plan = read_plan(config)
    for layer in plan.all_layers():
        plan.rope_inv_freq(layer=layer.index, stack=layer.stack)
        plan.rope_inv_freq(5000, layer=layer.index, stack=layer.stack)
        plan.attention_pattern(8, layer=layer.index, stack=layer.stack)
        plan.rotate(torch.ones(2, 4, 8, plan.first(MECHANISMS["rotation"]).width)
                    if plan.first(MECHANISMS["rotation"]) else torch.ones(1, 8, 2), torch.arange(8),
                    layer=layer.index, stack=layer.stack)
    json.dumps(plan.to_json(), allow_nan=False)


def _named(message: str, names: list[str]) -> bool:
    return any(name in message for name in names)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(family=st.sampled_from(sorted(BASE)), field=st.sampled_from(FIELDS), value=HOSTILE)
# found by hypothesis: DeepSeek-V3 publishes rope_scaling; its nesting error named rope_parameters
@example(family="deepseek_v3", field="rope_scaling", value={"a": {"b": {"c": 1}}})
# found by hypothesis: a zero qk_rope_head_dim was refused naming head_dim, the field derived from it
@example(family="deepseek_v3", field="qk_rope_head_dim", value=0)
def test_a_hostile_top_level_field_is_refused_naming_it(family, field, value):
    config = json.loads(json.dumps(BASE[family]))
    config[field] = value
    try:
        _exercise(config)
    except ValueError as error:
        assert _named(str(error), [field]), f"{family}.{field}={value!r}: {error}"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(family=st.sampled_from(sorted(BASE)), field=st.sampled_from(NESTED), value=HOSTILE)
def test_a_hostile_nested_field_is_refused_naming_it(family, field, value):
    config = json.loads(json.dumps(BASE[family]))
    inner = [d for d in (config.get("rope_scaling"), config.get("rope_parameters"), config.get("attn_config"))
             if isinstance(d, dict)]
    inner = [v for d in inner for v in ([d] if not any(isinstance(x, dict) for x in d.values()) else d.values())]
    if not inner:
        return
    for d in inner:
        d[field] = value
    try:
        _exercise(config)
    except ValueError as error:
        assert _named(str(error), [field]), f"{family}: {field}={value!r}: {error}"


@pytest.mark.parametrize("change, field", [
    ({"layer_types": ["full_attention"]}, "layer_types"),
    ({"sliding_window": 2 ** 40}, "sliding_window"),
    ({"rope_scaling": {"rope_type": "warp", "factor": 2.0}}, "rope_type"),
    ({"rope_theta": math.nan}, "rope_theta"),
    ({"max_position_embeddings": -5}, "max_position_embeddings"),
    ({"num_hidden_layers": 10 ** 9}, "num_hidden_layers"),
])
def test_the_issues_examples_name_their_field(change, field):
    config = {**BASE["gemma3_text"], "rope_parameters": None, "rope_theta": 10000.0, **change}
    with pytest.raises(ValueError, match=field):
        _exercise(config)


def test_deep_nesting_and_unknown_families_are_refused_with_what_was_read():
    deep: dict = {"model_type": "llama"}
    cursor = deep
    for _ in range(40):
        cursor["x"] = {}
        cursor = cursor["x"]
    with pytest.raises(ValueError, match="nested more than"):
        read_plan(deep)
    with pytest.raises(ValueError, match=r"'unseen_family' is not supported.*relviz could read max_position_embeddings"):
        read_plan({"model_type": "unseen_family", "max_position_embeddings": 512})


def test_a_throwaway_mechanism_is_one_file(tmp_path):
    """Copy the library, add one mechanism module and one family naming it (what an entry in families.py does): it
    is read, listed, printed by the command line and drawn in the layer strip and the layer's views."""
    copy = tmp_path / "repo"
    shutil.copytree(REPO / "relviz", copy / "relviz", ignore=shutil.ignore_patterns("__pycache__", "checkpoints",
                                                                                     "*.json"))
    (copy / "relviz" / "mechanisms" / "throwaway.py").write_text('''
from dataclasses import dataclass

import numpy as np

from relviz.mechanisms.base import Mechanism
from relviz.schemes.view_kinds import BiasCurve


@dataclass(frozen=True)
class Throwaway(Mechanism):
    strength: float = 1.0
    name = "throwaway"
    role = "adds a constant"
    legend = "bias"
    positional = True

    @classmethod
    def read(cls, ctx, options):
        return cls(ctx.config.float("throwaway_strength", 1.0, maximum=10.0))

    def label(self):
        return f"throwaway {self.strength:g}"

    def settings(self):
        return {"throwaway_strength": self.strength}

    def views(self, length, layer):
        offsets = np.arange(-length + 1, length)
        return [BiasCurve("THROWAWAY CURVE", "a throwaway caption", offsets,
                          np.full((1, offsets.size), self.strength, dtype=np.float32), learned=False)]
''')
    script = '''
import json
import re
from relviz.mechanisms import MECHANISMS
from relviz.mechanisms.families import FAMILIES
from relviz.model_plan import read_plan
FAMILIES["toy"] = {"stacks": {"decoder": {"layers_field": "num_hidden_layers", "causal": True}},
                   "mechanisms": {"throwaway": {}, "pattern": {}}}
config = {"model_type": "toy", "num_hidden_layers": 2, "throwaway_strength": 3}
plan = read_plan(config)
import contextlib, io, pathlib, tempfile
from relviz.__main__ import main
directory = pathlib.Path(tempfile.mkdtemp())
(directory / "config.json").write_text(json.dumps(config))
text = io.StringIO()
with contextlib.redirect_stdout(text):
    main(["inspect", str(directory)])
from relviz.figures.layers import strip_figure, view_figure
from relviz.layer_strip import layer_views, strip
drawn = strip(plan)
figure = strip_figure(drawn)
views = layer_views(plan.layer(1), 16)
print(json.dumps({"listed": list(MECHANISMS), "labels": [p.label() for p in plan.all_layers()],
                  "json": plan.to_json()["layers"]["decoder"][0]["mechanisms"][-1], "cli": text.getvalue(),
                  "strip": [[c.layer, c.row, c.label] for c in drawn.cells if c.legend == "bias"],
                  "strip_traces": [trace.name for trace in figure.data],
                  "views": [type(v).__name__ for v in views],
                  "titles": [view_figure(v).layout.title.text for v in views if type(v).__name__ == "BiasCurve"]}))
'''
    out = subprocess.run([sys.executable, "-c", script], cwd=copy, capture_output=True, text=True, check=True)
    result = json.loads(out.stdout)
    assert "throwaway" in result["listed"] and result["labels"] == ["causal · throwaway 3"] * 2
    assert "layers 0-1: causal · throwaway 3" in result["cli"]
    assert result["json"] == {"mechanism": "throwaway", "role": "adds a constant", "label": "throwaway 3",
                              "throwaway_strength": 3.0}
    # the layer strip and the layer's views draw it from its own methods: nothing else was edited
    assert result["strip"] == [[0, "position", "throwaway 3"], [1, "position", "throwaway 3"]]
    assert "position: throwaway 3" in result["strip_traces"], result["strip_traces"]
    assert "BiasCurve" in result["views"] and any("THROWAWAY CURVE" in t for t in result["titles"]), result


def test_every_family_names_registered_mechanisms_only():
    for model_type, family in FAMILIES.items():
        assert set(family["mechanisms"]) <= set(MECHANISMS), model_type


def test_the_readmes_plan_example_runs_and_says_what_it_shows():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    code = text.split("<!-- readme-plan-example -->", 1)[1].split("```python", 1)[1].split("```", 1)[0]
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)
    plan = namespace["gemma3"]
    runs = [(first, last, p.label()) for first, last, p in plan.runs()]
    assert runs == [(0, 4, "RoPE θ 10k · window 1024 · scale 1/√256"),      # Gemma's query_pre_attn_scalar default
                    (5, 5, "RoPE θ 1M linear · causal · scale 1/√256")]
    assert f"# {runs}" in code
    assert torch.equal(plan.rope_inv_freq(layer=5)[-1], 1.0 / (1e6 ** torch.tensor(126 / 128)) / 8)
# Names whose comparison to a string literal outside relviz/mechanisms and relviz/schemes would be a
# decision by name: scheme names, mechanism names, families' model_types, checker kinds.
def _names() -> set[str]:
    from relviz.schemes import REGISTRY

    names = set(REGISTRY) | set(MECHANISMS) | set(FAMILIES)
    try:
        from relviz.check import KINDS
        names |= set(KINDS)
    except ImportError:
        pass
    return {n for n in names if len(n) > 2}


def test_no_code_outside_the_mechanism_and_scheme_modules_switches_on_a_name():
    names = "|".join(sorted(map(re.escape, _names()), key=len, reverse=True))
    pattern = re.compile(rf"""(==|!=|\bin)\s*[(\[{{]?\s*["']({names})["']""")
    offenders = []
    for path in sorted(list((REPO / "relviz").rglob("*.py")) + list((REPO / "pages").rglob("*.py"))
                       + [REPO / "app.py"]):
        relative = path.relative_to(REPO)
        if relative.parts[:2] in (("relviz", "mechanisms"), ("relviz", "schemes")):
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if pattern.search(line) and not re.match(r"\s*for\b", line):
                offenders.append(f"{relative}:{n}: {line.strip()}")
    assert not offenders, "\n".join(offenders)
