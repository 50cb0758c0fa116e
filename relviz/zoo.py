"""The sweep over transformers' zoo: every text family it ships, built tiny and read, exactly or refused.

``text_families()`` lists the model_types transformers maps to a text task (its own auto mappings: causal and
masked LMs, sequence-to-sequence, classification, question answering, pretraining, text encoding; read at run time,
never a hand-written list). ``tiny_config`` builds each family's config class with its defaults and at most
``LAYERS`` layers; ``sweep`` hands each to ``relviz.observe.verified_plan``, which builds the model, runs it and compares the plan layer by layer (an
encoder-decoder family as the causal LM the mapping names, its decoder alone: BartForCausalLM).
Each family ends as ``exact`` (every layer equal to what transformers ran) or ``refused`` with the reason,
grouped by ``REASONS``; there is no third outcome, so a misreading cannot pass silently.
"""
from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from relviz.observe import verified_plan
from relviz.observe_build import auto, auto_config, model_class
from relviz.model_plan import OBSERVED

__all__ = ["Outcome", "Reason", "text_families", "TEXT_MAPPINGS", "tiny_config", "sweep", "summary", "REASONS", "RAN", "LAYERS"]

#: layers per tiny model: enough for every interleaving period in today's families (Gemma 3's 6, Jamba's 8)
LAYERS = 8
class Reason(NamedTuple):
    """Words in a refusal, its group in the summary, whether transformers built and ran the model before it, and
    whether the observer looked at what ran (False: it could not, which says nothing of relviz's reading)."""

    start: str
    group: str
    ran: bool
    looked: bool


_DEFAULT_FAILS = Reason("could not build its default config", "transformers cannot build its own default config",
                        ran=False, looked=False)
_BUILD_FAILS = Reason("could not build a", "transformers cannot build it from the shrunk config", ran=False,
                      looked=False)
#: a refusal's words -> its group (the first that matches)
REASONS: tuple[Reason, ...] = (
    _DEFAULT_FAILS,
    Reason("could not build a small model", "the shrunk model is still too large to observe (width fields relviz "
                                            "does not shrink)", ran=False, looked=False),
    _BUILD_FAILS,
    Reason("could not run", "transformers cannot run the shrunk model on token ids (its error quoted)", ran=False,
           looked=False),
    Reason("transformers' attention was not seen", "its attention goes neither through eager_attention_forward nor "
                                                   "through a softmax over its positions", ran=True, looked=False),
    Reason("has no list of", "no layer list to observe", ran=False, looked=False),
    Reason("refused by relviz's family table", "its family table entry refuses it, saying what transformers runs "
                                               "there", ran=True, looked=True),
    Reason("relviz cannot read it", "relviz cannot read its config", ran=True, looked=True),
    Reason("a stack of the plan was not observed", "a stack of relviz's plan was not observed", ran=True, looked=True),
    Reason("differs from what transformers", "relviz's reading differs from what transformers runs", ran=True,
           looked=True),
    Reason("not one relviz can say exactly", "outside the table without RoPE, and what ran is not one relviz can say "
                                             "exactly (relviz.observe_position)", ran=True, looked=True),
    Reason("names no num_hidden_layers", "no layer list to observe", ran=False, looked=False),
    Reason("the observer could not", "the observer could not read or probe the rotation transformers ran", ran=True,
           looked=True),
)
#: the groups where transformers built and ran the model
RAN = {r.group for r in REASONS if r.ran}


@dataclass(frozen=True)
class Outcome:
    model_type: str
    exact: bool
    reason: str           # "" when exact
    group: str            # REASONS' group ("" when exact)
    layers: int
    seconds: float


#: transformers' auto mappings whose models take token ids: a model_type any of them names is a text family (a
#: composite's text side, read as the observer reads it); the causal LMs alone left out every encoder (BERT's kin,
#: EuroBERT's and GTE's rotary encoders, T5's) and every composite mapped to a pretraining head (LLaVA's kin)
TEXT_MAPPINGS = ("MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", "MODEL_FOR_MASKED_LM_MAPPING_NAMES",
                 "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES", "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES",
                 "MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES", "MODEL_FOR_QUESTION_ANSWERING_MAPPING_NAMES",
                 "MODEL_FOR_MULTIPLE_CHOICE_MAPPING_NAMES", "MODEL_FOR_PRETRAINING_MAPPING_NAMES",
                 "MODEL_FOR_TEXT_ENCODING_MAPPING_NAMES", "MODEL_FOR_NEXT_SENTENCE_PREDICTION_MAPPING_NAMES")


def text_families() -> list[str]:
    """Every model_type transformers maps to a text task (``TEXT_MAPPINGS``: its auto mappings, as installed)."""
    mappings = auto()
    return sorted({t for name in TEXT_MAPPINGS for t in getattr(mappings, name, {})})


def tiny_config(model_type: str) -> dict[str, Any]:
    """The family's config class with its defaults and at most LAYERS layers, as its config.json would hold it."""
    cls = auto_config()[model_type]
    default = cls()
    text = default.get_text_config() if hasattr(default, "get_text_config") else default
    layers = getattr(text, "num_hidden_layers", None)
    fewer = {"num_hidden_layers": min(layers, LAYERS)} if isinstance(layers, int) else {}
    if fewer:      # other counts of layers: a decoder's beside its encoder's as many, a count of some of them cut in
        kept = fewer["num_hidden_layers"]                                    # proportion (Gemma 3n's 15 of 35)
        fewer.update({k: kept if v >= layers else max(1, v * kept // layers) for k, v in text.to_dict().items()
                      if k.endswith("_layers") and k != "num_hidden_layers" and isinstance(v, int)
                      and not isinstance(v, bool) and v > 0})
        fewer.update({k: [i for i in v if i < kept] for k, v in text.to_dict().items()   # a list of layer indices:
                      if k.endswith("_layers") and isinstance(v, list) and v              # those still there (Mllama's
                      and all(isinstance(i, int) and 0 <= i < layers for i in v)          # cross_attention_layers; not
                      and len(set(v)) == len(v) < layers})                                # a flag per layer)
    try:
        config = cls(**fewer) if text is default else cls(text_config={**text.to_dict(), **fewer})
    except Exception:  # noqa: BLE001 - a per-layer default list of fixed length: keep the class's own count
        config = default
    return {**config.to_dict(), "model_type": model_type}


def _default_fails(model_type: str) -> str:
    """transformers' own error building the family's default config (its full widths, on the meta device: no
    memory), or "" where it builds."""
    import torch

    try:
        config = auto_config()[model_type]()
        with torch.device("meta"):
            model_class(config).from_config(config)
    except Exception as exc:  # noqa: BLE001 - transformers' own refusal, quoted
        return f"{type(exc).__name__}: {str(exc)[:160]}"
    return ""


def _group(message: str) -> str:
    for reason in REASONS:
        if reason.start in message:
            return reason.group
    return "other: " + message[:80]


def sweep(model_types: Iterable[str] | None = None) -> list[Outcome]:
    """Each family read exactly or refused with its reason."""
    out = []
    for model_type in (text_families() if model_types is None else model_types):
        start = time.perf_counter()
        try:
            config = tiny_config(model_type)
        except Exception as exc:  # noqa: BLE001 - transformers' own refusal of its defaults
            message = f"transformers could not build its default config: {type(exc).__name__}: {str(exc)[:200]}"
            out.append(Outcome(model_type, False, message, _group(message), 0, time.perf_counter() - start))
            continue
        try:
            plan = verified_plan(config, causal_lm=True)
        except ValueError as exc:
            message = str(exc)
            if _group(message) == _BUILD_FAILS.group:     # not the shrink's doing where the defaults fail too
                failed = _default_fails(model_type)
                message = f"{message} (transformers could not build its default config either: {failed})" \
                    if failed else message
                group = _DEFAULT_FAILS.group if failed else _group(message)
            else:
                group = _group(message)
            out.append(Outcome(model_type, False, message, group, 0, time.perf_counter() - start))
            continue
        if not all(p.read_from == OBSERVED for p in plan.all_layers()):
            message = "a stack of the plan was not observed: " + ", ".join(
                sorted({p.stack for p in plan.all_layers() if p.read_from != OBSERVED}))
            out.append(Outcome(model_type, False, message, _group(message), 0, time.perf_counter() - start))
            continue
        out.append(Outcome(model_type, True, "", "", len(plan.all_layers()), time.perf_counter() - start))
    return out


def summary(outcomes: list[Outcome]) -> dict[str, Any]:
    """Counts: built (transformers built and ran it: exact, or refused after it ran), exact, refused by reason."""
    refused = Counter(o.group for o in outcomes if not o.exact)
    built = sum(1 for o in outcomes if o.exact or o.group in RAN)
    return {"families": len(outcomes), "built": built, "exact": sum(o.exact for o in outcomes),
            "refused": dict(refused.most_common()), "seconds": round(sum(o.seconds for o in outcomes), 1)}
