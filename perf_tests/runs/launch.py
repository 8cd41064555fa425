"""What starting one run's workers takes, whichever launcher starts them: the host's slots, the
stack they run on (this interpreter, a prefix, variables, an image), the launch request and its
result, the agents' command lines the launchers build, and the `Launcher` interface
(perf_tests/runs/launchers.py has the four launchers)."""
from __future__ import annotations

import random
import shlex
import socket
import sys
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from perf_tests.containers import Image, remove_containers, runtime_command
from perf_tests.core.cases import Case
from perf_tests.core.text import counted
from perf_tests.runs import network
from perf_tests.runs.agent import free_port
from perf_tests.runs.processes import TOKEN_VARIABLE, ProcessTree, WaitResult
from perf_tests.runs.suite_code import image_code
from perf_tests.runs.fork_servers import ServerFolder
from rn50_model.host_state import SERVERS_VARIABLE
from rn50_model.startup import WORKERS_PER_HOST_VARIABLE

DEFAULT_REMOTE_PORT_RANGE = (29400, 29999)


class LauncherError(Exception):
    """The launcher cannot work here (outside an allocation, no hostfile...): one line to act on."""


@dataclass(frozen=True)
class Host:
    """What this host offers a case: CUDA devices, or CPU cores for worker processes; with
    `share_devices` (--perf-set share-devices=on), workers beyond them share them."""
    device_type: str
    device_count: int
    cpu_count: int
    share_devices: bool = False

    @property
    def slots(self) -> int:
        return self.device_count if self.device_type == "cuda" else self.cpu_count

    def sharing(self, workers: int) -> str | None:
        """`2 ranks on 1 CUDA device` where `workers` share this host's devices (or cores);
        None where each has its own."""
        if not self.share_devices or workers <= self.slots or self.slots < 1:
            return None
        if self.device_type == "cuda":
            return f"{workers} ranks on {counted(self.device_count, 'CUDA device', 'CUDA devices')}"
        return f"{workers} worker processes on {counted(self.cpu_count, 'CPU core', 'CPU cores')}"

    def lacks(self, workers: int) -> str | None:
        if workers <= self.slots or (self.share_devices and self.slots >= 1):
            return None
        if self.device_type == "cuda":
            return f"needs {workers} CUDA devices on this host, found {self.device_count}"
        return f"needs {workers} worker processes, this host has {self.cpu_count} CPU cores"


@dataclass(frozen=True)
class Stack:
    """The software stack a launch runs on: this session's interpreter as it is, or another
    (another interpreter, a command that wraps it such as `taskset -c 0`, settings in its
    environment, a container image). Every launcher's commands carry the interpreter, so
    wrapping it is one mechanism for all: under srun or mpirun the wrapper runs on each node."""
    python: str = sys.executable
    prefix: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    image: Image | None = None   # the workers run inside it, its interpreter (containers/)

    @property
    def is_default(self) -> bool:
        return self == Stack()

    def describe(self) -> str:
        """`image new.sif (apptainer), prefix 'taskset -c 0', DNNL_MAX_CPU_ISA=AVX2`."""
        parts = [f"python {self.python}"] if self.python != sys.executable else []
        if self.image is not None:
            parts.append(f"image {self.image.describe()}")
        if self.prefix:
            parts.append(f"prefix {shlex.join(self.prefix)!r}")
        parts.extend(f"{key}={value}" for key, value in self.env)
        return ", ".join(parts) or "this session's own"

    def wrap(self, argv: list[str], env: Mapping[str, str] | None = None,
             mounts: Sequence[Path] = (), workdir: Path | None = None,
             in_image: bool = False, label: str = "") -> list[str]:
        """`argv` with this session's interpreter replaced by the stack's, the first behind its
        prefix and, with an image, behind the runtime's command that runs it there (`mounts`
        bound, in `workdir`, `env`'s variables passed, the suite's own code where it is
        installed (suite_code.py); `in_image`: the launcher runs the command in the image
        itself, pyxis); the settings go through `env` right before it, so they reach it inside
        a container and on remote nodes alike. An interpreter started later in
        the same command (the agent behind `perf_tests.runs.network`) already runs inside the
        wrapper: it only becomes the stack's."""
        if self.is_default or sys.executable not in argv:
            return list(argv)
        at = argv.index(sys.executable)
        python, runtime, settings = self.python, [], dict(self.env)
        if self.image is not None:
            python = self.image.python
            code, pythonpath = image_code(
                settings.get("PYTHONPATH", (env or {}).get("PYTHONPATH", "")), mounts)
            if pythonpath:   # an installed suite: its packages, not the host's site-packages
                settings["PYTHONPATH"] = pythonpath
            if not in_image:
                runtime = runtime_command(self.image, [*mounts, *code], workdir or Path.cwd(),
                                          env or {}, label=label)
        words = ["env", *(f"{key}={value}" for key, value in settings.items())] \
            if settings else []
        inner = [python if part == sys.executable else part for part in argv[at + 1:]]
        return [*argv[:at], *self.prefix, *runtime, *words, python, *inner]


@dataclass(frozen=True)
class LaunchRequest:
    case: Case
    worker_args: list[str]   # after `-m rn50_model.worker`
    run_dir: Path
    env: dict[str, str]
    cwd: Path
    timeout: float
    rdzv_port: int | None = None
    stack: Stack = Stack()
    # The stack's variables its runs are recorded with (perf_tests/runs/variables.py): read
    # before the launcher adds its own; None: the record keeps what the worker wrote.
    variables: dict | None = None
    # ... and what its image adds to each record's environment (its identity, which variables
    # it set, its Debian packages: environment_lock.StackReadings.stamp); {} on the host
    stamp: dict = field(default_factory=dict)
    # What a stack's image sees of this host, each at its own path: the checkout, the results
    # folder, the data (and `cwd` is its working directory).
    mounts: tuple[Path, ...] = ()


@dataclass(frozen=True)
class LaunchResult:
    wait: WaitResult
    stdout_paths: list[Path]
    stderr_paths: list[Path]
    commands: list[list[str]]
    network: dict = field(default_factory=dict)


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def is_this_host(name: str) -> bool:
    return name == "127.0.0.1" or network.is_this_host(name)


def one_node_command(workers: int, port: int | None, worker_args: list[str],
                     module: str = "rn50_model.worker") -> list[str]:
    """One node's workers (`python -m <module>`) through the suite's agent
    (perf_tests/runs/agent.py), its store on `port` (None: a free one)."""
    return [sys.executable, "-m", network.SUITE_AGENT, "--nproc-per-node", str(workers),
            *([] if port is None else ["--master-port", str(port)]),
            "-m", module, *worker_args]


def numbered_node_command(case: Case, address: str, port: int, rank: int | str,
                          worker_args: list[str], order: list[str] | None = None) -> list[str]:
    """One node's agent of a run of several nodes (perf_tests/runs/agent.py; node 0's first
    worker binds the store on `address`:`port`). `rank`: the node's rank, where the launcher
    starts each node's agent itself; or the variable in which a launcher that starts one
    command on every node at once sets it in each: the node's rank, or with `order` its name,
    whose place in `order` is its rank."""
    ranked = (["--node-rank", str(rank)] if isinstance(rank, int) else
              ["--node-rank-from", rank, *(["--node-order", ",".join(order)] if order else [])])
    return [sys.executable, "-m", network.SUITE_AGENT, "--nnodes", str(case.nodes), *ranked,
            "--nproc-per-node", str(case.gpus_per_node), "--master-addr", address,
            "--master-port", str(port), "-m", "rn50_model.worker", *worker_args]


def node_agent_command(rendezvous_host: str, run_dir: Path, agent: list[str]) -> list[str]:
    """The node's agent behind `python -m perf_tests.runs.network`, which picks this node's
    address and collective interface on the node itself."""
    return [sys.executable, "-m", "perf_tests.runs.network", "--rendezvous-host", rendezvous_host,
            "--run-dir", str(run_dir), "--", *agent]


class Launcher(ABC):
    name: str

    def __init__(self, servers: ServerFolder | None = None) -> None:
        # What the last `commands` chose: rendezvous endpoint and how its address was found
        # (each launcher's own: a dict on the class would be every instance's).
        self.network: dict = {}
        self.servers = servers   # the session's fork servers; None: every worker starts fresh

    def forks_workers(self, request: LaunchRequest) -> bool:
        """Whether the launcher's processes for this run can come from a fork server: all on
        this host, on this host's python (an image's workers start fresh in the image)."""
        return False

    def forking(self, request: LaunchRequest) -> bool:
        """Whether they do: the session has fork servers and they can."""
        return self.servers is not None and self.forks_workers(request)

    def check_usable(self) -> None:
        """Raise LauncherError where this launcher cannot work at all (checked once, at start)."""

    @abstractmethod
    def skip_reason(self, case: Case, host: Host) -> str | None:
        """Why this case cannot run with this launcher here, or None."""

    @abstractmethod
    def commands(self, request: LaunchRequest) -> list[tuple[str, list[str]]]:
        """(name, argv) of each process to start for one run."""

    def rendezvous_port(self, request: LaunchRequest, endpoint_host: str) -> int:
        """The asked-for port (checked where it is on this host), else a free one."""
        if request.rdzv_port is not None:
            if is_this_host(endpoint_host) and not port_is_free(request.rdzv_port):
                raise LauncherError(
                    f"rendezvous port {request.rdzv_port} on {endpoint_host} is in use; pick "
                    "another with --perf-set rdzv-port, or leave it out to use a free one")
            return request.rdzv_port
        if is_this_host(endpoint_host):
            return free_port("")
        return random.randint(*DEFAULT_REMOTE_PORT_RANGE)

    def cleanup(self, request: LaunchRequest) -> None:
        """After the launch's processes here are gone: end what the launcher left elsewhere."""

    def workers_per_host(self, case: Case) -> int:
        """How many workers this launcher places on one host (they share its CPU cores)."""
        return case.gpus_per_node

    def wrap(self, request: LaunchRequest, argv: list[str], env: dict[str, str]) -> list[str]:
        """`argv` on the request's stack (perf_tests.runs.launchers.Stack.wrap), an image's runtime
        passing `env`'s variables and labelling its containers with the run's folder."""
        return request.stack.wrap(argv, env, (request.cwd, *request.mounts), request.cwd,
                                  label=str(request.run_dir.resolve()))

    def launch(self, request: LaunchRequest) -> LaunchResult:
        env = dict(request.env)
        env[WORKERS_PER_HOST_VARIABLE] = str(self.workers_per_host(request.case))
        # The agent forks its workers wherever the variable names a folder of servers: never
        # where they would be forked on this host for another node, or from a folder the
        # session's own environment named (a kept one) when this launch does not fork.
        if self.forking(request):
            env[SERVERS_VARIABLE] = str(self.servers.path)
        else:
            env.pop(SERVERS_VARIABLE, None)
        # ... and the process tree's token, which it sets as it starts each command.
        passed = {**env, TOKEN_VARIABLE: ""}
        commands = [(name, self.wrap(request, argv, passed))
                    for name, argv in self.commands(request)]
        try:
            with ProcessTree() as tree:
                started = []
                for name, argv in commands:
                    try:
                        started.append(tree.start(name, argv, env, request.cwd, request.run_dir))
                    except OSError as error:  # a wrapper or interpreter that does not exist
                        raise LauncherError(f"{argv[0]} cannot start ({error.strerror or error})"
                                            f": {shlex.join(argv[:6])} ...") from None
                waited = tree.wait(request.timeout)
        finally:
            if request.stack.image is not None:   # a container that outlived its client
                remove_containers(request.stack.image, str(request.run_dir.resolve()))
            self.cleanup(request)
        return LaunchResult(waited, [s.stdout_path for s in started],
                            [s.stderr_path for s in started], [argv for _, argv in commands],
                            dict(self.network))

    def rendezvous(self, request: LaunchRequest, nodes: list[str]) -> tuple[str, int]:
        """The first node's address that the others reach, and a port; noted in `network`."""
        try:
            address, chosen_as = network.rendezvous_address(nodes[0], nodes[1:])
        except network.NetworkError as error:
            raise LauncherError(str(error)) from None
        port = self.rendezvous_port(request, address)
        self.network = {"rendezvous_endpoint": f"{address}:{port}",
                        "rendezvous_address_chosen_as": chosen_as,
                        "socket_ifname_set_by_user": {
                            name: request.env[name] for name in network.SOCKET_IFNAME_VARIABLES
                            if request.env.get(name)}}
        return address, port
