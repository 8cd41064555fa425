"""The host-wide device lock: one case at a time measures this host's devices.

Every session on the host, whoever runs it, holds an exclusive flock on one file
(`<tmp>/rn50-perf-devices.lock`, or the file `RN50_PERF_DEVICE_LOCK` names) for the runs of a
case, so pytest-xdist workers, a CI matrix and two users' sessions take turns. The first session
creates the file writable by every user (whatever its umask); every session opens it without
following a symbolic link and locks it through a read-only descriptor, as flock needs no write
permission. The file stays: it is outside the user's folders and the next session needs it.

The holder writes into the file who it is (pid, the session's command, what it measures, since
when), where the file lets it; a session that waits names the holder, checked against the
kernel's table of locks (/proc/locks) so that a record a crashed session left is not believed,
says again every few minutes how long it has waited, and how long once it holds the lock.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shlex
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from perf_tests.core.text import duration_text

DEVICE_LOCK_VARIABLE = "RN50_PERF_DEVICE_LOCK"
OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
# How often a waiting session tries the lock again, and how often it says it still waits.
POLL_S = 0.5
STILL_WAITING_S = 300
# A holder's command as the waiting line shows it, at most this long.
COMMAND_CHARACTERS = 160


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
def holding_devices(path: Path, on_wait: Callable[[str], None],
                    measuring: str = "") -> Iterator[None]:
    """Hold the device lock, saying in it what this session measures (`measuring`: a case id);
    where another session holds it, `on_wait` hears who, every STILL_WAITING_S how long this
    one has waited, and how long once it holds it."""
    descriptor = open_device_lock(path)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            wait_for_lock(descriptor, path, on_wait)
        except OSError as error:
            raise DeviceLockError(_cannot(path, error.strerror)) from None
        write_holder(path, measuring)
        yield
    finally:
        os.close(descriptor)  # releases the lock


def wait_for_lock(descriptor: int, path: Path, on_wait: Callable[[str], None]) -> None:
    """Try the lock every POLL_S until it is ours, naming its holder when the wait starts, when
    the holder changes and every STILL_WAITING_S."""
    started = time.monotonic()
    holder = lock_holder(path)
    on_wait(f"waiting for the device lock {path}: {holder.text()}")
    said = started
    while True:
        time.sleep(POLL_S)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            pass
        now = time.monotonic()
        current = lock_holder(path)
        if current != holder or now - said >= STILL_WAITING_S:
            on_wait(f"still waiting for the device lock after {duration_text(now - started)}: "
                    f"{current.text()}")
            holder, said = current, now
    on_wait(f"took the device lock after waiting {duration_text(time.monotonic() - started)}")


def write_holder(path: Path, measuring: str) -> None:
    """Who holds the lock now, written into its file for the sessions that wait; nothing where
    the file is not writable by this user (one an older version created 0644)."""
    record = {"pid": os.getpid(), "command": session_command(), "measuring": measuring,
              "since": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.ftruncate(descriptor, 0)
        os.write(descriptor, (json.dumps(record) + "\n").encode())
    except OSError:
        pass
    finally:
        os.close(descriptor)


def session_command() -> str:
    """The command of the session this process belongs to: its own, or a pytest-xdist
    worker's controller's (the worker's own is execnet's bootstrap)."""
    pid = os.getppid() if os.environ.get("PYTEST_XDIST_WORKER") else os.getpid()
    return command_of(pid) or "?"


def command_of(pid: int) -> str | None:
    """A process's command line, shortened to COMMAND_CHARACTERS; None where it is gone."""
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
    except OSError:
        return None
    command = shlex.join(word.decode(errors="replace") for word in words)
    return command if len(command) <= COMMAND_CHARACTERS else \
        command[:COMMAND_CHARACTERS - 3] + "..."


def lock_holders(path: Path) -> list[int] | None:
    """The pids the kernel says hold a lock on `path` (/proc/locks, waiters left out); None
    where the table cannot be read."""
    try:
        facts = os.stat(path)
        table = Path("/proc/locks").read_text()
    except OSError:
        return None
    where = f"{os.major(facts.st_dev):02x}:{os.minor(facts.st_dev):02x}:{facts.st_ino}"
    return [int(fields[4]) for fields in map(str.split, table.splitlines())
            if len(fields) > 5 and fields[1] == "FLOCK" and fields[5] == where]


@dataclass(frozen=True)
class Holder:
    """The session that holds the lock, as far as this host tells: its pid (None where it is
    not known), command, since when it holds it and what it measures."""
    pid: int | None
    command: str = "?"
    since: datetime | None = None
    measuring: str = ""

    def text(self) -> str:
        """'held by pid 4711 (python3 -m pytest perf_tests -k 1n1g) since 2026-11-29 10:02:03
        UTC (4 min 12 s ago), measuring 1n1g_fp32_b8'."""
        if self.pid is None:
            return "held by another rn50-perf session on this host"
        line = f"held by pid {self.pid} ({self.command})"
        if self.since is not None:
            ago = (datetime.now(timezone.utc) - self.since).total_seconds()
            line += f" since {self.since:%Y-%m-%d %H:%M:%S} UTC ({duration_text(ago)} ago)"
        return line + (f", measuring {self.measuring}" if self.measuring else "")


def lock_holder(path: Path) -> Holder:
    """The holder as it wrote itself into the file, where the kernel agrees that it holds the
    lock (or, without /proc/locks, that it runs); else the pid the kernel names."""
    holders = lock_holders(path)
    try:
        record = json.loads(Path(path).read_text() or "{}")
        pid, since = record["pid"], datetime.fromisoformat(record["since"])
    except (OSError, ValueError, TypeError, KeyError):
        pid = since = None
    if isinstance(pid, int) and (pid in holders if holders is not None else command_of(pid)):
        return Holder(pid, record.get("command") or "?", since, record.get("measuring") or "")
    if holders:
        return Holder(holders[0], command_of(holders[0]) or "?")
    return Holder(None)


def _cannot(path: Path, why: str) -> str:
    return (f"device lock {path} cannot be taken ({why}); every rn50-perf session on this host "
            f"takes it to measure one case at a time: remove the file or set "
            f"{DEVICE_LOCK_VARIABLE} to another path")
