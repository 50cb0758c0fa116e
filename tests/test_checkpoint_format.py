"""One safetensors file per checkpoint, its description in the header: round trip, atomic replace
(a save that dies before its rename leaves the previous checkpoint), hostile headers refused with a
message, and the old two-file checkpoints: they still load as strictly as before, and migrate to
one file with every tensor's bits unchanged."""
from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from relviz.__main__ import main
from relviz.model import SCHEMES, ModelConfig
from relviz.tasks import Shift
from relviz.training import (
    CHECKPOINT_DIR, list_checkpoints, load_checkpoint, migrate_checkpoint, read_checkpoint_info, save_checkpoint,
    scan_checkpoints, shipped_name, train,
)
from relviz.training import checkpoint_io

TINY = dict(d_model=16, n_heads=2, d_ff=32, vocab_size=10)


class Crash(Exception):
    pass


@pytest.fixture(scope="module")
def results():
    """Two different tiny models of the same shape: the old and the new content of one name."""
    config = ModelConfig(scheme="t5", num_buckets=8, max_distance=16, **TINY)
    return [train(config, Shift(2), steps=3, batch_size=4, length=12, lr=1e-2, seed=seed) for seed in (0, 1)]


def _header(path: Path) -> dict[str, str]:
    with safe_open(str(path), framework="pt") as handle:
        return handle.metadata() or {}


def _document(path: Path) -> dict:
    return json.loads(_header(path)["relviz"])


def _tensor_digests(path: Path) -> dict[str, tuple[str, tuple[int, ...], str]]:
    """Each tensor's dtype, shape and the SHA-256 of its bytes."""
    return {key: (str(t.dtype), tuple(t.shape), hashlib.sha256(t.contiguous().reshape(-1).view(torch.uint8)
                                                                .numpy().tobytes()).hexdigest())
            for key, t in load_file(str(path)).items()}


def _same(state: dict[str, torch.Tensor], result) -> bool:
    return all(torch.equal(state[key], value) for key, value in result.model.state_dict().items())


def _files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


# ---- the single file ----------------------------------------------------------------------

def test_save_writes_one_file_that_holds_its_description_and_loads_back(results, tmp_path):
    old, _ = results
    path = save_checkpoint(old, "ck", tmp_path)
    assert path == tmp_path / "ck.safetensors" and _files(tmp_path) == ["ck.safetensors"]
    assert set(_header(path)) == {"relviz"}
    document = _document(path)
    assert (document["format"], document["format_version"]) == ("relviz-checkpoint", 2)
    assert document["model"] == old.model_config.to_dict() and document["task_params"] == {"s": 2}
    assert document["seed"] == 0 and document["accuracy"] == old.accuracy and "name" not in document
    loaded = load_checkpoint("ck", tmp_path)
    assert loaded.info.legacy_json is None and loaded.info.path == path
    assert _same(loaded.model.state_dict(), old)
    assert oct(path.stat().st_mode & 0o777) == "0o644"


def test_a_save_that_dies_before_its_rename_leaves_the_previous_checkpoint(results, tmp_path, monkeypatch):
    old, new = results
    save_checkpoint(old, "ck", tmp_path)
    seen: list[Path] = []

    def crash(tmp: Path) -> None:
        seen.append(tmp)
        assert _document(tmp)["seed"] == new.seed  # the new file was complete: only the rename is missing
        raise Crash()

    monkeypatch.setattr(checkpoint_io, "before_replace", crash)
    with pytest.raises(Crash):
        save_checkpoint(new, "ck", tmp_path)
    assert seen, "the crash point was never reached"
    monkeypatch.undo()
    assert _same(load_checkpoint("ck", tmp_path).model.state_dict(), old)
    assert _files(tmp_path) == ["ck.safetensors"]
    save_checkpoint(new, "ck", tmp_path)
    assert _same(load_checkpoint("ck", tmp_path).model.state_dict(), new)


def test_a_temporary_file_left_by_a_killed_save_is_ignored_and_overwritten(results, tmp_path):
    old, new = results
    save_checkpoint(old, "ck", tmp_path)
    (tmp_path / "ck.safetensors.tmp").write_bytes(b"half a file")  # what kill -9 mid-write leaves
    assert [info.name for info in list_checkpoints(tmp_path)] == ["ck"] and not scan_checkpoints(tmp_path).problems
    assert _same(load_checkpoint("ck", tmp_path).model.state_dict(), old)
    save_checkpoint(new, "ck", tmp_path)
    assert _files(tmp_path) == ["ck.safetensors"]
    assert _same(load_checkpoint("ck", tmp_path).model.state_dict(), new)


def _rewrite(path: Path, metadata: dict[str, str]) -> None:
    save_file(load_file(str(path)), str(path), metadata=metadata)


def _raw_file(header: bytes, data: bytes = b"") -> bytes:
    return len(header).to_bytes(8, "little") + header + data


@pytest.fixture
def ck(results, tmp_path) -> Path:
    return save_checkpoint(results[0], "ck", tmp_path)


@pytest.mark.parametrize("case, message", [
    ("no description", "holds no relviz description (header metadata 'relviz') and there is no old-style ck.json"),
    ("not JSON", "the description in the header (metadata 'relviz') is not valid JSON"),
    ("a list", "the description must be a JSON object; got list"),
    ("over 1 MiB", "bytes; a checkpoint's is at most 1048576"),
    ("deep nesting", "nested too deeply"),
    ("version 1 in a header", "'format_version' 1 is not supported here"),
    ("a field wrong", "'steps' must be an integer; got 'many'"),
])
def test_a_bad_description_in_the_header_is_refused_with_a_message(ck, case, message):
    document = _document(ck)
    metadata = {
        "no description": {"format": "pt"},
        "not JSON": {"relviz": "{'scheme': 't5'"},
        "a list": {"relviz": "[]"},
        "over 1 MiB": {"relviz": json.dumps(document | {"padding": "x" * (1 << 20)})},
        "deep nesting": {"relviz": "[" * 100_000 + "]" * 100_000},
        "version 1 in a header": {"relviz": json.dumps(document | {"format_version": 1})},
        "a field wrong": {"relviz": json.dumps(document | {"steps": "many"})},
    }[case]
    _rewrite(ck, metadata)
    for read in (lambda: load_checkpoint("ck", ck.parent), lambda: read_checkpoint_info(ck)):
        with pytest.raises(ValueError, match=r"checkpoint 'ck' \(.*ck.safetensors\): .*" + re.escape(message)):
            read()
    assert scan_checkpoints(ck.parent).checkpoints == []


@pytest.mark.parametrize("case, message", [
    ("header length 2^62", "its header claims 4611686018427387904 bytes"),
    ("header length 5 MiB", "its header claims 5242880 bytes"),
    ("metadata value not a string", "not a valid safetensors file"),
    ("empty file", "too short for a header"),
    ("a pickle", "not a valid safetensors file"),
])
def test_a_hostile_or_malformed_header_is_refused_before_it_is_parsed(ck, case, message):
    if case == "header length 2^62":
        ck.write_bytes((2**62).to_bytes(8, "little") + b"{}")
    elif case == "header length 5 MiB":  # a file large enough to hold it: the claim alone is refused
        ck.write_bytes((5 << 20).to_bytes(8, "little") + b"{" + b" " * (5 << 20))
    elif case == "metadata value not a string":
        ck.write_bytes(_raw_file(b'{"__metadata__":{"relviz":{"scheme":"t5"}},'
                                 b'"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', b"\0" * 4))
    elif case == "empty file":
        ck.write_bytes(b"")
    else:
        ck.write_bytes(b"\x80\x04 this is a pickle, not safetensors")
    with pytest.raises(ValueError, match=r"checkpoint 'ck' \(.*ck.safetensors\): .*" + re.escape(message)):
        load_checkpoint("ck", ck.parent)


def test_a_file_over_the_size_limit_is_refused_without_reading_it(ck, monkeypatch):
    monkeypatch.setattr(checkpoint_io, "MAX_FILE_BYTES", ck.stat().st_size - 1)
    with pytest.raises(ValueError, match=rf"the file is {ck.stat().st_size} bytes; a checkpoint of the small "
                                         "model is far below"):
        load_checkpoint("ck", ck.parent)


# ---- the old pair: still loads, and migrates ------------------------------------------------

def write_old_pair(directory: Path, name: str, source: Path, *, bound: bool = True) -> None:
    """``name`` as relviz wrote checkpoints before format version 2 (an independent transcription of
    the old writer): the weights, whose metadata repeat six keys of the JSON as JSON text, and the
    JSON (version 1, with the checkpoint's name and the weights file's SHA-256)."""
    data = _document(source) | {"format_version": 1, "name": name}
    weights = directory / f"{name}.safetensors"
    metadata = {key: json.dumps(data[key], sort_keys=True)
                for key in ("format", "name", "scheme", "model", "task", "task_params")} if bound else None
    save_file(load_file(str(source)), str(weights), metadata=metadata)
    if bound:
        data["weights_sha256"] = hashlib.sha256(weights.read_bytes()).hexdigest()
    (directory / f"{name}.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def test_an_old_pair_loads_read_only_with_the_same_weights(tmp_path):
    shipped = CHECKPOINT_DIR / "t5-shift.safetensors"
    write_old_pair(tmp_path, "t5-shift", shipped)
    before = _files(tmp_path)
    old = load_checkpoint("t5-shift", tmp_path)
    assert old.info.legacy_json == tmp_path / "t5-shift.json"
    assert read_checkpoint_info(tmp_path / "t5-shift.json") == read_checkpoint_info(tmp_path / "t5-shift.safetensors")
    assert scan_checkpoints(tmp_path).checkpoints[0].summary()["format_version"] == 1
    reference = load_checkpoint("t5-shift").model.state_dict()
    assert all(torch.equal(old.model.state_dict()[k], v) for k, v in reference.items())
    assert _files(tmp_path) == before  # loading wrote nothing


def test_the_migrate_command_rewrites_old_pairs_as_single_files_bit_for_bit(tmp_path, capsys):
    names = ["none-shift", "fire-shift"]
    for name in names:
        write_old_pair(tmp_path, name, CHECKPOINT_DIR / f"{name}.safetensors")
    before = {name: _tensor_digests(tmp_path / f"{name}.safetensors") for name in names}
    documents = {name: json.loads((tmp_path / f"{name}.json").read_text()) for name in names}
    assert main(["checkpoints", "migrate", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines() == [f"migrated: {name}" for name in sorted(names)]
    assert _files(tmp_path) == sorted(f"{name}.safetensors" for name in names)
    for name in names:
        path = tmp_path / f"{name}.safetensors"
        assert _tensor_digests(path) == before[name]
        expected = {k: v for k, v in documents[name].items() if k not in ("weights_sha256", "name")}
        assert _document(path) == expected | {"format_version": 2}
        assert load_checkpoint(name, tmp_path).info.legacy_json is None
    assert main(["checkpoints", "migrate", str(tmp_path)]) == 0  # again: nothing left to do
    assert capsys.readouterr().out.splitlines() == [f"already one file: {name}" for name in sorted(names)]


def test_a_migration_that_would_change_a_tensor_replaces_nothing(tmp_path, monkeypatch):
    write_old_pair(tmp_path, "t5-shift", CHECKPOINT_DIR / "t5-shift.safetensors")
    weights_before = (tmp_path / "t5-shift.safetensors").read_bytes()
    import safetensors.torch

    real_save = safetensors.torch.save_file

    def flip_one_bit(tensors, filename, metadata=None):
        tensors = dict(tensors)
        key = sorted(tensors)[0]
        flipped = tensors[key].clone()
        flipped.view(-1).view(torch.int32)[0] ^= 1  # the last bit of the first value
        tensors[key] = flipped
        real_save(tensors, filename, metadata=metadata)

    monkeypatch.setattr(safetensors.torch, "save_file", flip_one_bit)
    with pytest.raises(ValueError, match="the rewritten tensors differ from the old pair's; nothing was replaced"):
        migrate_checkpoint("t5-shift", tmp_path)
    monkeypatch.undo()
    assert _files(tmp_path) == ["t5-shift.json", "t5-shift.safetensors"]
    assert (tmp_path / "t5-shift.safetensors").read_bytes() == weights_before
    assert load_checkpoint("t5-shift", tmp_path).info.legacy_json is not None


def test_a_migration_interrupted_after_its_rename_loads_and_finishes_when_rerun(tmp_path, monkeypatch):
    write_old_pair(tmp_path, "t5-shift", CHECKPOINT_DIR / "t5-shift.safetensors")
    from relviz.training import checkpoints

    monkeypatch.setattr(checkpoints, "_remove_old_json", lambda directory, name: (_ for _ in ()).throw(Crash()))
    with pytest.raises(Crash):
        migrate_checkpoint("t5-shift", tmp_path)
    monkeypatch.undo()
    assert _files(tmp_path) == ["t5-shift.json", "t5-shift.safetensors"]
    assert load_checkpoint("t5-shift", tmp_path).info.legacy_json is None  # the single file wins
    assert migrate_checkpoint("t5-shift", tmp_path) == "already one file; removed the old t5-shift.json"
    assert _files(tmp_path) == ["t5-shift.safetensors"]


def test_old_weights_from_another_pair_are_refused_by_the_hash(tmp_path):
    """none and sinusoidal weights have the same tensors and shapes: only the binding tells them apart."""
    for name in ("none-shift", "sinusoidal-shift"):
        write_old_pair(tmp_path, name, CHECKPOINT_DIR / f"{name}.safetensors")
    shutil.copy(tmp_path / "none-shift.safetensors", tmp_path / "sinusoidal-shift.safetensors")
    with pytest.raises(ValueError, match=r"sinusoidal-shift.safetensors\): these weights are not the ones the "
                                         r"JSON was written with"):
        load_checkpoint("sinusoidal-shift", tmp_path)
    with pytest.raises(ValueError, match="these weights are not the ones"):
        migrate_checkpoint("sinusoidal-shift", tmp_path)
    assert (tmp_path / "sinusoidal-shift.json").exists()


@pytest.mark.parametrize("edit, field", [
    (lambda d: d["model"].update(causal=False), "model"),
    (lambda d: d["task_params"].update(s=3), "task_params"),
])
def test_an_edited_old_json_is_refused_by_the_weights_metadata(tmp_path, edit, field):
    write_old_pair(tmp_path, "t5-shift", CHECKPOINT_DIR / "t5-shift.safetensors")
    path = tmp_path / "t5-shift.json"
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=rf"the weights do not belong to this JSON: the weights were saved for "
                                         rf"{field} = "):
        load_checkpoint("t5-shift", tmp_path)


def test_an_unbound_old_pair_migrates_only_when_trusted(tmp_path, capsys):
    write_old_pair(tmp_path, "t5-shift", CHECKPOINT_DIR / "t5-shift.safetensors", bound=False)
    with pytest.raises(ValueError, match=r"records no 'weights_sha256'.*python -m relviz checkpoints migrate .* "
                                         r"--trust-unbound"):
        load_checkpoint("t5-shift", tmp_path)
    assert main(["checkpoints", "migrate", str(tmp_path)]) == 1
    assert "--trust-unbound" in capsys.readouterr().err
    assert (tmp_path / "t5-shift.json").exists()
    assert main(["checkpoints", "migrate", str(tmp_path), "--trust-unbound"]) == 0
    shipped = CHECKPOINT_DIR / "t5-shift.safetensors"
    assert _tensor_digests(tmp_path / "t5-shift.safetensors") == _tensor_digests(shipped)
    assert _files(tmp_path) == ["t5-shift.safetensors"]


def test_saving_over_an_old_pair_leaves_one_file(results, tmp_path):
    write_old_pair(tmp_path, "ck", CHECKPOINT_DIR / "t5-shift.safetensors")
    save_checkpoint(results[0], "ck", tmp_path)
    assert _files(tmp_path) == ["ck.safetensors"]
    assert _same(load_checkpoint("ck", tmp_path).model.state_dict(), results[0])


# ---- the shipped checkpoints --------------------------------------------------------------

def test_the_shipped_checkpoints_are_single_files_that_load():
    assert sorted(p.name for p in CHECKPOINT_DIR.iterdir() if p.suffix != ".md") == \
        sorted(f"{shipped_name(s)}.safetensors" for s in SCHEMES)
    for scheme in SCHEMES:
        path = CHECKPOINT_DIR / f"{shipped_name(scheme)}.safetensors"
        assert _document(path)["format_version"] == 2 and _document(path)["scheme"] == scheme
        checkpoint = load_checkpoint(shipped_name(scheme))
        assert checkpoint.info.legacy_json is None and checkpoint.info.scheme == scheme
