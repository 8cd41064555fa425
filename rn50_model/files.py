"""Writing a file (JSON or text) so that a reader sees the old file or the new one, never half of
either.

The worker writes its records with it, and the suite its results, baseline and lock files: a
process killed mid-write leaves the old file as it was.
"""
from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TextIO


def write_json_atomically(path: Path, payload: dict) -> None:
    def write(handle) -> None:
        json.dump(payload, handle, indent=2, sort_keys=False)
        handle.write("\n")

    _replace_atomically(path, write)


def write_text_atomically(path: Path, text: str) -> None:
    _replace_atomically(path, lambda handle: handle.write(text))


def _replace_atomically(path: Path, write: Callable[[TextIO], object]) -> None:
    """`write(handle)` into a temporary file beside `path`, synced, then moved over `path`."""
    path = Path(path)
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp",
                                             dir=path.parent)
    try:
        with os.fdopen(descriptor, "w") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        if path.exists():
            os.chmod(temporary, path.stat().st_mode & 0o777)
        else:
            os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    _fsync_folder(path.parent)


def _fsync_folder(folder: Path) -> None:
    with contextlib.suppress(OSError):
        descriptor = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
