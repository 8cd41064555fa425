"""A session's fork servers (rn50_model/fork_server.py), as the suite and its agent use them.

- `ServerFolder`, the launcher's: a fresh folder of one session's servers, which
  `SERVERS_VARIABLE` names in a launch's environment; `close()` ends them and their workers.
  Where the session's own environment names a folder whose owner still runs (a process that
  starts many sessions of one stack, as the suite's tests do), the session uses its servers
  and leaves them to their owner (`for_session`).
- `server_for`, the agent's: the server for a worker's environment, started on first use and
  waited for (its imports), so that nothing imports beside a run's window.
- `ForkedWorker`, the agent's: one worker, forked by a server, started and watched as a
  `subprocess.Popen` is (`pid`, `poll`, `wait`, `send_signal`, `kill`, `returncode`);
  `forked_or_none`, the agent's: one, or None and a line saying why.

A server serves one environment: the worker's, less the variables set for one launch or one
rank (`PER_LAUNCH`) and those no import of the server reads (the suite's own that a run reads,
`READ_BY_THE_RUN`, and pytest's), with its interpreter and folder (`server_key`), since an
import may read a variable (OpenMP reads its own at load; torch's imports read HOME). A server
whose imported files changed on disk retires, and the agent asks a new one. Where no server can
fork a worker (none starts, or it refuses), `ForkServerError` says why and the agent starts the
worker fresh.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import resource
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rn50_model.fork_server import (IDLE_FILE, OWNER_FILE, POLL_SECONDS, receive_message,
                                   send_message)
from perf_tests.runs.device_lock import DEVICE_LOCK_VARIABLE
from rn50_model.host_state import (SERVERS_VARIABLE, TOKEN_VARIABLE, alive, process_mark,
                                   registry_file, still_runs)

# Set for one launch, one rank or one case and read after the imports (by the worker,
# torch.distributed or the suite), or never (pytest's name of the test it runs, which the
# workers inherit): one server forks every rank of every run of a session. torchrun's own
# (TORCHELASTIC_*) are too, though no launcher of the suite starts torchrun now.
PER_LAUNCH = frozenset({
    "RANK", "LOCAL_RANK", "GROUP_RANK", "ROLE_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
    "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT",
    "RN50_WORKERS_PER_HOST", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "PYTEST_CURRENT_TEST",
    TOKEN_VARIABLE})
# The suite's variables that differ between sessions and that only a run reads, when it runs:
# the device lock (the session), the fault (rn50_model/faults.py) and the data cache
# (rn50_model/dataset.py). Any other, RN50_ or not, may be read at import (a site
# customization may read one) and is the server's environment.
READ_BY_THE_RUN = frozenset({DEVICE_LOCK_VARIABLE, "RN50_FAULT", "RN50_DATA_CACHE"})
START_TIMEOUT_SECONDS = 120.0
STOP_SECONDS = 5.0


class ForkServerError(Exception):
    """No server could fork this worker: the agent starts it fresh (`gone`: the server retired,
    its imports changed on disk, or ended idle as the agent came: a new server may)."""

    def __init__(self, message: str, gone: bool = False) -> None:
        super().__init__(message)
        self.gone = gone


def per_launch(name: str) -> bool:
    return name in PER_LAUNCH or name.startswith("TORCHELASTIC_")


def read_after_imports(name: str) -> bool:
    """Whether no import of the server reads the variable, so that one server serves sessions
    that differ in it: one launch's or rank's, the suite's own that a run reads in its own
    environment (`READ_BY_THE_RUN`), and pytest's. tests/test_fork_server.py tracks what the
    imports read."""
    return per_launch(name) or name in READ_BY_THE_RUN or name.startswith("PYTEST_")


class ServerFolder:
    """A session's servers: a fresh folder (its owner this process), made when a launch first
    names it, ended by `close()`; or `kept`, the folder of another process that outlives the
    session (its owner ends them)."""

    def __init__(self, kept: Path | None = None, idle_seconds: float | None = None) -> None:
        """`idle_seconds`: each server of a fresh folder ends once it has forked nothing and
        had no worker for that long (a folder kept for many sessions: the servers of an
        environment only some of them had, about 300 MB each, do not pile up)."""
        self._path: Path | None = kept
        self.kept = kept is not None
        self.idle_seconds = idle_seconds

    @classmethod
    def for_session(cls) -> ServerFolder:
        """The folder `SERVERS_VARIABLE` names in this process's environment where its owner
        still runs (a process that runs many sessions on one stack, as the suite's tests do:
        one server's imports serve them all), else a fresh one."""
        named = os.environ.get(SERVERS_VARIABLE)
        if named:
            try:
                if still_runs((Path(named) / OWNER_FILE).read_text()):
                    return cls(Path(named))
            except OSError:
                pass
        return cls()

    @property
    def path(self) -> Path:
        if self._path is None:
            self._path = Path(tempfile.mkdtemp(prefix="rn50-fork-"))
            registry_file(self._path, 0).parent.mkdir()
            (self._path / OWNER_FILE).write_text(process_mark(os.getpid()))
            if self.idle_seconds is not None:
                (self._path / IDLE_FILE).write_text(str(self.idle_seconds))
        return self._path

    def close(self) -> None:
        """End every server of the folder (each kills its workers), then remove the folder;
        a kept folder's are its owner's to end."""
        if self._path is None or self.kept:
            return
        servers = []
        for pid_file in self.path.glob("*.pid"):
            try:
                pid = int(pid_file.read_text())
                os.kill(pid, signal.SIGTERM)
                servers.append(pid)
            except (OSError, ValueError):
                continue
        deadline = time.monotonic() + STOP_SECONDS
        while servers and time.monotonic() < deadline:
            servers = [pid for pid in servers if alive(pid)]
            time.sleep(POLL_SECONDS)
        shutil.rmtree(self.path, ignore_errors=True)


# What a forked worker takes from its server, not from the agent that asked for it, in
# /proc/self/status: its file mode mask, user and groups, capabilities, privileges and CPUs.
INHERITED_STATUS = ("Umask", "Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd",
                    "CapAmb", "NoNewPrivs", "Seccomp", "Cpus_allowed_list", "Mems_allowed_list")
INHERITED_LIMITS = ("RLIMIT_AS", "RLIMIT_CORE", "RLIMIT_CPU", "RLIMIT_DATA", "RLIMIT_FSIZE",
                    "RLIMIT_MEMLOCK", "RLIMIT_NOFILE", "RLIMIT_NPROC", "RLIMIT_STACK")


def process_context() -> list:
    """This process's place on the host, as a process it forked would have it: its namespaces
    (a test host's network), its cgroup (a CPU quota), its CPUs, priority (`nice`), limits,
    user and capabilities (`setpriv`). A worker forked by a server started elsewhere would run
    with the server's: a session's servers serve only agents of its own context."""
    context: list = []
    try:
        for name in sorted(os.listdir("/proc/self/ns")):
            context.append(os.readlink(f"/proc/self/ns/{name}"))
        context.append(Path("/proc/self/cgroup").read_text())
        context.extend(line for line in Path("/proc/self/status").read_text().splitlines()
                       if line.split(":", 1)[0] in INHERITED_STATUS)
    except OSError:
        context.append(os.getpid())   # unknown: a server of its own
    context.append(os.getpriority(os.PRIO_PROCESS, 0))
    context.extend(resource.getrlimit(getattr(resource, name)) for name in INHERITED_LIMITS)
    return context


def server_key(env: dict[str, str], cwd: str, executable: str = sys.executable,
               context: list | None = None) -> str:
    """The name of the server that serves `env` in `cwd` with `executable`, for an agent in
    `context` (this process's, `process_context()`, where not given)."""
    served = sorted((key, value) for key, value in env.items() if not read_after_imports(key))
    text = json.dumps([executable, cwd, served,
                       process_context() if context is None else context])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def server_for(env: dict[str, str], cwd: str) -> Path:
    """The socket of the server for `env` (a worker's) in `cwd`, started and waited for where
    there is none yet; ForkServerError where none can serve."""
    folder = Path(env[SERVERS_VARIABLE])
    key = server_key(env, cwd)
    path = folder / f"{key}.sock"
    try:
        lock = open(folder / f"{key}.lock", "w")
    except OSError as error:
        raise ForkServerError(f"fork server folder {folder}: {error.strerror}") from None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.exists():
            return path
        failed = folder / f"{key}.failed"
        if failed.exists():
            raise ForkServerError(failed.read_text().strip())
        # Its /proc environ is its workers': the folder there finds their registry (host_state)
        served = {name: value for name, value in env.items()
                  if name == SERVERS_VARIABLE or not read_after_imports(name)}
        with open(folder / f"{key}.log", "wb") as log:
            server = subprocess.Popen(
                [sys.executable, "-m", "rn50_model.fork_server", "--socket", str(path)],
                env=served, cwd=cwd, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while not path.exists():
            if server.poll() is not None or time.monotonic() > deadline:
                if server.poll() is None:
                    server.kill()
                why = (folder / f"{key}.log").read_text(errors="replace").strip().splitlines()
                reason = f"the fork server did not start: {why[-1] if why else 'no output'}"
                failed.write_text(reason + "\n")
                raise ForkServerError(reason)
            time.sleep(POLL_SECONDS)
        return path


class ForkedWorker:
    """`python -m <module> <arguments>` with `env`, forked by the server at `path`, its standard
    streams this process's; watched as a `subprocess.Popen` is."""

    def __init__(self, path: Path, module: str, arguments: list[str], env: dict[str, str],
                 cwd: str) -> None:
        self.returncode: int | None = None
        self._connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._connection.connect(str(path))
            send_message(self._connection, {"module": module, "arguments": arguments,
                                            "env": env, "cwd": cwd}, [0, 1, 2])
            reply, _ = receive_message(self._connection)
        except (OSError, EOFError, ValueError) as error:   # it may have ended as we came
            self._connection.close()
            raise ForkServerError(f"the fork server at {path} did not fork: {error}",
                                  gone=True) from None
        if "pid" not in reply:
            self._connection.close()
            raise ForkServerError(reply.get("error", "the fork server refused"),
                                  gone=reply.get("retired", False))
        self.pid: int = reply["pid"]

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self._connection], [], [], 0)[0]:
            self._read_status()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not select.select([self._connection], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(f"forked worker {self.pid}", timeout)
            self._read_status()
        return self.returncode

    def _read_status(self) -> None:
        try:
            self.returncode = receive_message(self._connection)[0]["returncode"]
        except (OSError, EOFError, ValueError, KeyError):
            self.returncode = -signal.SIGKILL   # the server went: so did the worker
        self._connection.close()

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, signum)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def forked_or_none(module: str, arguments: list[str],
                   env: dict[str, str]) -> ForkedWorker | None:
    """`python -m <module> <arguments>` with `env` forked by the session's server for it, where
    `env` names a folder of them; None where it names none or no server can fork it (then the
    agent, which asks, says why in one line on stderr, and starts it fresh)."""
    if not env.get(SERVERS_VARIABLE):
        return None
    why = None
    for _ in range(2):   # a server that retired or ended idle: the next is a new one
        try:
            return ForkedWorker(server_for(env, os.getcwd()), module, arguments, env,
                                os.getcwd())
        except ForkServerError as error:
            why = error
            if not error.gone:
                break
    print(f"agent: {why}; {module} starts fresh", file=sys.stderr, flush=True)
    return None
