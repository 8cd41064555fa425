"""Starting, watching and ending the process trees of one launch, so that none outlives its case.

Every process of a launch carries a token in its environment (`RN50_PERF_TOKEN`). A fork server
or a container runtime starts processes outside the launcher's tree, and srun or mpirun may
leave tasks behind, so process groups alone cannot find them all; the token can, by reading
`/proc/<pid>/environ` (a worker forked by a fork server, by its server's registry:
rn50_model.host_state.process_variables). After a launch ends, for any reason, every process on
this host that holds its token is killed.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from perf_tests.runs.stop_signals import raise_if_stopped
from rn50_model.host_state import TOKEN_VARIABLE, alive, holds_token, process_variables

POLL_SECONDS = 0.2
# After the first process of a launch fails, the others get this long to notice and write
# their own failure before they are ended.
FAILURE_GRACE_SECONDS = 10.0
TERMINATE_GRACE_SECONDS = 5.0


def new_token() -> str:
    return uuid.uuid4().hex


@dataclass
class Started:
    name: str
    popen: subprocess.Popen
    stdout_path: Path
    stderr_path: Path


@dataclass
class WaitResult:
    returncodes: dict[str, int | None]
    timed_out: bool
    elapsed_s: float
    live_at_timeout: list[str] = field(default_factory=list)


def processes_with_token(token: str) -> list[int]:
    """Pids on this host whose environment holds RN50_PERF_TOKEN=<token>."""
    own = os.getpid()
    return [int(entry) for entry in os.listdir("/proc")
            if entry.isdigit() and int(entry) != own and holds_token(Path("/"), int(entry), token)]


def describe_process(pid: int) -> str:
    """'rank 1 (pid 4242) stopped' for a worker; 'pid 4240 (python3) sleeping' otherwise."""
    states = {"R": "running", "S": "waiting", "D": "in I/O", "T": "stopped", "t": "stopped",
              "Z": "exited (zombie)"}
    try:
        with open(f"/proc/{pid}/stat") as handle:
            stat = handle.read()
    except OSError:
        return f"pid {pid} gone"
    environ = process_variables(Path("/"), pid)
    command = stat[stat.index("(") + 1: stat.rindex(")")]
    state = states.get(stat[stat.rindex(")") + 2], "in state " + stat[stat.rindex(")") + 2])
    rank = environ.get("RANK")
    if rank is not None and "LOCAL_RANK" in environ:
        return f"rank {rank} (pid {pid}) {state}"
    return f"pid {pid} ({command}) {state}"


def kill_token_processes(token: str, rounds: int = 5) -> list[int]:
    """SIGKILL everything holding the token, until none is left; returns the pids killed."""
    killed: list[int] = []
    for _ in range(rounds):
        pids = processes_with_token(token)
        alive_pids = [pid for pid in pids if alive(pid)]
        if not alive_pids:
            break
        for pid in alive_pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except ProcessLookupError:
                pass
        time.sleep(0.1)
    return killed


class ProcessTree:
    """The processes of one launch; use as a context manager so they end however the block ends."""

    def __init__(self, token: str | None = None) -> None:
        self.token = token or new_token()
        self.started: list[Started] = []

    def __enter__(self) -> "ProcessTree":
        return self

    def __exit__(self, *exc_info) -> None:
        self.terminate()

    def start(self, name: str, command: list[str], env: dict[str, str], cwd: Path,
              log_dir: Path) -> Started:
        env = dict(env)
        env[TOKEN_VARIABLE] = self.token
        stdout_path = log_dir / f"{name}.out"
        stderr_path = log_dir / f"{name}.err"
        with stdout_path.open("wb") as stdout, stderr_path.open("wb") as stderr:
            popen = subprocess.Popen(command, env=env, cwd=cwd, stdout=stdout, stderr=stderr,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        started = Started(name, popen, stdout_path, stderr_path)
        self.started.append(started)
        return started

    def wait(self, timeout: float) -> WaitResult:
        """Wait for all to exit, for the deadline, or for a failure plus a grace period."""
        begin = time.monotonic()
        deadline = begin + timeout
        failed_at = None
        while True:
            codes = {s.name: s.popen.poll() for s in self.started}
            if all(code is not None for code in codes.values()):
                return WaitResult(codes, False, time.monotonic() - begin)
            now = time.monotonic()
            if failed_at is None and any(code not in (None, 0) for code in codes.values()):
                failed_at = now
            if failed_at is not None and now - failed_at > FAILURE_GRACE_SECONDS:
                return WaitResult(codes, False, now - begin)
            if now >= deadline:
                live = [describe_process(pid) for pid in sorted(processes_with_token(self.token))]
                return WaitResult(codes, True, now - begin, live)
            raise_if_stopped()   # a Ctrl-C whose KeyboardInterrupt a finalizer swallowed
            running = next(s.popen for s in self.started if s.popen.returncode is None)
            try:   # back as it ends: a fixed sleep cost each run half a poll on average
                running.wait(timeout=min(POLL_SECONDS, max(deadline - now, 0.0)))
            except subprocess.TimeoutExpired:
                pass

    def terminate(self) -> None:
        """SIGTERM the launched process groups (srun and mpirun clean up their tasks on it),
        then SIGKILL whatever on this host still holds the token."""
        running = [s for s in self.started if s.popen.poll() is None]
        for started in running:
            _signal_group(started.popen.pid, signal.SIGTERM)
        deadline = time.monotonic() + TERMINATE_GRACE_SECONDS
        while running and time.monotonic() < deadline:
            running = [s for s in running if s.popen.poll() is None]
            time.sleep(POLL_SECONDS)
        for started in running:
            _signal_group(started.popen.pid, signal.SIGKILL)
        kill_token_processes(self.token)
        for started in self.started:
            try:
                started.popen.wait(timeout=TERMINATE_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                pass


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass
