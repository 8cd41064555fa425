"""Writing JSON so that nothing is lost: atomic replacement and a lock for read-modify-write.

A reader sees the old file or the new one, never half of either; a session killed mid-write
leaves the old file as it was. Sessions that update the same file take its lock in turn, each
re-reading the file under the lock, so both sessions' entries land.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from rn50_model.files import write_json_atomically

__all__ = ["locked", "write_json_atomically"]


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `<path>.lock` (a separate file, so replacing `path` is safe).

    The lock file is removed on release, so none is left beside the user's files. That is safe
    because a waiter that wakes on a lock file already removed (or replaced by a newer one)
    lets go and takes the current one: only the file at the path counts.
    """
    lock_path = Path(path).with_name(Path(path).name + ".lock")
    while True:
        descriptor = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                             0o666)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
            if _is_at(descriptor, lock_path):
                break
        except BaseException:
            os.close(descriptor)
            raise
        os.close(descriptor)
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock_path)
        os.close(descriptor)  # releases the lock


def _is_at(descriptor: int, path: Path) -> bool:
    """Whether the open file is still the one at `path`."""
    try:
        at_path = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    held = os.fstat(descriptor)
    return (held.st_dev, held.st_ino) == (at_path.st_dev, at_path.st_ino)
