"""A fork server: a process that imports torch once and forks a session's workers from itself.

A worker in a fresh interpreter spends about 2 s of a CPU host's run importing torch and
`torch._dynamo` (which the optimizer imports on its first use) before it builds anything
(docs/measurement.md, "Where a run's time goes"). A fork server imports them once, then forks
each worker it is asked for: every run is still a new process, with its own pid, its launch's
environment, folder and standard streams, that has run nothing but imports before it starts;
nothing a run does reaches the next one. The suite's side (a session's folder of servers, the
agent's forked worker) is perf_tests/runs/fork_servers.py.

A request, on the server's Unix socket: the module and its arguments, the environment and the
folder, and the three standard streams' descriptors; the reply, the worker's pid, then, when it
ends, its returncode (as Popen's: minus the signal that ended it). When the requesting agent's
connection closes first, its worker is killed. Each worker's token and rank are kept in the
folder (rn50_model/host_state.py, `registry_file`; the worker writes them first thing, the
server removes them when it reaps it): a forked worker's /proc environ is its server's. It ends
on SIGTERM, when its socket is gone or the process that owns its folder has ended, its workers
with it. Before each fork it checks that every file it imported is as it was (an upgraded
package, an edited source): where one changed it retires, forks no more (the agent asks a new
server) and ends with its last worker.

Where a fork could not be safe it is refused and the worker starts fresh: a thread still runs
after the imports' own fork handlers ran (OpenBLAS's pool, under numpy, stops in its own), or,
in the forked worker, CUDA was initialized before the fork (then it becomes a fresh
interpreter itself, by exec).

    python -m rn50_model.fork_server --socket FOLDER/KEY.sock
"""
from __future__ import annotations

import argparse
import json
import os
import select
import signal
import socket
import struct
import sys
import time
from pathlib import Path

from .host_state import TOKEN_VARIABLE, registry_file, still_runs

OWNER_FILE = "owner"   # in the servers' folder: the owning process (host_state.process_mark)
IDLE_FILE = "idle-seconds"   # in a folder kept for many sessions: when an idle server ends
REGISTERED = ("RANK", "LOCAL_RANK", TOKEN_VARIABLE)   # what the folder keeps of each worker
# What the server imports before it serves: the probe, which the session's first request is
# (torch under it); then, before it forks the first process that runs anything else, the worker
# and what its first steps import (torch._dynamo: the optimizer's first step), which a session
# that only probes (a usage error found after the probe, every case skipped) never pays for.
PROBE_MODULES = ("rn50_model.environment",)
WORKER_MODULES = ("rn50_model.worker", "torch._dynamo")
POLL_SECONDS = 0.05
FORKED = False   # True in a worker this server forked: its record says so (startup.py)
OWNER_POLL_SECONDS = 0.5


def send_message(connection: socket.socket, message: dict, fds: list[int] = ()) -> None:
    data = json.dumps(message).encode()
    header = struct.pack("!I", len(data))
    if fds:
        socket.send_fds(connection, [header], list(fds))
    else:
        connection.sendall(header)
    connection.sendall(data)


def receive_exactly(connection: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        if not chunk:
            raise EOFError("the connection closed")
        data += chunk
    return data


def receive_message(connection: socket.socket, fds: int = 0) -> tuple[dict, list[int]]:
    received: list[int] = []
    if fds:
        header, received, _, _ = socket.recv_fds(connection, 4, fds)
        if not header:
            raise EOFError("the connection closed")
        header += receive_exactly(connection, 4 - len(header))
    else:
        header = receive_exactly(connection, 4)
    (size,) = struct.unpack("!I", header)
    return json.loads(receive_exactly(connection, size)), received


def returncode(status: int) -> int:
    """A wait status as Popen's returncode: the exit code, or minus the signal."""
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def threads() -> int:
    return len(os.listdir("/proc/self/task"))


def become_worker(request: dict, streams: list[int], listener: socket.socket,
                  connections: list[socket.socket], folder: Path) -> None:
    """In the forked child: its token and rank in the server's registry, before anything it
    runs could be looked for by them; the request's streams, folder and environment; then its
    module as `python -m` runs it. Never returns."""
    global FORKED
    FORKED = True
    code = 1
    try:
        kept = {name: request["env"][name] for name in REGISTERED if name in request["env"]}
        registry_file(folder, os.getpid()).write_text(json.dumps(kept))
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
            signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})   # blocked for the fork
        for connection in (listener, *connections):
            connection.close()
        for target, fd in enumerate(streams):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        module, arguments = request["module"], request["arguments"]
        import torch
        if torch.cuda._is_in_bad_fork():   # CUDA was initialized before the fork: start fresh
            os.execve(sys.executable, [sys.executable, "-m", module, *arguments], request["env"])
        if "numpy" in sys.modules:   # its global generator is seeded at import, per process
            sys.modules["numpy"].random.seed()
        import runpy
        sys.argv = [module, *arguments]
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
            if not isinstance(done.code, (int, type(None))):
                print(done.code, file=sys.stderr)
    except BaseException:
        import traceback
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


def module_files() -> dict[str, tuple[int, int]]:
    """Each imported module's file, with its modification time and size: what a fresh
    interpreter would read again (about 8 ms for torch's 1,900 modules)."""
    stamps = {}
    for module in list(sys.modules.values()):
        name = getattr(module, "__file__", None)
        if name and name not in stamps:
            try:
                stat = os.stat(name)
            except OSError:
                continue
            stamps[name] = (stat.st_mtime_ns, stat.st_size)
    return stamps


def changed_file(stamps: dict[str, tuple[int, int]]) -> str | None:
    """The first of these files that is no longer as it was imported (rewritten, removed):
    a fork would run the old code where a fresh worker runs the new."""
    for name, stamp in stamps.items():
        try:
            stat = os.stat(name)
        except OSError:
            return name
        if (stat.st_mtime_ns, stat.st_size) != stamp:
            return name
    return None


class Server:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.folder = path.parent
        self.children: dict[int, socket.socket] = {}   # worker pid -> its agent's connection
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.workers_loaded = False
        self.imported = module_files()   # what it imported, as it was then
        self.retiring = False   # its stack changed: it forks no more, and ends with its workers
        try:
            self.idle_seconds: float | None = float((self.folder / IDLE_FILE).read_text())
        except (OSError, ValueError):
            self.idle_seconds = None   # a session's own: it ends with the session
        self.busy_at = time.monotonic()   # its last fork, or its last worker's end

    def owner_gone(self) -> bool:
        try:
            return not still_runs((self.folder / OWNER_FILE).read_text())
        except OSError:
            return True

    def fork(self, connection: socket.socket) -> None:
        try:
            request, streams = receive_message(connection, fds=3)
        except (OSError, EOFError, ValueError):
            connection.close()
            return
        refused, reply = None, {}
        changed = changed_file(self.imported)
        if changed is not None:   # a package was upgraded, a source edited: a new server
            refused = (f"{changed} changed since the fork server imported it; "
                       "a new server imports it again")
            reply["retired"] = True
            self.retire()
        elif request.get("module") not in PROBE_MODULES and not self.workers_loaded:
            try:
                preload(WORKER_MODULES)
                self.workers_loaded = True
                self.imported = module_files()
            except Exception as error:   # the worker, run fresh, says the same in its stderr
                refused = f"the fork server could not import the worker ({error})"
        if refused is None and (threads() != 1 or len(streams) != 3):
            refused = f"the fork server runs {threads()} threads; a fork of it may hang"
        if refused is not None:
            for fd in streams:
                os.close(fd)
            send_message(connection, {"error": refused, **reply})
            connection.close()
            return
        sys.stdout.flush()
        sys.stderr.flush()
        # A SIGTERM waits until the worker is the server's to kill and its agent has its pid:
        # one that ended the server between the fork and the reply left the worker running, and
        # the agent, with no pid, started another one fresh (a closed folder's agent outlived it).
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        try:
            pid = os.fork()
            if pid == 0:
                become_worker(request, streams, self.listener,
                              [connection, *self.children.values()], self.folder)
            for fd in streams:
                os.close(fd)
            self.children[pid] = connection
            try:
                send_message(connection, {"pid": pid})
            except OSError:
                os.kill(pid, signal.SIGKILL)
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})

    def retire(self) -> None:
        """Take no more requests (the next agent starts a new server in its place), and end
        once the workers it forked have."""
        self.retiring = True
        self.path.unlink(missing_ok=True)
        pid_file = self.folder / f"{self.path.stem}.pid"
        try:
            if int(pid_file.read_text()) == os.getpid():
                pid_file.unlink()
        except (OSError, ValueError):
            pass

    def reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            registry_file(self.folder, pid).unlink(missing_ok=True)
            connection = self.children.pop(pid, None)
            if connection is not None:
                try:
                    send_message(connection, {"returncode": returncode(status)})
                except OSError:
                    pass
                connection.close()

    def kill_orphans(self, readable: list) -> None:
        """Kill the workers whose agent went (its connection closed)."""
        for pid, connection in list(self.children.items()):
            if connection in readable:
                try:
                    gone = connection.recv(1, socket.MSG_PEEK) == b""
                except OSError:
                    gone = True
                if gone:
                    os.kill(pid, signal.SIGKILL)

    def run(self) -> None:
        pending = self.path.with_suffix(".binding")
        pending.unlink(missing_ok=True)
        self.listener.bind(str(pending))
        self.listener.listen(64)
        (self.folder / f"{self.path.stem}.pid").write_text(str(os.getpid()))
        os.replace(pending, self.path)   # the agents' sign that it serves
        checked = time.monotonic()
        while True:
            watched = [self.listener, *self.children.values()]
            readable = select.select(watched, [], [], POLL_SECONDS)[0]
            self.reap()
            self.kill_orphans(readable)
            if self.listener in readable:
                connection, _ = self.listener.accept()
                self.fork(connection)
            if self.children or self.listener in readable:
                self.busy_at = time.monotonic()
            if self.retiring and not self.children:
                return
            if (self.idle_seconds is not None and not self.children
                    and time.monotonic() - self.busy_at > self.idle_seconds):
                self.retire()   # an agent that comes now asks a new server
                return
            if time.monotonic() - checked > OWNER_POLL_SECONDS:
                checked = time.monotonic()
                if self.owner_gone() or not (self.retiring or self.path.exists()):
                    return

    def end(self) -> None:
        for pid in list(self.children):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in list(self.children):
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
            registry_file(self.folder, pid).unlink(missing_ok=True)
        if not self.retiring:   # a retired one's path may be its successor's
            self.path.unlink(missing_ok=True)


def preload(modules: tuple[str, ...]) -> None:
    """Import `modules`, then let a thread pool an import started (OpenBLAS's, under numpy)
    end: its own fork handler shuts it down, so one fork, of a child that exits at once, lets
    it run. A thread that still runs after this makes the next fork refused."""
    import importlib
    for module in modules:
        importlib.import_module(module)
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


def serve(path: Path) -> int:
    preload(PROBE_MODULES)
    if threads() != 1:
        print(f"the fork server's imports started {threads() - 1} threads; its workers are "
              "started fresh", file=sys.stderr)
        return 1
    server = Server(path)

    def ended(signum, frame):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, ended)
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # the suite ends it, not a terminal's Ctrl-C
    try:
        server.run()
    except SystemExit:
        pass
    finally:
        server.end()
        # Without the interpreter's teardown of torch's modules (about a second on a CPU host),
        # which the session's end would wait for.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rn50_model.fork_server",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--socket", required=True, type=Path,
                        help="where it listens, in a folder of ServerFolder's")
    return serve(parser.parse_args(argv).socket)


if __name__ == "__main__":
    # The server runs as the module itself, not as __main__: its workers' `FORKED` is the one
    # rn50_model.startup reads.
    from rn50_model.fork_server import main as served
    sys.exit(served())
