"""Reading the old two-file checkpoints (format version 1), so that they still load and migrate.

Before format version 2 a checkpoint was a pair: ``<name>.safetensors`` (weights, whose metadata
repeated :data:`BOUND_KEYS` of the description, each as JSON text) and ``<name>.json`` (the
description plus ``weights_sha256``, the SHA-256 of the weights file). The hash and the repeated
keys bound the two files to each other. Nothing writes pairs any more; this module only reads
them, as strictly as before: a pair whose hash or repeated description disagrees is refused, and
one written before the binding (no hash) only with ``trust_unbound=True`` (the migrate command's
``--trust-unbound``, for pairs you know belong together).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from relviz.training.checkpoint_io import MAX_DOCUMENT_BYTES, Fail

JSON_SUFFIX = ".json"
VERSION = 1
HASH_KEY = "weights_sha256"
#: Keys of the JSON the old weights' metadata repeated (as JSON text).
BOUND_KEYS = ("format", "name", "scheme", "model", "task", "task_params")


def read_json(json_path: Path, fail: Fail) -> dict[str, Any]:
    """The pair's JSON document, size-bounded and parsed (its fields are checked by the caller)."""
    try:
        size = json_path.stat().st_size
        if size > MAX_DOCUMENT_BYTES:
            raise fail(f"the JSON file is {size} bytes; a checkpoint's JSON is at most {MAX_DOCUMENT_BYTES}")
        data = json.loads(json_path.read_text(encoding="utf-8"))
    except RecursionError as exc:
        raise fail("the JSON file is nested too deeply to be a checkpoint") from exc
    except FileNotFoundError as exc:
        raise fail("the JSON file does not exist") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise fail(f"cannot read the JSON file: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise fail(f"the JSON file is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise fail(f"the JSON must be an object; got {type(data).__name__}")
    return data


def check_hash_recorded(data: dict[str, Any], json_path: Path, fail: Fail, *, trust_unbound: bool) -> None:
    """The JSON must record its weights' hash (64 hex digits), unless the caller trusts the pair."""
    digest = data.get(HASH_KEY)
    if digest is None:
        if trust_unbound:
            return
        raise fail(f"the JSON records no {HASH_KEY!r}, so nothing binds it to its weights (written by an "
                   "older relviz). If you trust this pair, migrate it: python -m relviz checkpoints migrate "
                   f"{json_path.parent} --trust-unbound")
    if not (isinstance(digest, str) and len(digest) == 64 and all(c in "0123456789abcdef" for c in digest)):
        raise fail(f"{HASH_KEY!r} must be 64 lowercase hex digits; got {digest!r:.80}")


def check_binding(data: dict[str, Any], weights_path: Path, metadata: dict[str, str], fail: Fail,
                  *, trust_unbound: bool) -> None:
    """The weights are the ones the JSON was written with (hash) and describe what it describes
    (the repeated keys). An unbound pair passes only with ``trust_unbound``."""
    digest = data.get(HASH_KEY)
    if digest is None and trust_unbound:
        return
    try:
        actual = hashlib.sha256(weights_path.read_bytes()).hexdigest()
    except OSError as exc:
        raise fail(f"cannot read the weights file: {exc.strerror or exc}") from exc
    if actual != digest:
        raise fail(f"these weights are not the ones the JSON was written with (SHA-256 {actual[:16]}…, the "
                   f"JSON records {str(digest)[:16]}…): the files were edited, mixed up or left by an "
                   "interrupted save. Restore the pair or retrain it.")
    if not metadata:
        raise fail("the weights do not belong to this JSON: the weights file records no scheme, model or task")
    for key in BOUND_KEYS:
        if key not in metadata:
            raise fail(f"the weights do not belong to this JSON: the weights file does not record {key!r}")
        try:
            recorded = json.loads(metadata[key])
        except (ValueError, RecursionError):
            raise fail(f"the weights do not belong to this JSON: the weights file's {key!r} is not JSON") from None
        if recorded != data.get(key):
            raise fail(f"the weights do not belong to this JSON: the weights were saved for {key} = "
                       f"{json.dumps(recorded, sort_keys=True)[:200]}, the JSON says "
                       f"{json.dumps(data.get(key), sort_keys=True)[:200]}")


def upgraded(data: dict[str, Any], version: int) -> dict[str, Any]:
    """The pair's description as a single file's document: the same fields, without the binding
    (hash) and the name (a file's name is its checkpoint's name), at ``version``."""
    document = {key: value for key, value in data.items() if key not in (HASH_KEY, "name")}
    document["format_version"] = version
    return document
