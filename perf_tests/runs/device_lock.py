"""The host-wide device lock: one case at a time measures this host's devices.

Every session on the host, whoever runs it, holds an exclusive flock on one file
(`<tmp>/rn50-perf-devices.lock`, or the file `RN50_PERF_DEVICE_LOCK` names) for the runs of a
case, so pytest-xdist workers, a CI matrix and two users' sessions take turns. The first session
creates the file writable by every user (whatever its umask); every session opens it without
following a symbolic link and locks it through a read-only descriptor, as flock needs no write
permission. The file stays: it is outside the user's folders and the next session needs it.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

DEVICE_LOCK_VARIABLE = "RN50_PERF_DEVICE_LOCK"
OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class DeviceLockError(Exception):
    """The device lock cannot be taken; one line naming the file and what to do."""


def device_lock_path() -> Path:
    return Path(os.environ.get(DEVICE_LOCK_VARIABLE)
                or Path(tempfile.gettempdir()) / "rn50-perf-devices.lock")


def open_device_lock(path: Path) -> int:
    """A read-only descriptor on the lock file, created (mode 0666) where it is missing."""
    try:
        while True:
            try:
                # An existing file is opened without O_CREAT: with fs.protected_regular, a sticky
                # /tmp refuses O_CREAT on a file another user owns, even one that exists.
                descriptor = os.open(path, OPEN_FLAGS)
                break
            except FileNotFoundError:
                pass
            try:
                descriptor = os.open(path, OPEN_FLAGS | os.O_CREAT | os.O_EXCL, 0o666)
            except FileExistsError:
                continue  # another session created it a moment ago: open theirs
            os.fchmod(descriptor, 0o666)  # the creator's umask took the others' write bit
            break
    except OSError as error:
        why = ("it is a symbolic link, which is not followed" if error.errno == errno.ELOOP
               else error.strerror)
        raise DeviceLockError(_cannot(path, why)) from None
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise DeviceLockError(_cannot(path, "it is not a regular file"))
    return descriptor


def check_device_lock(path: Path) -> None:
    """Before measuring: that the lock file can be opened (raises DeviceLockError)."""
    os.close(open_device_lock(path))


@contextlib.contextmanager
def holding_devices(path: Path, on_wait: Callable[[str], None]) -> Iterator[None]:
    """Hold the device lock; `on_wait` hears one line first if another session holds it."""
    descriptor = open_device_lock(path)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            on_wait(f"waiting for the device lock {path}: another rn50-perf session on this "
                    "host is measuring")
            fcntl.flock(descriptor, fcntl.LOCK_EX)
        except OSError as error:
            raise DeviceLockError(_cannot(path, error.strerror)) from None
        yield
    finally:
        os.close(descriptor)  # releases the lock


def _cannot(path: Path, why: str) -> str:
    return (f"device lock {path} cannot be taken ({why}); every rn50-perf session on this host "
            f"takes it to measure one case at a time: remove the file or set "
            f"{DEVICE_LOCK_VARIABLE} to another path")
