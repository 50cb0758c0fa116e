"""The shipped checkpoints give the same outputs, bit for bit, as when their outputs were recorded.

A refactor of the position code (one RoPE module, one ALiBi slope rule, ...) must not move a single
bit of what the shipped models compute. ``tests/data/shipped_outputs.npz`` holds, per shipped
checkpoint, the logits of the fused path and of the weights path (``need_weights=True``) and each
layer's attention weights on fixed token sequences, recorded with the code before the change. A change
that is meant to move them (a new arithmetic) records them again, and its commit says by how much
they moved:

    .venv/bin/python -m tests.test_shipped_outputs --record            # a new checkpoint: its outputs added
    .venv/bin/python -m tests.test_shipped_outputs --record --again    # a change meant to move them all

rope-shift's recorded outputs are those its training code computed: the arithmetic of commit 1afd79d, before issue
32 wrote RoPE's θ once (relviz.rope.math.default_inv_freq keeps both of θ's arithmetics; the toy runs the one it
was trained with, tests/test_rope.py), computed in a worktree of 1afd79d with this module's procedure.

The comparison is ``torch.equal``: float32 on this CPU build is deterministic run to run (the same
ops on the same shapes), so any difference is a change of arithmetic.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from relviz.training.checkpoints import list_checkpoints, load_checkpoint

RECORDED = Path(__file__).parent / "data" / "shipped_outputs.npz"
#: (batch, length) of the fixed inputs: the training length and the longest the models run at
SHAPES = ((1, 32), (1, 64))


def outputs(name: str) -> dict[str, np.ndarray]:
    """Every output of checkpoint ``name`` on the fixed inputs, keyed ``name/length/what``."""
    model = load_checkpoint(name).model
    generator = torch.Generator().manual_seed(1)
    out = {}
    for batch, length in SHAPES:
        tokens = torch.randint(0, model.config.vocab_size, (batch, length), generator=generator)   # [B, L]
        with torch.inference_mode():
            fused, _ = model(tokens)                                   # [B, L, V]
            logits, weights = model(tokens, need_weights=True)        # weights: per layer [B, H, L, L]
        out[f"{name}/{length}/fused"] = fused.numpy()
        out[f"{name}/{length}/logits"] = logits.numpy()
        for layer, w in enumerate(weights):
            out[f"{name}/{length}/weights{layer}"] = w[:, :, -2:].numpy()   # the last 2 queries: they see every key
    return out


def shipped() -> list[str]:
    return [info.name for info in list_checkpoints()]


def test_every_shipped_checkpoint_was_recorded() -> None:
    recorded = {key.split("/")[0] for key in np.load(RECORDED).files}
    assert recorded == set(shipped())


@pytest.mark.parametrize("name", shipped())
def test_shipped_outputs_are_bit_identical(name: str) -> None:
    recorded = np.load(RECORDED)
    now = outputs(name)
    assert set(now) == {key for key in recorded.files if key.startswith(f"{name}/")}
    for key, value in now.items():
        before = torch.from_numpy(recorded[key])
        after = torch.from_numpy(value)
        assert torch.equal(before, after), f"{key}: max |difference| {(before - after).abs().max().item():.3g}"


def record(*, again: bool = False) -> None:
    """Record the outputs of every shipped checkpoint not recorded yet; ``again``: re-record all of them (a
    change meant to move them). Without ``again`` an already recorded output that moved is refused."""
    RECORDED.parent.mkdir(exist_ok=True)
    before = dict(np.load(RECORDED)) if RECORDED.exists() else {}
    values: dict[str, np.ndarray] = {}
    for name in shipped():
        for key, value in outputs(name).items():
            if key in before and not again and not np.array_equal(before[key], value):
                raise SystemExit(f"{key} moved since it was recorded: re-record all with --record --again, "
                                 "and say why in the commit")
            values[key] = value
    np.savez_compressed(RECORDED, **values)
    print(f"recorded {len(values)} arrays of {len(shipped())} checkpoints in {RECORDED}")


if __name__ == "__main__" and sys.argv[1:2] == ["--record"]:
    record(again=sys.argv[2:] == ["--again"])
