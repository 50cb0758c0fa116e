"""Checkpoints that cannot lie: the weights and the JSON are bound (hash, metadata) and written so
that a crash at any step leaves the old pair or the new pair, never a mix that loads silently."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from relviz.model import ModelConfig
from relviz.tasks import Shift
from relviz.training import CHECKPOINT_DIR, load_checkpoint, read_checkpoint_info, save_checkpoint, train
from relviz.training import checkpoint_files as files
from relviz.training.checkpoints import bind_checkpoint

TINY = dict(d_model=16, n_heads=2, d_ff=32, vocab_size=10)
STEPS = ["weights written", "json pending", "weights renamed", "json renamed"]


class Crash(Exception):
    pass


@pytest.fixture(scope="module")
def results():
    """Two different tiny models of the same shape: the old and the new content of one name."""
    config = ModelConfig(scheme="t5", num_buckets=8, max_distance=16, **TINY)
    return [train(config, Shift(2), steps=3, batch_size=4, length=12, lr=1e-2, seed=seed) for seed in (0, 1)]


def _state(directory: Path) -> dict[str, torch.Tensor]:
    return load_checkpoint("ck", directory).model.state_dict()


def _same(state, result) -> bool:
    return all(torch.equal(state[key], value) for key, value in result.model.state_dict().items())


@pytest.mark.parametrize("step", STEPS)
def test_a_crash_at_any_step_leaves_the_old_or_the_new_pair(step, results, tmp_path, monkeypatch):
    old, new = results
    save_checkpoint(old, "ck", tmp_path)

    def crash(at: str) -> None:
        if at == step:
            raise Crash(at)

    monkeypatch.setattr(files, "after_step", crash)
    with pytest.raises(Crash):
        save_checkpoint(new, "ck", tmp_path)
    monkeypatch.setattr(files, "after_step", files._no_crash)
    state = _state(tmp_path)
    committed = STEPS.index(step) >= STEPS.index("weights renamed")
    assert _same(state, new if committed else old), f"crash after {step!r}: neither pair"
    info = read_checkpoint_info(tmp_path / "ck.json")
    assert info.seed == (new if committed else old).seed  # the JSON that loads is the weights' own
    # the next write (or recover) cleans up; no temporary file survives it
    save_checkpoint(old, "ck", tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck.json", "ck.safetensors"]
    assert _same(_state(tmp_path), old)


def test_recover_rolls_a_committed_write_forward_and_drops_an_uncommitted_one(results, tmp_path, monkeypatch):
    old, new = results
    save_checkpoint(old, "ck", tmp_path)
    monkeypatch.setattr(files, "after_step", lambda at: (_ for _ in ()).throw(Crash()) if at == "weights renamed"
                        else None)
    with pytest.raises(Crash):
        save_checkpoint(new, "ck", tmp_path)
    files.recover(tmp_path, "ck")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck.json", "ck.safetensors"]
    assert _same(_state(tmp_path), new)
    monkeypatch.setattr(files, "after_step", lambda at: (_ for _ in ()).throw(Crash()) if at == "json pending"
                        else None)
    with pytest.raises(Crash):
        save_checkpoint(old, "ck", tmp_path)
    files.recover(tmp_path, "ck")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck.json", "ck.safetensors"]
    assert _same(_state(tmp_path), new)


def _copy_shipped(tmp_path: Path, *names: str) -> Path:
    for name in names:
        for suffix in (".json", ".safetensors"):
            shutil.copy(CHECKPOINT_DIR / f"{name}{suffix}", tmp_path / f"{name}{suffix}")
    return tmp_path


def test_weights_from_another_pair_are_refused_by_the_hash(tmp_path):
    """none and sinusoidal weights have the same tensors and shapes: only the binding tells them apart."""
    _copy_shipped(tmp_path, "none-shift", "sinusoidal-shift")
    shutil.copy(tmp_path / "none-shift.safetensors", tmp_path / "sinusoidal-shift.safetensors")
    with pytest.raises(ValueError, match=r"sinusoidal-shift.safetensors\): these weights are not the ones the "
                                         r"JSON was written with"):
        load_checkpoint("sinusoidal-shift", tmp_path)


def test_weights_of_one_scheme_under_another_scheme_s_json_are_refused_by_the_metadata(tmp_path):
    """Even with the hash re-recorded (a tool that 'fixes' the JSON), the weights say what they are."""
    _copy_shipped(tmp_path, "none-shift", "sinusoidal-shift")
    shutil.copy(tmp_path / "none-shift.safetensors", tmp_path / "sinusoidal-shift.safetensors")
    path = tmp_path / "sinusoidal-shift.json"
    data = json.loads(path.read_text())
    data[files.HASH_KEY] = files.sha256_file(tmp_path / "sinusoidal-shift.safetensors")
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=r"the weights do not belong to this JSON: the weights were saved for "
                                         r"name = \"none-shift\""):
        load_checkpoint("sinusoidal-shift", tmp_path)


@pytest.mark.parametrize("name, edit, field", [
    ("t5-shift", lambda d: d["model"].update(causal=False), "model"),
    ("t5-shift", lambda d: (d["model"].update(max_distance=64), d["scheme_params"].update(max_distance=64)),
     "model"),
    ("shaw-shift", lambda d: d["task_params"].update(s=3), "task_params"),
    ("rope-shift", lambda d: d.update(scheme="none", scheme_params={}) or d["model"].update(scheme="none"), "scheme"),
])
def test_edits_of_the_description_are_refused(name, edit, field, tmp_path):
    _copy_shipped(tmp_path, name)
    path = tmp_path / f"{name}.json"
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=rf"the weights do not belong to this JSON: the weights were saved for "
                                         rf"{field} = "):
        load_checkpoint(name, tmp_path)


def test_an_unbound_pair_is_refused_with_the_command_that_binds_it(tmp_path):
    _copy_shipped(tmp_path, "t5-shift")
    path = tmp_path / "t5-shift.json"
    data = json.loads(path.read_text())
    del data[files.HASH_KEY]
    path.write_text(json.dumps(data))
    before = load_checkpoint("t5-shift", CHECKPOINT_DIR).model.state_dict()
    with pytest.raises(ValueError, match=r"records no 'weights_sha256'.*python -m relviz checkpoints --bind"):
        load_checkpoint("t5-shift", tmp_path)
    assert bind_checkpoint(path) is True and bind_checkpoint(path) is False
    after = load_checkpoint("t5-shift", tmp_path).model.state_dict()
    assert all(torch.equal(after[key], value) for key, value in before.items())


def test_the_shipped_pairs_are_bound():
    for json_path in sorted(CHECKPOINT_DIR.glob("*.json")):
        info = read_checkpoint_info(json_path)
        assert info.weights_sha256 == files.sha256_file(info.weights_path), json_path.name
