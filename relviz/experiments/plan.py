"""What the experiments measure: the settings, the plan of a run, and published reference points.

A :class:`Plan` holds every knob of a run (model, training, the grid of each study);
:data:`FULL_PLAN` made the shipped results file, :data:`QUICK_PLAN` is a smoke run.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from relviz.model import ModelConfig

FORMAT = "relviz-experiments"
FORMAT_VERSION = 1
#: The shipped results file, read by the app's Experiments page.
#: The shipped results file, read by the app's Experiments page.
RESULTS_PATH = Path(__file__).resolve().parents[1] / "experiments_results.json"
#: A results file larger than this is refused (the shipped one is a few tens of kB).
MAX_RESULTS_BYTES = 4 << 20

#: experiment name -> title, in page order.
EXPERIMENTS: dict[str, str] = {
    "offset_resolution": "Offset resolution: which offsets can one layer tell apart?",
    "length_extrapolation": "Length extrapolation: train short, test long",
    "cost": "Cost: time and memory of relative attention against L",
}

# ---------------------------------------------------------------------------------------
# Published reference points

#: Shaw et al. 2018, Table 2: newstest2013 EN-DE BLEU of the base model by clipping distance k.
SHAW_TABLE2: dict[int, float] = {0: 12.5, 1: 25.5, 2: 25.8, 4: 25.9, 16: 25.8, 64: 25.9, 256: 25.8}
#: Press et al. (ALiBi), the headline result.
ALIBI_HEADLINE = ("A 1.3B-parameter ALiBi model trained at length 1024 matches a sinusoidal model trained at "
                  "2048 when both are tested at 2048, training 11% faster and using 11% less memory "
                  "(Press et al., Train Short, Test Long).")


# ---------------------------------------------------------------------------------------
# What is measured: scheme settings and the plan


@dataclass(frozen=True)
class Setting:
    """One scheme with its parameters, e.g. Shaw with k = 4: an id, a label, ModelConfig fields."""

    id: str
    label: str
    scheme: str
    params: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "label": self.label, "scheme": self.scheme, "params": dict(self.params)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Setting:
        return cls(data["id"], data["label"], data["scheme"], dict(data["params"]))


OFFSET_SETTINGS: tuple[Setting, ...] = (
    Setting("shaw-k4", "Shaw k = 4", "shaw", {"clip": 4}),
    Setting("shaw-k16", "Shaw k = 16", "shaw", {"clip": 16}),
    Setting("t5-32-128", "T5 32/128", "t5", {"num_buckets": 32, "max_distance": 128}),
    Setting("t5-8-32", "T5 8/32", "t5", {"num_buckets": 8, "max_distance": 32}),
    Setting("alibi", "ALiBi", "alibi", {}),
    Setting("sinusoidal", "sinusoidal (absolute)", "sinusoidal", {}),
)

EXTRAPOLATION_SETTINGS: tuple[Setting, ...] = (
    Setting("none", "no positions (none)", "none", {}),
    Setting("sinusoidal", "sinusoidal", "sinusoidal", {}),
    Setting("learned", "learned (max_len 64)", "learned", {"max_len": 64}),
    Setting("shaw", "Shaw k = 8", "shaw", {"clip": 8}),
    Setting("t5", "T5 32/128", "t5", {"num_buckets": 32, "max_distance": 128}),
    Setting("skew", "skew (32 distances)", "skew", {"skew_distances": 32}),
    Setting("alibi", "ALiBi", "alibi", {}),
    Setting("rope", "RoPE", "rope", {}),
    Setting("kerple", "KERPLE (log)", "kerple", {}),
    Setting("fire", "FIRE", "fire", {"fire_hidden": 32}),
)

#: Attention implementations of the cost experiment: id -> label.
IMPLEMENTATIONS: dict[str, str] = {
    "skew_naive": "naive gather, L × L × D (skew semantics)",
    "shaw_naive": "naive gather, L × L × D, K and V (Shaw)",
    "skew": "relviz skew (L × D table, L² · H logits)",
    "shaw": "relviz Shaw (per-offset products, L² · H logits)",
    "chunked": "query-chunked skew (chunk · L · H)",
}


@dataclass(frozen=True)
class Plan:
    """Every knob of a run. FULL_PLAN is what the shipped file was made with; QUICK_PLAN is a
    smoke run; tests shrink it further with :meth:`replace`."""

    # model (shared by experiments 1 and 2)
    d_model: int = 32
    n_heads: int = 4
    d_ff: int = 64
    # training (shared)
    batch_size: int = 32
    lr: float = 1e-2
    stop_loss: float = 0.05       # early stop once the training loss stays below this ...
    stop_patience: int = 20       # ... for this many consecutive steps
    seeds: tuple[int, ...] = (0, 1, 2)
    # 1. offset resolution
    shifts: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 8, 12, 16, 20, 24, 32, 40)
    layers: tuple[int, ...] = (1, 2)
    max_steps: tuple[int, ...] = (300, 800)    # per entry of layers
    counted: int = 12             # train/eval length is s + counted: every s has as many answers
    offset_settings: tuple[Setting, ...] = OFFSET_SETTINGS
    # 2. length extrapolation
    extrap_task_s: int = 5
    extrap_layers: int = 2
    extrap_train_length: int = 32
    extrap_factors: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7, 8)
    extrap_max_steps: int = 800
    extrap_settings: tuple[Setting, ...] = EXTRAPOLATION_SETTINGS
    # 3. cost
    cost_quick: bool = False      # passes --quick to the benchmark (L = 128 only)
    cost_lengths: tuple[int, ...] = (512, 1024, 2048, 4096)   # the chunked cases; the bench has its own
    cost_chunk: int = 128
    cost_repeats: int = 3

    def replace(self, **changes: Any) -> Plan:
        return dataclasses.replace(self, **changes)

    def model_config(self, setting: Setting, n_layers: int) -> ModelConfig:
        return ModelConfig(vocab_size=10, d_model=self.d_model, n_layers=n_layers, n_heads=self.n_heads,
                           d_ff=self.d_ff, scheme=setting.scheme, causal=True, **setting.params)

    def steps_for(self, layers: int) -> int:
        return self.max_steps[self.layers.index(layers)]


FULL_PLAN = Plan()
QUICK_PLAN = Plan(seeds=(0, 1, 2), shifts=(1, 4, 8, 16), max_steps=(80, 120), extrap_max_steps=120,
                  extrap_factors=(1, 2, 4), cost_quick=True, cost_lengths=(128,), cost_chunk=32, cost_repeats=2)



def plan_dict(plan: Plan) -> dict[str, Any]:
    """The plan's knobs for a worker (the settings travel separately, one per job)."""
    data = dataclasses.asdict(plan)
    del data["offset_settings"], data["extrap_settings"]
    return data


def model_setup(plan: Plan) -> dict[str, Any]:
    """The model part of a results section's setup (what the page and a live rerun read)."""
    return {"d_model": plan.d_model, "n_heads": plan.n_heads, "d_ff": plan.d_ff, "causal": True,
            "vocab_size": 10}


def training_setup(plan: Plan, max_steps: dict[str, int]) -> dict[str, Any]:
    """The training part of a results section's setup."""
    return {"optimizer": "AdamW (betas 0.9, 0.98; weight decay 0.01), gradient norm clipped to 1",
            "schedule": "linear warm-up over the first 5% of max_steps, then cosine decay to 0 at max_steps",
            "batch_size": plan.batch_size, "lr": plan.lr, "max_steps": max_steps,
            "stop_loss": plan.stop_loss, "stop_patience": plan.stop_patience}
