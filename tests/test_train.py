"""Tests for relviz.training and the train / checkpoints / evaluate commands: training smoke
tests, determinism, checkpoint round trips, every way a checkpoint can be broken, the
shipped checkpoints, and the CLI's JSON output."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from relviz.__main__ import main
from relviz.model import SCHEMES, ModelConfig
from relviz.tasks import Shift, WindowMax, make_task
from relviz.training import (
    CHECKPOINT_DIR,
    DEFAULT_TRAINING,
    SCHEME_DEFAULTS,
    TrainProgress,
    check_name,
    evaluate,
    list_checkpoints,
    load_checkpoint,
    read_checkpoint_info,
    save_checkpoint,
    scan_checkpoints,
    scheme_defaults,
    shipped_name,
    train,
)

REPO = Path(__file__).resolve().parents[1]
TINY = dict(d_model=16, n_heads=2, d_ff=32, vocab_size=10)
FEW = dict(steps=3, batch_size=4, length=12, lr=1e-2, seed=0)


def _tiny_result(scheme: str = "shaw", **overrides):
    config = ModelConfig(scheme=scheme, **{**TINY, **overrides})
    return train(config, Shift(2), **FEW)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """One tiny trained checkpoint on disk, copied fresh into each test that breaks it."""
    directory = tmp_path_factory.mktemp("ck")
    result = _tiny_result("t5", num_buckets=8, max_distance=16)
    save_checkpoint(result, "tiny", directory)
    return directory, result


@pytest.fixture
def broken(saved, tmp_path):
    directory, _ = saved
    shutil.copy(directory / "tiny.safetensors", tmp_path / "tiny.safetensors")
    return tmp_path


def _document(directory: Path) -> dict:
    with safe_open(str(directory / "tiny.safetensors"), framework="pt") as handle:
        return json.loads(handle.metadata()["relviz"])


def _save_with(directory: Path, tensors: dict) -> None:
    """Replace tiny's weights with ``tensors``, its description unchanged, so that the checks of
    the tensors (names, shapes, values) are what refuses them."""
    save_file(tensors, str(directory / "tiny.safetensors"), metadata={"relviz": json.dumps(_document(directory))})


# ---- training ----------------------------------------------------------------------------

def test_train_smoke_with_progress():
    seen: list[TrainProgress] = []
    result = train(ModelConfig(scheme="rope", **TINY), WindowMax(3), steps=10, batch_size=8, length=16,
                   lr=1e-2, seed=1, progress=seen.append)
    assert [p.step for p in seen] == list(range(1, 11))
    assert seen[-1].fraction == 1.0 and "step 10/10" in seen[-1].text
    assert 0.0 <= result.accuracy <= 1.0 and result.train_seconds > 0
    assert not result.model.training
    assert all(not p.requires_grad for p in result.model.parameters())


def test_training_is_deterministic_for_a_seed():
    torch.manual_seed(99)
    expected = torch.rand(2)
    torch.manual_seed(99)
    a = _tiny_result("skew")
    assert torch.equal(torch.rand(2), expected)  # the global RNG is left alone
    b = _tiny_result("skew")
    c = train(ModelConfig(scheme="skew", **TINY), Shift(2), **{**FEW, "seed": 1})
    sa, sb, sc = a.model.state_dict(), b.model.state_dict(), c.model.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert a.accuracy == b.accuracy
    assert not all(torch.equal(sa[k], sc[k]) for k in sa)


@pytest.mark.parametrize("scheme", list(SCHEMES))
def test_every_scheme_trains_saves_loads_and_runs(scheme, tmp_path):
    result = _tiny_result(scheme)
    save_checkpoint(result, f"{scheme}-tiny", tmp_path)
    checkpoint = load_checkpoint(f"{scheme}-tiny", tmp_path)
    assert checkpoint.info.scheme == scheme and checkpoint.info.accuracy == result.accuracy
    tokens = torch.randint(0, 10, (2, 12), generator=torch.Generator().manual_seed(5))
    with torch.inference_mode():
        want_logits, want_attn = result.model(tokens, need_weights=True)
        got_logits, got_attn = checkpoint.model(tokens, need_weights=True)
    assert torch.equal(got_logits, want_logits)
    assert all(torch.equal(x, y) for x, y in zip(got_attn, want_attn))
    run = checkpoint.run("0123456789")
    assert run.text == "0123456789" and len(run.predicted_text) == 10
    assert run.target_text == "··01234567"
    assert len(run.attentions) == 2 and run.attentions[0].shape == (2, 10, 10)


def test_train_validates_its_arguments():
    with pytest.raises(ValueError, match="vocab_size must equal the task's vocabulary size 10"):
        train(ModelConfig(vocab_size=12), Shift(), steps=1)
    with pytest.raises(ValueError, match="length must be at least 6 for shift"):
        train(ModelConfig(**TINY), Shift(5), steps=1, length=4)
    with pytest.raises(ValueError, match="scheme 'learned' has position embeddings for positions 0..7"):
        train(ModelConfig(scheme="learned", max_len=8, **TINY), Shift(2), steps=1, length=16)
    with pytest.raises(ValueError, match="lr must be a number"):
        train(ModelConfig(**TINY), Shift(2), steps=1, lr=0)


def test_evaluate_refuses_lengths_the_scheme_cannot_run(saved):
    result = _tiny_result("learned", max_len=12)
    assert 0 <= evaluate(result.model, Shift(2), length=12, seed=0, samples=8) <= 1
    with pytest.raises(ValueError, match=r"max_len=12\); a sequence of length 13"):
        evaluate(result.model, Shift(2), length=13, seed=0)


def test_run_text_reports_bad_characters(saved):
    directory, _ = saved
    checkpoint = load_checkpoint("tiny", directory)
    with pytest.raises(ValueError, match="found 'x' at position 1"):
        checkpoint.run("1x3")
    assert checkpoint.run("1").accuracy is None  # too short for shift(2): nothing counts


# ---- checkpoint files --------------------------------------------------------------------

def _edit_document(directory: Path, edit) -> None:
    data = _document(directory)
    edit(data)
    _write_document(directory, json.dumps(data))


def _write_document(directory: Path, text: str) -> None:
    path = directory / "tiny.safetensors"
    save_file(load_file(str(path)), str(path), metadata={"relviz": text})


def test_checkpoint_document_contents(saved):
    directory, result = saved
    data = _document(directory)
    for key in ("scheme", "scheme_params", "model", "task", "task_params", "train_length", "steps",
                "seed", "accuracy", "train_seconds", "relviz_version"):
        assert key in data
    assert data["scheme"] == "t5" and data["scheme_params"] == {"num_buckets": 8, "max_distance": 16}
    assert data["task"] == "shift" and data["task_params"] == {"s": 2}
    assert data["accuracy"] == result.accuracy
    assert oct((directory / "tiny.safetensors").stat().st_mode & 0o777) == "0o644"


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.pop("accuracy"), "the description lacks required keys: accuracy"),
    (lambda d: d.update(steps="many"), "'steps' must be an integer; got 'many'"),
    (lambda d: d.update(scheme="xpos"), "unknown scheme 'xpos'; known schemes: none, sinusoidal"),
    (lambda d: d.update(task="sort"), "unknown task 'sort'; known tasks: shift"),
    (lambda d: d["model"].update(scheme="shaw"), "'scheme' is 't5' but the model config says 'shaw'"),
    (lambda d: d["model"].update(d_model=17), "invalid model or task: d_model must be divisible by n_heads"),
    (lambda d: d.update(accuracy=1.5), "'accuracy' must be a fraction from 0 to 1"),
    (lambda d: d.update(format_version=9), "'format_version' 9 is not supported"),
])
def test_invalid_description_fields(broken, edit, message):
    _edit_document(broken, edit)
    with pytest.raises(ValueError, match=r"checkpoint 'tiny' \(.*tiny.safetensors\): " + re.escape(message)):
        load_checkpoint("tiny", broken)


def test_corrupt_description(broken):
    _write_document(broken, '{"format": "relviz-checkpoint", ')
    with pytest.raises(ValueError, match=r"tiny.safetensors\): the description in the header \(metadata 'relviz'\) "
                                         r"is not valid JSON"):
        load_checkpoint("tiny", broken)
    scan = scan_checkpoints(broken)
    assert scan.checkpoints == [] and "not valid JSON" in scan.problems["tiny"]


def test_wrong_tensor_shape(broken):
    path = broken / "tiny.safetensors"
    tensors = load_file(str(path))
    tensors["position.bias"] = torch.zeros(9, 2)
    _save_with(broken, tensors)
    with pytest.raises(ValueError, match=r"tiny.safetensors\): tensor 'position.bias' has shape \(9, 2\); "
                                         r"the model its description says needs \(8, 2\)"):
        load_checkpoint("tiny", broken)


def test_weights_of_another_scheme(broken):
    path = broken / "tiny.safetensors"
    tensors = load_file(str(path))
    del tensors["position.bias"]
    tensors["position.table"] = torch.zeros(64, 16)
    _save_with(broken, tensors)
    with pytest.raises(ValueError, match="do not match a 't5' model as its description says: missing "
                                         "tensors position.bias; unexpected tensors position.table"):
        load_checkpoint("tiny", broken)


def test_corrupt_or_missing_file(broken):
    path = broken / "tiny.safetensors"
    path.write_bytes(b"\x80\x04 this is a pickle, not safetensors")
    with pytest.raises(ValueError, match=r"tiny.safetensors\): not a valid safetensors file"):
        load_checkpoint("tiny", broken)
    assert "not a valid safetensors file" in scan_checkpoints(broken).problems["tiny"]
    path.unlink()
    with pytest.raises(ValueError, match="no checkpoint named 'tiny'"):
        load_checkpoint("tiny", broken)
    (broken / "tiny.json").write_text("{}")  # an old pair's JSON without its weights
    with pytest.raises(ValueError, match="the weights file tiny.safetensors is missing"):
        load_checkpoint("tiny", broken)
    assert "weights file tiny.safetensors is missing" in scan_checkpoints(broken).problems["tiny"]


def test_nan_weights(broken):
    path = broken / "tiny.safetensors"
    tensors = load_file(str(path))
    tensors["head.bias"][0] = float("nan")
    _save_with(broken, tensors)
    with pytest.raises(ValueError, match="tensor 'head.bias' holds NaN or infinite values"):
        load_checkpoint("tiny", broken)


def test_names_cannot_escape_the_directory(saved):
    directory, result = saved
    for bad in ("../tiny", "a/b", "", ".hidden", "x.json", "a" * 101, 3):
        with pytest.raises(ValueError, match="checkpoint name must be"):
            check_name(bad)
    with pytest.raises(ValueError, match="checkpoint name must be"):
        load_checkpoint("../ck/tiny", directory)
    with pytest.raises(ValueError, match="no checkpoint named 'nope' in .*; available: tiny"):
        load_checkpoint("nope", directory)


# ---- shipped checkpoints -----------------------------------------------------------------

@pytest.mark.parametrize("scheme", list(SCHEMES))
def test_shipped_checkpoint_reaches_its_recorded_accuracy(scheme):
    name = shipped_name(scheme)
    assert (CHECKPOINT_DIR / f"{name}.safetensors").stat().st_size < 1_000_000
    checkpoint = load_checkpoint(name)
    info = checkpoint.info
    assert info.scheme == scheme and info.task == make_task("shift", s=5)
    accuracy = checkpoint.evaluate(seed=12345, samples=256)
    assert accuracy == pytest.approx(info.accuracy, abs=0.03)
    if scheme != "none":  # none has no position information: it reaches what it honestly can
        assert info.accuracy >= 0.99


def test_shipped_set_is_complete_and_made_with_the_current_defaults():
    """`train --shipped` would rebuild exactly these: each scheme's default model and training."""
    names = {info.name for info in list_checkpoints()}
    assert {shipped_name(s) for s in SCHEMES} <= names
    for s in SCHEMES:
        info = read_checkpoint_info(CHECKPOINT_DIR / f"{shipped_name(s)}.safetensors")
        model_fields, training = scheme_defaults(s)
        assert info.model_config == ModelConfig(scheme=s, vocab_size=10, **model_fields)
        assert (info.steps, info.batch_size, info.train_length, info.lr, info.seed) == \
            (training["steps"], training["batch_size"], training["length"], training["lr"], training["seed"])


def test_scheme_defaults_depart_only_where_declared():
    for scheme in SCHEMES:
        model_fields, training = scheme_defaults(scheme)
        declared = SCHEME_DEFAULTS.get(scheme, {})
        base = ModelConfig()
        for name, value in model_fields.items():
            assert value == declared.get("model", {}).get(name, getattr(base, name))
        assert training == DEFAULT_TRAINING | declared.get("training", {})
    with pytest.raises(ValueError, match="unknown scheme"):
        scheme_defaults("absolute")


# ---- command line ------------------------------------------------------------------------

def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "relviz", *args], capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=120)


def test_cli_checkpoints_json():
    proc = _cli("checkpoints", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    by_name = {row["name"]: row for row in rows}
    for scheme in SCHEMES:
        row = by_name[shipped_name(scheme)]
        assert row["scheme"] == scheme and row["task"] == "shift" and row["train_length"] == 32
        assert 0 <= row["accuracy"] <= 1


def test_cli_evaluate_json_and_clear_failure():
    proc = _cli("evaluate", shipped_name("t5"), "--length", "48", "--seed", "3", "--samples", "64", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["length"] == 48 and result["accuracy"] > 0.9

    proc = _cli("evaluate", shipped_name("learned"), "--length", "65", "--json")
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert "max_len=64" in json.loads(proc.stdout)["error"] and "max_len=64" in proc.stderr


def test_cli_train_writes_a_checkpoint(tmp_path, capsys):
    code = main(["train", "--scheme", "t5", "--num-buckets", "8", "--max-distance", "16", "--task", "shift",
                 "--shift", "2", "--steps", "3", "--length", "10", "--batch-size", "4", "--d-model", "16",
                 "--heads", "2", "--d-ff", "32", "--seed", "4", "--name", "cli", "--out", str(tmp_path),
                 "--json", "--quiet"])
    assert code == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["name"] == "cli" and row["scheme_params"] == {"num_buckets": 8, "max_distance": 16}
    assert row["task_params"] == {"s": 2} and row["train_length"] == 10 and row["seed"] == 4
    assert (tmp_path / "cli.safetensors").exists()

    # a scheme's own defaults apply unless a flag says otherwise
    model_fields, training = scheme_defaults("alibi")
    assert main(["train", "--scheme", "alibi", "--steps", "1", "--length", "8", "--name", "a", "--out",
                 str(tmp_path), "--json", "--quiet"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    saved = read_checkpoint_info(tmp_path / "a.safetensors")
    assert saved.model_config.n_layers == model_fields["n_layers"] and saved.lr == training["lr"]
    assert saved.steps == 1 and row["train_length"] == 8
    assert main(["train", "--scheme", "alibi", "--layers", "1", "--steps", "1", "--length", "8", "--name", "b",
                 "--out", str(tmp_path), "--quiet"]) == 0
    assert read_checkpoint_info(tmp_path / "b.safetensors").model_config.n_layers == 1

    assert main(["train", "--scheme", "t5", "--clip", "3", "--steps", "1", "--out", str(tmp_path)]) == 2
    assert "--clip applies to scheme shaw, not t5" in capsys.readouterr().err
    assert main(["train", "--task", "shift", "--window", "3", "--steps", "1", "--out", str(tmp_path)]) == 2
    assert "--window applies to task window_max, not shift" in capsys.readouterr().err
    assert main(["train", "--scheme", "skew", "--bidirectional", "--steps", "1", "--out", str(tmp_path)]) == 2
    assert "causal only" in capsys.readouterr().err
