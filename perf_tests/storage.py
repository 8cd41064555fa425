"""Writing JSON so that nothing is lost: atomic replacement and a lock for read-modify-write.

A reader sees the old file or the new one, never half of either; a session killed mid-write
leaves the old file as it was. Sessions that update the same file take its lock in turn, each
re-reading the file under the lock, so both sessions' entries land.
"""
from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path

from rn50_model.files import write_json_atomically

__all__ = ["locked", "write_json_atomically"]


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `<path>.lock` (a separate file, so replacing `path` is safe)."""
    lock_path = Path(path).with_name(Path(path).name + ".lock")
    with open(lock_path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
