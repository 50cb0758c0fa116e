"""One checkpoint file on disk: written atomically, read without trusting it.

A checkpoint is one safetensors file. Its header's ``__metadata__`` (str -> str, safetensors'
own place for a description) holds the checkpoint's JSON document under :data:`METADATA_KEY`;
what that document must say is relviz.training.checkpoints' business, not this module's.

Writing: the file goes to ``<name>.safetensors.tmp`` in the same directory, is fsynced, then
renamed over ``<name>.safetensors`` (one rename is atomic) and the directory is fsynced. A
crash before the rename leaves the previous file untouched; after it, the new one. Single
writer per name: two writers of one name share the temporary file.

Reading: safetensors' ``safe_open`` only (no pickle, nothing in the file is run), behind cheap
guards on the file's size and its header's length, so that a hostile file is refused with a
message before safetensors parses it.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import torch

SUFFIX = ".safetensors"
TMP_SUFFIX = ".safetensors.tmp"
#: The header's metadata key holding the checkpoint's JSON document.
METADATA_KEY = "relviz"
#: The shipped files are 0.3-0.7 MB; anything near this is not a checkpoint of the small model.
MAX_FILE_BYTES = 64 << 20
#: A checkpoint's JSON document, in the header or (an old pair) in its own file.
MAX_DOCUMENT_BYTES = 1 << 20
#: The header: the JSON document (escaped once more inside the header) plus one short entry per tensor.
MAX_HEADER_BYTES = 4 << 20

Fail = Callable[[str], ValueError]


def _nothing(tmp: Path) -> None:
    """Called with the complete, fsynced temporary file just before the rename."""


#: Tests replace it to simulate a crash just before the rename.
before_replace: Callable[[Path], None] = _nothing


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


def write(path: Path, tensors: dict[str, torch.Tensor], document: str,
          check: Callable[[Path], None] | None = None) -> None:
    """Write ``tensors`` with ``document`` in the header to ``path``, atomically.

    ``check(tmp)``, if given, reads the complete temporary file back before it replaces
    ``path`` (a migration verifies the tensors bit for bit there); if it raises, ``path`` is
    left as it was.
    """
    from safetensors.torch import save_file

    tmp = path.with_name(path.name[: -len(SUFFIX)] + TMP_SUFFIX)
    try:
        save_file(tensors, str(tmp), metadata={METADATA_KEY: document})
        os.chmod(tmp, 0o644)  # rw-r--r-- like any file in the repo (safetensors writes owner-only)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        if check is not None:
            check(tmp)
        before_replace(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)  # after a failure; after the rename there is nothing to remove
    _fsync_dir(path.parent)


def read(path: Path, fail: Fail, *, tensors: bool) -> tuple[dict[str, str], dict[str, torch.Tensor]]:
    """The header's metadata (``{}`` if none) and, with ``tensors=True``, every tensor (copied
    out of the file's memory map, so a later change of the file cannot reach them).

    One ``safe_open`` reads both, so they come from the same file even if it is replaced
    meanwhile. Any problem is ``fail(problem)``.
    """
    from safetensors import safe_open

    if not path.exists():
        raise fail(f"the file {path.name} does not exist")
    if not path.is_file():
        raise fail(f"{path.name} is not a regular file")
    try:
        size = path.stat().st_size
        with open(path, "rb") as stream:
            prefix = stream.read(8)
    except OSError as exc:
        raise fail(f"cannot read the file: {exc.strerror or exc}") from exc
    if size > MAX_FILE_BYTES:
        raise fail(f"the file is {size} bytes; a checkpoint of the small model is far below {MAX_FILE_BYTES}")
    if len(prefix) < 8:
        raise fail(f"not a valid safetensors file: {size} bytes, too short for a header")
    header_length = int.from_bytes(prefix, "little")
    if header_length > min(MAX_HEADER_BYTES, size - 8):
        raise fail(f"not a valid safetensors file: its header claims {header_length} bytes (the file has "
                   f"{size}; a checkpoint's header is at most {MAX_HEADER_BYTES})")
    try:
        with safe_open(str(path), framework="pt") as handle:
            metadata = handle.metadata() or {}
            loaded = {key: handle.get_tensor(key).clone() for key in handle.keys()} if tensors else {}
    except Exception as exc:  # safetensors raises its own error types for corrupt headers and data
        raise fail(f"not a valid safetensors file: {exc}") from exc
    return dict(metadata), loaded
