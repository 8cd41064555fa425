"""The workers of one node, started as torchrun starts them, by an agent that imports no torch:
each worker gets torchrun's variables (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
...) and global rank 0 hosts the process group's store. torchrun's agent imports torch before it
starts a worker, and leaves after it: 1.5-2 s of every run's wall time on a CPU host, and a core's
worth on every node, none of it measured (docs/measurement.md, "Where a run's time goes").

One node (`--standalone` in torchrun's terms): the store on 127.0.0.1, on a free port or the one
asked for. Several nodes, each agent started by a launcher on every node at once: the node's rank
is mpirun's number for its process (OMPI_COMM_WORLD_RANK), or its name's place in the
allocation's nodes (SLURMD_NODENAME, `--node-order`), `--master-addr` the first node's address,
where node 0's first worker binds the store on `--master-port`; ranks are static, as torchrun's
`--node-rank` gives them, with no rendezvous round (the launcher started every node already). A
node 0 that is not on the store's host, which would leave every worker waiting for a store nobody
binds, ends at once with one line (`--hosts-store`, from perf_tests/runs/network.py). The
simulated launcher starts each of its nodes' agents itself, with its rank (`--node-rank`).

As torchrun does, the agent ends the other workers once one fails, and reports each worker that
failed on stderr by its global rank, the first one observed first and when, behind
`AGENT_EXIT_MARK` (runs/outcome.py reads it); SIGTERM or SIGINT to the agent ends
its workers too.

    python -m perf_tests.runs.agent --nproc-per-node 2 -m rn50_model.worker --run-dir run-1
    python -m perf_tests.runs.agent --nnodes 2 --node-rank 1 --nproc-per-node 1 \
        --master-addr 127.0.0.1 --master-port 29500 -m rn50_model.worker --run-dir run-1
    python -m perf_tests.runs.agent --nnodes 2 --node-rank-from SLURMD_NODENAME --node-order \
        n1,n2 --nproc-per-node 8 --master-addr 10.0.0.1 --master-port 29500 \
        -m rn50_model.worker --run-dir run-1
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
from dataclasses import dataclass

from perf_tests.runs.fork_servers import forked_or_none

AGENT_EXIT_MARK = "RN50_AGENT_EXIT "
POLL_SECONDS = 0.02
STOP_GRACE_SECONDS = 5.0


def free_port(host: str = "127.0.0.1") -> int:
    """A port free on `host` now (the launchers' too: this module imports nothing heavy)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


@dataclass(frozen=True)
class Node:
    """This node's place in the run: its rank among `nodes`, `workers` on each, and where the
    store is (node 0's first worker binds it)."""
    rank: int = 0
    nodes: int = 1
    workers: int = 1
    address: str = "127.0.0.1"

    def global_rank(self, local_rank: int) -> int:
        return self.rank * self.workers + local_rank


def worker_environment(local_rank: int, node: Node, port: int) -> dict[str, str]:
    """The variables of worker `local_rank` on `node`, as torchrun sets them."""
    rank, world = node.global_rank(local_rank), node.nodes * node.workers
    env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(local_rank), GROUP_RANK=str(node.rank),
               ROLE_RANK=str(rank), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(node.workers),
               GROUP_WORLD_SIZE=str(node.nodes), ROLE_WORLD_SIZE=str(world), ROLE_NAME="default",
               MASTER_ADDR=node.address, MASTER_PORT=str(port))
    if node.workers > 1:
        env.setdefault("OMP_NUM_THREADS", "1")   # as torchrun sets it for several workers
    return env


def start_worker(module: str, arguments: list[str], env: dict[str, str]):
    """One worker: forked by the session's fork server for this environment where the suite
    named a folder of them (rn50_model/fork_server.py), else a fresh interpreter."""
    return (forked_or_none(module, arguments, env)
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


def report(rank: int, code: int, first: bool, at: float) -> None:
    """A failed worker's line; `at`, when its agent saw the first failure (the epoch's seconds),
    orders the first failures of several nodes' agents."""
    print(AGENT_EXIT_MARK + json.dumps({"rank": rank, "exitcode": code, "first": first,
                                        "at": round(at, 3)}), file=sys.stderr, flush=True)


def watch(workers: list[subprocess.Popen], node: Node) -> int:
    """Wait for every worker; at the first that fails, end the rest. The agent's exit status:
    0, or 1 where a worker failed."""
    while True:
        codes = [worker.poll() for worker in workers]
        failed = [rank for rank, code in enumerate(codes) if code not in (None, 0)]
        if failed:
            first, seen_at = failed[0], time.time()
            stop(workers)
            report(node.global_rank(first), workers[first].returncode, True, seen_at)
            for rank, worker in enumerate(workers):
                if rank != first and worker.returncode != 0:
                    report(node.global_rank(rank), worker.returncode, False, seen_at)
            return 1
        if all(code == 0 for code in codes):
            return 0
        time.sleep(POLL_SECONDS)


def node_rank(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """This node's rank: given, or from its launcher's variable (`--node-rank-from`: a number,
    or with `--node-order` this node's name); one line where it is missing or out of range."""
    if args.node_rank is not None:
        rank, source = args.node_rank, "--node-rank"
    elif args.node_rank_from:
        value, source = os.environ.get(args.node_rank_from), args.node_rank_from
        if value is None:
            parser.error(f"{source} is not set: start the agent through the launcher that sets "
                         "it (one process per node)")
        order = args.node_order.split(",") if args.node_order else None
        if order is not None and value not in order:
            parser.error(f"this node, {value} ({source}), is not among the run's nodes "
                         f"{args.node_order} (--node-order)")
        if order is None and not value.isdigit():
            parser.error(f"{source} is {value!r}, not a node rank")
        rank = order.index(value) if order is not None else int(value)
    elif args.nnodes > 1:
        parser.error(f"--nnodes {args.nnodes} needs this node's rank: --node-rank or "
                     "--node-rank-from")
    else:
        rank, source = 0, ""
    if not 0 <= rank < args.nnodes:
        parser.error(f"node rank {rank} ({source}) is outside the run's {args.nnodes} nodes: the "
                     "launcher started more processes than the case has nodes")
    return rank


def parse(argv: list[str]) -> tuple[argparse.Namespace, str, list[str], Node]:
    parser = argparse.ArgumentParser(prog="python -m perf_tests.runs.agent",
                                     usage="%(prog)s --nproc-per-node N [--nnodes M "
                                           "(--node-rank N | --node-rank-from VARIABLE) "
                                           "--master-addr ADDRESS --master-port PORT] "
                                           "-m MODULE [ARGUMENTS ...]",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--nproc-per-node", type=int, required=True)
    parser.add_argument("--nnodes", type=int, default=1, help="the run's nodes (default 1)")
    ranked = parser.add_mutually_exclusive_group()
    ranked.add_argument("--node-rank", type=int, help="this node's rank (default 0)")
    ranked.add_argument("--node-rank-from", metavar="VARIABLE",
                        help="the variable in which the launcher gives this node's rank "
                             "(OMPI_COMM_WORLD_RANK) or, with --node-order, its name "
                             "(SLURMD_NODENAME)")
    parser.add_argument("--node-order", metavar="NAME,NAME,...",
                        help="the run's nodes by name, node 0 first")
    parser.add_argument("--master-addr", default="127.0.0.1",
                        help="node 0's address, where the workers meet the store")
    parser.add_argument("--master-port", type=int, help="the store's port (default: a free one, "
                        "on one node only)")
    parser.add_argument("--hosts-store", choices=("yes", "no"),
                        help="whether this host holds --master-addr (perf_tests.runs.network "
                             "says so): node 0's must")
    if "-m" not in argv[:-1]:
        parser.error("-m MODULE is required: the workers' module, then its arguments")
    at = argv.index("-m")
    args = parser.parse_args(argv[:at])
    if args.nnodes > 1 and not args.master_port:
        parser.error(f"--nnodes {args.nnodes} needs --master-port: the other nodes cannot look "
                     "for a free one on node 0")
    node = Node(node_rank(parser, args), args.nnodes, args.nproc_per_node, args.master_addr)
    if node.rank == 0 and args.hosts_store == "no":
        print(f"rn50-perf: node rank 0 ({args.node_rank_from or '--node-rank'}) runs on "
              f"{socket.gethostname()}, not on {args.master_addr}, where the other nodes look for "
              "its store: run the suite on the first node (the hostfile's first host: mpirun "
              "numbers its own host's processes first)", file=sys.stderr, flush=True)
        raise SystemExit(2)
    return args, argv[at + 1], argv[at + 2:], node


def main(argv: list[str] | None = None) -> int:
    args, module, arguments, node = parse(sys.argv[1:] if argv is None else argv)
    port = args.master_port or free_port()
    workers: list[subprocess.Popen] = []

    def ended(signum, frame):
        stop(workers)
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, ended)
    signal.signal(signal.SIGINT, ended)
    for local_rank in range(node.workers):
        workers.append(start_worker(module, arguments, worker_environment(local_rank, node, port)))
    return watch(workers, node)


if __name__ == "__main__":
    sys.exit(main())
