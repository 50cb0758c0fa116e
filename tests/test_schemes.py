"""relviz.schemes: the registry, the one-declaration parameters, and the promise that a new
scheme is one new file (a throwaway scheme in a temporary copy of the package)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from relviz.__main__ import main
from relviz.model import ModelConfig
from relviz.schemes import REGISTRY, get_scheme
from relviz.schemes.base import Param

REPO = Path(__file__).resolve().parents[1]


def test_schemes_command_lists_every_scheme_with_its_parameters(capsys):
    assert main(["schemes", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [s["name"] for s in listed] == ["none", "sinusoidal", "learned", "shaw", "t5", "skew", "alibi", "rope",
                                           "kerple", "fire"]
    shaw = next(s for s in listed if s["name"] == "shaw")
    assert shaw["parameters"] == [{"name": "clip", "type": "int", "default": 8, "minimum": 0, "maximum": 4096,
                                   "exclusive_minimum": False, "flag": "--clip",
                                   "help": "shaw: clipping distance k", "app_range": [0, 32]}]
    assert {s["name"] for s in listed if s["causal_only"]} == {"skew", "fire"}
    assert main(["schemes"]) == 0
    assert "--fire-hidden int (default 32" in capsys.readouterr().out


def test_a_param_is_validated_in_one_place():
    base = Param("rope_base", float, 10000.0, "rope base", minimum=1, exclusive_minimum=True)
    assert base.check(10) == 10.0 and isinstance(base.check(10), float)
    for bad in (1, 0.5, float("nan"), True, "2"):
        with pytest.raises(ValueError, match="rope_base must be a finite number > 1"):
            base.check(bad)
    with pytest.raises(ValueError, match="clip must be an integer >= 0 and <= 4096; got -1"):
        ModelConfig(clip=-1)
    with pytest.raises(ValueError, match="skew_distances must be an integer"):
        ModelConfig(scheme="skew", skew_distances=1.5)


def test_registry_refuses_unknown_names():
    with pytest.raises(ValueError, match="unknown scheme 'xpos'; known schemes: none, sinusoidal"):
        get_scheme("xpos")


# ---------------------------------------------------------------------------------------
# A new scheme is one new file

THROWAWAY = '''
"""``throwaway``: a test scheme — one learned slope per head times |j − i|, plus a width parameter. A new concept,
so its mechanism (the math the forward runs, its views, its structure and their words) sits in the same file as the
scheme, which holds only the learned parameters."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from relviz.attention_steps import dot_product_attention
from relviz.mechanisms.base import ToyMechanism
from relviz.positions import relative_positions
from relviz.schemes.base import Param, Scheme, detached
from relviz.schemes.view_kinds import BiasCurve, PositionStructure


@dataclass(frozen=True, eq=False)
class ThrowawayBias(ToyMechanism):
    slope: torch.Tensor                                           # [H, width]

    name = "throwaway"
    role = "adds a learned slope times |j - i|"
    order = 50

    def bias(self, length, device="cpu"):
        distance = relative_positions(length, device=device).abs().float()
        return self.slope.sum(-1)[:, None, None] * distance     # [H, L, L]

    def attend(self, q, k, v, *, causal, shared=None, need_weights=False):
        return dot_product_attention(q, k, v, causal=causal, bias=self.bias(q.shape[-2], q.device),
                                     need_weights=need_weights)

    def label(self):
        return "THROWAWAY LABEL"

    def curve(self, length):
        offsets = np.arange(-(length - 1), 1)
        with torch.no_grad():
            bias = detached(self.slope.sum(-1))[:, None] * np.abs(offsets)[None, :]
        return BiasCurve("THROWAWAY CURVE", "THROWAWAY CAPTION", offsets, bias.astype(np.float32), learned=True)

    def views(self, length, layer):
        return [self.curve(length)]

    def structure(self, length, causal):
        with torch.no_grad():
            values = detached(self.bias(length))
        width = self.slope.shape[-1]
        return PositionStructure("THROWAWAY STRUCTURE", "throwaway bias", values, None, causal, True,
                                 facts={"width": width}, caption=f"a throwaway explanation of width {width}")


class Throwaway(Scheme):
    name = "throwaway"
    concept = ThrowawayBias
    summary = "a throwaway test scheme: a learned slope per head times |j − i|"
    order = 50
    params = (Param("throwaway_width", int, 3, "throwaway: a width", minimum=1, maximum=9, app_max=5,
                    label="throwaway width"),)

    def __init__(self, config):
        super().__init__(config)
        self.slope = nn.Parameter(torch.full((config.n_heads, config.throwaway_width), -0.1))

    @classmethod
    def num_parameters(cls, config):
        return config.n_heads * config.throwaway_width

    def mechanism(self, layer):
        return ThrowawayBias(self.slope)
'''

PROBE = '''
import contextlib, io, json, sys
import torch
from pathlib import Path
from relviz.__main__ import main

out = {}
buffer = io.StringIO()
with contextlib.redirect_stdout(buffer):
    main(["schemes", "--json"])
out["listed"] = json.loads(buffer.getvalue())
buffer = io.StringIO()
with contextlib.redirect_stdout(buffer):
    try:
        main(["train", "--help"])
    except SystemExit:
        pass
out["train_help"] = buffer.getvalue()
out["train_exit"] = main(["train", "--scheme", "throwaway", "--throwaway-width", "4", "--steps", "3", "--length", "8",
                          "--batch-size", "2", "--layers", "1", "--d-model", "16", "--heads", "2", "--d-ff", "16",
                          "--quiet", "--out", "relviz/checkpoints", "--name", "throwaway-shift"])

from relviz.model import ModelConfig, build_model
from relviz.training import load_checkpoint, train, save_checkpoint, CHECKPOINT_DIR
from relviz.tasks import make_task
config = ModelConfig(scheme="throwaway", throwaway_width=2, d_model=16, n_heads=2, d_ff=16, n_layers=1)
out["config"] = config.to_dict()
out["num_parameters"] = [config.num_parameters(), build_model(config).num_parameters()]
result = train(config, make_task("shift", s=2), steps=2, batch_size=2, length=8)
save_checkpoint(result, "roundtrip", "scratch")
loaded = load_checkpoint("roundtrip", "scratch")
out["roundtrip"] = all(torch.equal(a, b) for a, b in zip(result.model.state_dict().values(),
                                                        loaded.model.state_dict().values()))
out["loaded_config"] = loaded.info.model_config == config
shipped = load_checkpoint("throwaway-shift")
out["shipped_width"] = shipped.model.config.throwaway_width

# the Your model page's plan of the shipped checkpoint: its strip draws the mechanism the forward ran
from relviz.layer_strip import layer_views, strip
from relviz.toy_plan import drawn_schemes, toy_plan
plan = toy_plan(shipped.model)
out["drawn"] = "throwaway" in drawn_schemes()
out["strip"] = [cell.label for cell in strip(plan).cells]
out["plan_views"] = [view.title for view in layer_views(plan.layer(0), 16)]
out["plan_captions"] = [getattr(view, "caption", "") for view in layer_views(plan.layer(0), 16)]

# the in-app training guard: the parameter within its app range passes, beyond it is refused by name
from relviz.app.training_queue import TrainingRequest, check_request
guarded, _ = check_request(TrainingRequest(scheme="throwaway", scheme_params={"throwaway_width": 5}))
out["guarded_width"] = guarded.throwaway_width
try:
    check_request(TrainingRequest(scheme="throwaway", scheme_params={"throwaway_width": 6}))
except ValueError as error:
    out["guard_refusal"] = str(error)

# a tour step carrying the scheme and its app parameter (relviz.app.tours is not edited), opened as a link
from relviz.app import tours
step = tours.check_step(tours.Step("attention", {"at_ck": "throwaway-shift", "at_tsch": "throwaway",
                                                 "at_t_throwaway_width": "4"}))
out["tour_params"] = tours.decode(tours.encode(tours.Tour("t", (step,)))).steps[0].params

from streamlit.testing.v1 import AppTest
def open_link(params):
    at = AppTest.from_file(str(Path.cwd() / "app.py"), default_timeout=60)
    at.switch_page("pages/attention.py")
    for key, value in params.items():
        at.query_params[key] = value
    return at.run()
at = open_link(step.params)
out["exceptions"] = [e.value for e in at.exception]
out["errors"] = [e.value for e in at.error]
out["picker"] = list(at.selectbox(key="at_ck").options)
out["scheme_options"] = list(at.selectbox(key="at_tsch").options)
out["sliders"] = {s.key: [s.min, s.max, s.value] for s in at.slider}
out["charts"] = [json.loads(c.proto.spec)["layout"].get("title", {}).get("text", "") for c in at.get("plotly_chart")]
out["markdown"] = " ".join(m.value for m in at.markdown) + " ".join(c.value for c in at.caption)
out["warnings"] = [w.value for w in at.warning]
# a value the tour takes by shape but the slider does not: the page's own link check refuses it
step = tours.check_step(tours.Step("attention", {"at_tsch": "throwaway", "at_t_throwaway_width": "9"}))
at = open_link(step.params)
out["outside_warnings"] = [w.value for w in at.warning]
out["outside_exceptions"] = [e.value for e in at.exception]
out["outside_slider"] = at.slider(key="at_t_throwaway_width").value
print("RESULT " + json.dumps(out), flush=True)
import os
os._exit(0)  # skip the interpreter's teardown of torch and streamlit (seconds of CPU that assert nothing)
'''


def test_a_new_scheme_is_one_new_file(tmp_path):
    """Copy the package, add one file (the scheme, its mechanism and its words), touch nothing else: the scheme
    is everywhere, Your model included."""
    copy = tmp_path / "repo"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(REPO / "relviz", copy / "relviz", ignore=ignore)
    shutil.copytree(REPO / "pages", copy / "pages", ignore=ignore)
    shutil.copy(REPO / "app.py", copy / "app.py")
    (copy / "relviz" / "schemes" / "throwaway.py").write_text(textwrap.dedent(THROWAWAY), encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(copy))
    proc = subprocess.run([sys.executable, "-c", PROBE], cwd=copy, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("RESULT "))[7:])
    # the CLI: listed, with its parameter, and `train --scheme throwaway --throwaway-width` works
    listed = {s["name"]: s for s in out["listed"]}
    assert list(listed)[-1] == "throwaway" and len(listed) == len(REGISTRY) + 1
    assert listed["throwaway"]["parameters"][0]["flag"] == "--throwaway-width"
    assert "--throwaway-width" in out["train_help"] and "throwaway" in out["train_help"]
    assert out["train_exit"] == 0
    # ModelConfig and the checkpoint round trip
    assert out["config"]["throwaway_width"] == 2 and out["config"]["scheme"] == "throwaway"
    assert out["num_parameters"][0] == out["num_parameters"][1]
    assert out["roundtrip"] and out["loaded_config"] and out["shipped_width"] == 4
    # Your model: its checkpoint is listed and drawn as a plan of its mechanism
    assert out["drawn"] and "THROWAWAY LABEL" in out["strip"] and "THROWAWAY CURVE" in out["plan_views"]
    # and the structure the Live attention page draws, with its words (the mechanism's, written once)
    assert "THROWAWAY STRUCTURE" in out["plan_views"] and "a throwaway explanation of width 4" in out["plan_captions"]
    # the training guard: bounded by the app range the scheme declares (1..5, the library allows 9)
    assert out["guarded_width"] == 5
    assert out["guard_refusal"] == "throwaway_width must be from 1 to 5 for training in the app; got 6"
    # the Live attention page: picker, structure, parameter panel, the training form's slider
    assert not out["exceptions"], out["exceptions"]
    assert not out["errors"], out["errors"]
    assert "throwaway-shift" in out["picker"] and "throwaway" in out["scheme_options"]
    assert out["sliders"]["at_t_throwaway_width"] == [1, 5, 4]  # the tour link's value, taken
    assert not [w for w in out["warnings"] if "Ignored in the link" in w], out["warnings"]
    assert any("THROWAWAY STRUCTURE" in title for title in out["charts"]), out["charts"]
    assert any("THROWAWAY CURVE" in title for title in out["charts"]), out["charts"]
    assert "THROWAWAY CAPTION" in out["markdown"] and "a throwaway test scheme" in out["markdown"]
    assert "a throwaway explanation of width 4" in out["markdown"]
    # lecture mode: a tour step with the scheme's parameter validates and survives its link
    assert out["tour_params"] == {"at_ck": "throwaway-shift", "at_tsch": "throwaway", "at_t_throwaway_width": "4"}
    # and a value outside the slider's range is dropped by the page with a notice naming it
    assert not out["outside_exceptions"] and out["outside_slider"] == 3
    assert any("Ignored in the link" in w and "at_t_throwaway_width=9" in w for w in out["outside_warnings"]), \
        out["outside_warnings"]
    # and nothing outside the new file changed in the copy
    assert not (copy / "relviz" / "schemes" / "throwaway.py").read_text().count("pages/")


#: Modules about something other than relviz's model schemes: a Hugging Face checkpoint's position
#: family (relviz.hf, its CLI and page).
NOT_MODEL_SCHEMES = {"relviz/hf.py", "relviz/cli/inspect.py", "pages/your_model.py"}


def test_no_code_outside_the_schemes_package_switches_on_a_scheme_name():
    """The registry's promise, checked on the source: no `scheme == "t5"`, `row["scheme"] in ("t5", …)`-style
    tests outside relviz/schemes."""
    import re

    names = "|".join(REGISTRY)
    pattern = re.compile(rf"""(scheme["']?\]?|\.name)\s*(==|!=|\bin)\s*[(\[{{]?\s*["']({names})["']""")
    offenders = []
    for path in list((REPO / "relviz").rglob("*.py")) + list((REPO / "pages").rglob("*.py")) + [REPO / "app.py"]:
        relative = path.relative_to(REPO)
        if "schemes" in relative.parts[:2] or relative.as_posix() in NOT_MODEL_SCHEMES:
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if pattern.search(line):
                offenders.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_tour_links_take_every_scheme_and_its_app_parameters():
    """relviz.app.tours reads the attention page's scheme keys by shape (it holds no copy of the registry):
    every scheme's name and each app parameter at both ends of its slider make a valid tour step."""
    from relviz.app.tours import Step, check_step, decode, encode, Tour
    from relviz.app.training_queue import scheme_caps

    for name, scheme in REGISTRY.items():
        for end in (0, 1):
            params = {"at_tsch": name, **{f"at_t_{p.name}": str(p.slider_range[end]) for p in scheme_caps(scheme)}}
            step = check_step(Step("attention", params))
            assert step.params == params
            assert decode(encode(Tour("t", (step,)))).steps[0].params == params
