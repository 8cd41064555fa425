"""A session's fork servers (rn50_model/fork_server.py), as the suite and its agent use them.

- `ServerFolder`, the launcher's: a fresh folder of one session's servers, which
  `SERVERS_VARIABLE` names in a launch's environment; `close()` ends them and their workers.
- `server_for`, the agent's: the server for a worker's environment, started on first use and
  waited for (its imports), so that nothing imports beside a run's window.
- `ForkedWorker`, the agent's: one worker, forked by a server, started and watched as a
  `subprocess.Popen` is (`pid`, `poll`, `wait`, `send_signal`, `kill`, `returncode`);
  `forked_or_none`, the agent's and runs/forked.py's: one, or None and a line saying why.

A server serves one environment: the worker's, less the variables set for one launch or one
rank (`PER_LAUNCH`), with its interpreter and folder (`server_key`), since an import may read
a variable (OpenMP reads its own at load). Where no server can fork a worker (none starts, or
it refuses), `ForkServerError` says why and the agent starts the worker fresh.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rn50_model.fork_server import OWNER_FILE, POLL_SECONDS, receive_message, send_message
from rn50_model.host_state import SERVERS_VARIABLE, TOKEN_VARIABLE, alive, registry_file

# Set for one launch, one rank or one case and read after the imports (by the worker,
# torch.distributed or the suite), or never (pytest's name of the test it runs, which the
# workers inherit): one server forks every rank of every run of a session. torchrun's own
# (TORCHELASTIC_*) are too.
PER_LAUNCH = frozenset({
    "RANK", "LOCAL_RANK", "GROUP_RANK", "ROLE_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
    "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT",
    "RN50_WORKERS_PER_HOST", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "PYTEST_CURRENT_TEST",
    TOKEN_VARIABLE})
START_TIMEOUT_SECONDS = 120.0
STOP_SECONDS = 5.0


class ForkServerError(Exception):
    """No server could fork this worker: the agent starts it fresh."""


def per_launch(name: str) -> bool:
    return name in PER_LAUNCH or name.startswith("TORCHELASTIC_")


class ServerFolder:
    """A session's servers: a fresh folder (its owner this process), made when a launch first
    names it, ended by `close()`."""

    def __init__(self) -> None:
        self._path: Path | None = None

    @property
    def path(self) -> Path:
        if self._path is None:
            self._path = Path(tempfile.mkdtemp(prefix="rn50-fork-"))
            registry_file(self._path, 0).parent.mkdir()
            (self._path / OWNER_FILE).write_text(str(os.getpid()))
        return self._path

    def close(self) -> None:
        """End every server of the folder (each kills its workers), then remove the folder."""
        if self._path is None:
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


def server_key(env: dict[str, str], cwd: str, executable: str = sys.executable) -> str:
    """The name of the server that serves `env` in `cwd` with `executable`."""
    served = sorted((key, value) for key, value in env.items() if not per_launch(key))
    text = json.dumps([executable, cwd, served])
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
        served = {name: value for name, value in env.items() if not per_launch(name)}
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
        except (OSError, EOFError, ValueError) as error:
            self._connection.close()
            raise ForkServerError(f"the fork server at {path} did not fork: {error}") from None
        if "pid" not in reply:
            self._connection.close()
            raise ForkServerError(reply.get("error", "the fork server refused"))
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


def forked_or_none(module: str, arguments: list[str], env: dict[str, str],
                   who: str) -> ForkedWorker | None:
    """`python -m <module> <arguments>` with `env` forked by the session's server for it, where
    `env` names a folder of them; None where it names none or no server can fork it (then
    `who`, the asking program, says why in one line on stderr, and starts it fresh)."""
    if not env.get(SERVERS_VARIABLE):
        return None
    try:
        return ForkedWorker(server_for(env, os.getcwd()), module, arguments, env, os.getcwd())
    except ForkServerError as error:
        print(f"{who}: {error}; {module} starts fresh", file=sys.stderr, flush=True)
        return None
