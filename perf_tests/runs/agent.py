"""The workers of a one-node run, started as torchrun --standalone starts them, by an agent that
imports no torch: each worker gets torchrun's variables (RANK, LOCAL_RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT, ...) and rank 0 hosts the process group's store. torchrun's agent
imports torch before it starts a worker, and leaves after it: about 1.5 s of every run's wall
time on a CPU host, none of it measured (docs/measurement.md, "Where a run's time goes").

As torchrun does, the agent ends the other workers once one fails, and reports each worker that
failed on stderr, the first one observed first, behind `AGENT_EXIT_MARK` (runs/outcome.py reads
it as it reads torchrun's summary); SIGTERM or SIGINT to the agent ends its workers too. A
rendezvous port the user asked for (--perf-set rdzv-port) is the store's port; several nodes go
through torchrun (perf_tests/runs/launchers.py).

    python -m perf_tests.runs.agent --nproc-per-node 2 -m rn50_model.worker --run-dir run-1
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time

from perf_tests.runs.fork_servers import forked_or_none

AGENT_EXIT_MARK = "RN50_AGENT_EXIT "
POLL_SECONDS = 0.02
STOP_GRACE_SECONDS = 5.0


def free_port(host: str = "127.0.0.1") -> int:
    """A port free on `host` now (the launchers' too: this module imports nothing heavy)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def worker_environment(rank: int, workers: int, port: int) -> dict[str, str]:
    """Worker `rank`'s variables, as torchrun --standalone sets them on one node."""
    env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), GROUP_RANK="0",
               ROLE_RANK=str(rank), WORLD_SIZE=str(workers), LOCAL_WORLD_SIZE=str(workers),
               GROUP_WORLD_SIZE="1", ROLE_WORLD_SIZE=str(workers), ROLE_NAME="default",
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if workers > 1:
        env.setdefault("OMP_NUM_THREADS", "1")   # as torchrun sets it for several workers
    return env


def start_worker(module: str, arguments: list[str], env: dict[str, str]):
    """One worker: forked by the session's fork server for this environment where the suite
    named a folder of them (rn50_model/fork_server.py), else a fresh interpreter."""
    return (forked_or_none(module, arguments, env, "agent")
            or subprocess.Popen([sys.executable, "-m", module, *arguments], env=env))


def stop(workers: list[subprocess.Popen]) -> None:
    """SIGTERM the workers still running, then SIGKILL those that outlive the grace."""
    running = [worker for worker in workers if worker.poll() is None]
    for worker in running:
        worker.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    while any(worker.poll() is None for worker in running) and time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
    for worker in running:
        if worker.poll() is None:
            worker.kill()
        worker.wait()


def report(rank: int, code: int, first: bool) -> None:
    print(AGENT_EXIT_MARK + json.dumps({"rank": rank, "exitcode": code, "first": first}),
          file=sys.stderr, flush=True)


def watch(workers: list[subprocess.Popen]) -> int:
    """Wait for every worker; at the first that fails, end the rest. The agent's exit status:
    0, or 1 where a worker failed."""
    while True:
        codes = [worker.poll() for worker in workers]
        failed = [rank for rank, code in enumerate(codes) if code not in (None, 0)]
        if failed:
            first = failed[0]
            stop(workers)
            report(first, workers[first].returncode, True)
            for rank, worker in enumerate(workers):
                if rank != first and worker.returncode != 0:
                    report(rank, worker.returncode, False)
            return 1
        if all(code == 0 for code in codes):
            return 0
        time.sleep(POLL_SECONDS)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m perf_tests.runs.agent",
                                     usage="%(prog)s --nproc-per-node N [--master-port PORT] "
                                           "-m MODULE [ARGUMENTS ...]",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--nproc-per-node", type=int, required=True)
    parser.add_argument("--master-port", type=int, help="the store's port (default: a free one)")
    if "-m" not in argv[:-1]:
        parser.error("-m MODULE is required: the workers' module, then its arguments")
    at = argv.index("-m")
    args = parser.parse_args(argv[:at])
    module, arguments = argv[at + 1], argv[at + 2:]
    port = args.master_port or free_port()
    workers: list[subprocess.Popen] = []

    def ended(signum, frame):
        stop(workers)
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, ended)
    signal.signal(signal.SIGINT, ended)
    for rank in range(args.nproc_per_node):
        workers.append(start_worker(module, arguments,
                                    worker_environment(rank, args.nproc_per_node, port)))
    return watch(workers)


if __name__ == "__main__":
    sys.exit(main())
