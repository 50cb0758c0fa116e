"""A checkpoint's two files written as a pair, and bound to each other.

``<name>.safetensors`` holds the weights and, in its metadata, what they are (scheme, model
config, task and its parameters); ``<name>.json`` holds the same description plus the training
record and ``weights_sha256``, the SHA-256 of the weights file. The JSON's hash decides which
weights belong to it: a loader refuses weights whose hash differs, and weights whose metadata
describe another model or task.

Writing (:func:`write_pair`), single writer per name. Renaming two files is not atomic, so the
new JSON is first made durable under a side name and is the commit record:

1. weights -> ``<name>.safetensors.tmp``, fsync;
2. JSON (with the new weights' hash) -> ``<name>.json.pending``, fsync;
3. rename the weights into place, fsync the directory;
4. rename the pending JSON into place, fsync the directory.

A crash before 3 leaves the old pair (plus temporary files the next write removes); a crash
between 3 and 4 leaves the new weights, the old JSON (whose hash no longer matches) and the
complete pending JSON, whose hash does: :func:`resolve_json` then names the pending JSON, so the
loader reads the new pair, and the next write (or :func:`recover`) renames it into place. After
4, the new pair. Every state a crash can leave loads as the old pair or the new pair.
"""
from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

WEIGHTS_SUFFIX = ".safetensors"
WEIGHTS_TMP_SUFFIX = ".safetensors.tmp"
JSON_SUFFIX = ".json"
PENDING_SUFFIX = ".json.pending"
HASH_KEY = "weights_sha256"
#: JSON keys copied into the weights' metadata (as JSON text) and compared on load.
BOUND_KEYS = ("format", "name", "scheme", "model", "task", "task_params")


def _no_crash(step: str) -> None:
    """Called after each step of write_pair; tests replace it to simulate a crash there."""


after_step: Callable[[str], None] = _no_crash


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    return sha256_bytes(path.read_bytes())


def weights_metadata(data: dict[str, Any]) -> dict[str, str]:
    """The weights file's metadata: the JSON's BOUND_KEYS, each as canonical JSON text."""
    return {key: json.dumps(data[key], sort_keys=True) for key in BOUND_KEYS}


def metadata_mismatch(metadata: dict[str, str] | None, data: dict[str, Any]) -> str | None:
    """Why weights with ``metadata`` do not belong to the JSON ``data`` (None if they do)."""
    if not metadata:
        return "the weights file records no scheme, model or task"
    for key in BOUND_KEYS:
        if key not in metadata:
            return f"the weights file does not record {key!r}"
        try:
            recorded = json.loads(metadata[key])
        except ValueError:
            return f"the weights file's {key!r} is not JSON"
        if recorded != data.get(key):
            return (f"the weights were saved for {key} = {json.dumps(recorded, sort_keys=True)[:200]}, "
                    f"the JSON says {json.dumps(data.get(key), sort_keys=True)[:200]}")
    return None


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # a platform without directory descriptors
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _pending_hash(pending: Path) -> str | None:
    try:
        data = json.loads(pending.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    value = data.get(HASH_KEY) if isinstance(data, dict) else None
    return value if isinstance(value, str) else None


def resolve_json(json_path: Path) -> Path:
    """The JSON that belongs to the weights: ``json_path``, or the pending JSON of a write that
    was interrupted after its weights were renamed into place (its hash matches them)."""
    pending = json_path.with_name(json_path.stem + PENDING_SUFFIX)
    weights = json_path.with_suffix(WEIGHTS_SUFFIX)
    if pending.is_file() and weights.is_file():
        recorded = _pending_hash(pending)
        try:
            if recorded is not None and recorded == sha256_file(weights):
                return pending
        except OSError:
            pass
    return json_path


def recover(directory: Path, name: str) -> None:
    """Finish or discard an interrupted write of ``name``: roll a pending JSON that matches the
    weights forward into place; remove temporary files that belong to no pair."""
    json_path = directory / f"{name}{JSON_SUFFIX}"
    pending = directory / f"{name}{PENDING_SUFFIX}"
    if resolve_json(json_path) == pending:
        os.replace(pending, json_path)
        _fsync_dir(directory)
    for leftover in (pending, directory / f"{name}{WEIGHTS_TMP_SUFFIX}"):
        leftover.unlink(missing_ok=True)


def write_pair(directory: Path, name: str, tensors: dict[str, torch.Tensor], data: dict[str, Any]) -> Path:
    """Write weights and JSON as a bound pair (see the module docstring); return the JSON path.

    ``data`` is the JSON without the hash; the hash of the written weights is added.
    """
    from safetensors.torch import save_file

    recover(directory, name)
    weights, json_path = directory / f"{name}{WEIGHTS_SUFFIX}", directory / f"{name}{JSON_SUFFIX}"
    weights_tmp, pending = directory / f"{name}{WEIGHTS_TMP_SUFFIX}", directory / f"{name}{PENDING_SUFFIX}"
    save_file(tensors, str(weights_tmp), metadata=weights_metadata(data))
    os.chmod(weights_tmp, 0o644)  # rw-r--r-- like any file in the repo (safetensors writes owner-only)
    _fsync_file(weights_tmp)
    after_step("weights written")
    record = dict(data) | {HASH_KEY: sha256_file(weights_tmp)}
    with open(pending, "w", encoding="utf-8") as out:
        out.write(json.dumps(record, indent=2) + "\n")
        out.flush()
        os.fsync(out.fileno())
    os.chmod(pending, 0o644)
    after_step("json pending")
    os.replace(weights_tmp, weights)
    _fsync_dir(directory)
    after_step("weights renamed")
    os.replace(pending, json_path)
    _fsync_dir(directory)
    after_step("json renamed")
    return json_path
