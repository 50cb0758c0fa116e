"""A default device that holds no values, for tests: relviz's core functions compute on the default device
(CUDA on a GPU machine) unless given one. With it set to 'meta', a tensor that silently went to the default
device fails the moment it meets a CPU tensor or numpy, so a test on a CPU-only machine proves what would hold
on a GPU one: the code it runs asks for the device it means."""
from __future__ import annotations

import pytest
import torch

import relviz._checks


def default_device_holds_no_values(monkeypatch: pytest.MonkeyPatch) -> None:
    """relviz's default device is 'meta' until the test ends (resolve_device(None) and relviz.default_device
    both read relviz._checks.default_device)."""
    monkeypatch.setattr(relviz._checks, "default_device", lambda: torch.device("meta"))
    assert relviz._checks.resolve_device(None).type == "meta"
