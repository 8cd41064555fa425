"""How the workers of one run are started: one torchrun agent per node, by some launcher.

`local` runs one agent on this host; `simulated` runs one agent per simulated node on this
host, joined by a real c10d rendezvous on a free port; `slurm` and `mpirun` start one agent per
allocated node or per hostfile entry. Every launcher reduces to a list of commands; starting,
watching and ending them is the same code (`processes.ProcessTree`) for all. Nobody sets a node
rank by hand: c10d rendezvous assigns them.
"""
from __future__ import annotations

import os
import random
import shlex
import shutil
import socket
import subprocess
import sys
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..cases import Case
from rn50_model.startup import WORKERS_PER_HOST_VARIABLE

from . import network
from ..containers import Image, pyxis_options, remove_containers, runtime_command
from .processes import TOKEN_VARIABLE, ProcessTree, WaitResult
from .suite_code import image_code

LAUNCHERS = ("local", "simulated", "slurm", "mpirun")
DEFAULT_REMOTE_PORT_RANGE = (29400, 29999)


class LauncherError(Exception):
    """The launcher cannot work here (outside an allocation, no hostfile...): one line to act on."""


@dataclass(frozen=True)
class Host:
    """What this host offers a case: CUDA devices, or CPU cores for worker processes."""
    device_type: str
    device_count: int
    cpu_count: int

    @property
    def slots(self) -> int:
        return self.device_count if self.device_type == "cuda" else self.cpu_count

    def lacks(self, workers: int) -> str | None:
        if workers <= self.slots:
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
        the same command (torchrun behind `perf_tests.runs.network`) already runs inside the
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
    # The stack's variables its runs are recorded with (perf_tests/run_variables.py): read
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


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def is_this_host(name: str) -> bool:
    return name == "127.0.0.1" or network.is_this_host(name)


def torchrun_command(nnodes: int, nproc_per_node: int, rendezvous: list[str],
                     worker_args: list[str]) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(nnodes),
            "--nproc-per-node", str(nproc_per_node), *rendezvous, "--max-restarts", "0",
            "-m", "rn50_model.worker", *worker_args]


def c10d_rendezvous(endpoint_host: str, port: int, run_id: str) -> list[str]:
    return ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"{endpoint_host}:{port}",
            "--rdzv-id", run_id]


# Every agent on this host: the workers meet the store at the loopback address, not at the
# host's name, which an image without the host's /etc/hosts (or a host with a stale one)
# does not resolve; c10d then retried it until the run's timeout, silent.
ON_THIS_HOST = ["--local-addr", "127.0.0.1"]


def node_agent_command(rendezvous_host: str, one_agent_per_host: bool, run_dir: Path,
                       torchrun: list[str]) -> list[str]:
    """torchrun behind `python -m perf_tests.runs.network`, which picks this node's address and
    collective interface on the node itself."""
    return [sys.executable, "-m", "perf_tests.runs.network", "--rendezvous-host", rendezvous_host,
            *(["--one-agent-per-host"] if one_agent_per_host else []),
            "--run-dir", str(run_dir), "--", *torchrun]


class Launcher(ABC):
    name: str
    # What the last `commands` chose: rendezvous endpoint and how its address was found.
    network: dict = {}

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


class LocalLauncher(Launcher):
    name = "local"

    def skip_reason(self, case: Case, host: Host) -> str | None:
        if case.nodes > 1:
            return (f"{case.nodes} nodes need a multi-node launcher (--perf-launcher simulated, "
                    "slurm or mpirun)")
        return host.lacks(case.gpus_per_node)

    def commands(self, request: LaunchRequest) -> list[tuple[str, list[str]]]:
        if request.rdzv_port is None:
            rendezvous = ["--standalone"]  # c10d on a free port of this host
        else:
            port = self.rendezvous_port(request, "127.0.0.1")
            rendezvous = c10d_rendezvous("127.0.0.1", port, request.run_dir.name)
        return [("agent0", torchrun_command(1, request.case.gpus_per_node,
                                            [*rendezvous, *ON_THIS_HOST], request.worker_args))]


class SimulatedLauncher(Launcher):
    """Several torchrun agents on this host, as if each were a node of a cluster."""
    name = "simulated"

    def workers_per_host(self, case: Case) -> int:
        return case.devices

    def skip_reason(self, case: Case, host: Host) -> str | None:
        reason = host.lacks(case.devices)
        if reason and case.nodes > 1:
            reason += " (the simulated launcher puts all nodes on this host; use slurm or mpirun)"
        return reason

    def commands(self, request: LaunchRequest) -> list[tuple[str, list[str]]]:
        case = request.case
        port = self.rendezvous_port(request, "127.0.0.1")
        rendezvous = [*c10d_rendezvous("127.0.0.1", port, f"sim-{port}"), *ON_THIS_HOST]
        return [(f"agent{node}", torchrun_command(case.nodes, case.gpus_per_node, rendezvous,
                                                  request.worker_args))
                for node in range(case.nodes)]


def require_program(program: str, launcher: str, package: str) -> str:
    path = shutil.which(program)
    if path is None:
        raise LauncherError(f"--perf-launcher {launcher} needs {program}, which is not on PATH; "
                            f"install it (Debian: apt-get install {package}) or load its module")
    return path


class SlurmLauncher(Launcher):
    """Inside a Slurm allocation: one torchrun agent per node through srun."""
    name = "slurm"

    def __init__(self, environ: dict[str, str] | None = None) -> None:
        self.environ = dict(os.environ if environ is None else environ)
        self._nodes: list[str] | None = None
        self._pyxis: bool | None = None

    def has_pyxis(self) -> bool:
        """Whether srun takes pyxis's --container-image (its SPANK plugin is loaded)."""
        if self._pyxis is None:
            done = subprocess.run(["srun", "--help"], capture_output=True, text=True,
                                  env=self.environ)
            self._pyxis = "--container-image" in done.stdout
        return self._pyxis

    def uses_pyxis(self, stack: Stack) -> bool:
        """An enroot squashfs image runs through pyxis where srun has it (`srun
        --container-image`); any other image behind its runtime's command on each node."""
        return (stack.image is not None and stack.image.runtime == "enroot"
                and Path(stack.image.name).is_file() and self.has_pyxis())

    def wrap(self, request: LaunchRequest, argv: list[str], env: dict[str, str]) -> list[str]:
        if not self.uses_pyxis(request.stack):
            return super().wrap(request, argv, env)
        return request.stack.wrap(argv, env, (request.cwd, *request.mounts), in_image=True)

    def check_usable(self) -> None:
        if "SLURM_JOB_ID" not in self.environ:
            raise LauncherError(
                "--perf-launcher slurm needs a Slurm allocation and SLURM_JOB_ID is not set; run "
                "the suite inside one, e.g. `salloc -N 2 --gpus-per-node 8 pytest perf_tests "
                "--perf-launcher slurm -k 2n8g`, or from an sbatch script")
        require_program("srun", self.name, "slurm-client")
        self.allocated_nodes()

    def allocated_nodes(self) -> list[str]:
        if self._nodes is None:
            nodelist = self.environ.get("SLURM_JOB_NODELIST") or self.environ.get("SLURM_NODELIST")
            if not nodelist:
                raise LauncherError("the Slurm allocation sets no SLURM_JOB_NODELIST; run the "
                                    "suite from salloc or an sbatch script")
            done = subprocess.run(["scontrol", "show", "hostnames", nodelist],
                                  capture_output=True, text=True, env=self.environ)
            if done.returncode != 0 or not done.stdout.split():
                raise LauncherError(f"scontrol show hostnames {nodelist} failed: "
                                    f"{done.stderr.strip() or 'no hosts'}")
            self._nodes = done.stdout.split()
        return self._nodes

    def skip_reason(self, case: Case, host: Host) -> str | None:
        allocated = len(self.allocated_nodes())
        if case.nodes > allocated:
            return (f"needs {case.nodes} nodes, the Slurm allocation "
                    f"{self.environ.get('SLURM_JOB_ID')} has {allocated} (salloc -N {case.nodes})")
        return host.lacks(case.gpus_per_node)

    def step_name(self, request: LaunchRequest) -> str:
        return f"rn50-perf-{request.run_dir.parent.name}-{request.run_dir.name}"

    def node_addresses(self, names: list[str]) -> list[str]:
        """Each node's NodeAddr, the address Slurm itself reaches it on (the name where
        scontrol does not say)."""
        done = subprocess.run(["scontrol", "show", "node", ",".join(names)], capture_output=True,
                              text=True, env=self.environ)
        found = {}
        for block in done.stdout.split("\n\n"):
            fields = dict(item.split("=", 1) for item in block.split() if "=" in item)
            if "NodeName" in fields:
                found[fields["NodeName"]] = fields.get("NodeAddr") or fields["NodeName"]
        return [found.get(name, name) for name in names]

    def commands(self, request: LaunchRequest) -> list[tuple[str, list[str]]]:
        case = request.case
        nodes = self.allocated_nodes()[:case.nodes]
        address, port = self.rendezvous(request, self.node_addresses(nodes))
        srun = ["srun", "--nodes", str(case.nodes), "--ntasks", str(case.nodes),
                "--ntasks-per-node", "1", "--kill-on-bad-exit=1", "--export=ALL",
                "--job-name", self.step_name(request)]
        cpus = self.environ.get("SLURM_CPUS_ON_NODE")
        if cpus:
            # One task per node runs all of that node's workers: give it the node's CPUs, not
            # the single CPU a task gets by default.
            srun += ["--cpus-per-task", cpus]
        if any(key in self.environ for key in ("SLURM_GPUS_ON_NODE", "SLURM_GPUS_PER_NODE",
                                                 "SLURM_JOB_GPUS")):
            srun += [f"--gres=gpu:{case.gpus_per_node}"]
        if self.uses_pyxis(request.stack):
            mounts = (request.cwd, *request.mounts)
            code, _ = image_code(request.env.get("PYTHONPATH", ""), mounts)
            srun += pyxis_options(request.stack.image, (*mounts, *code), request.cwd)
        rendezvous = c10d_rendezvous(address, port,
                                     f"slurm-{self.environ['SLURM_JOB_ID']}-{port}")
        # srun places one task on each node: one agent per host.
        torchrun = torchrun_command(case.nodes, case.gpus_per_node, rendezvous,
                                    request.worker_args)
        return [("srun", srun + node_agent_command(address, True, request.run_dir, torchrun))]

    def cleanup(self, request: LaunchRequest) -> None:
        """Cancel the run's step, in case srun went before its tasks on other nodes did."""
        job = self.environ.get("SLURM_JOB_ID")
        listed = subprocess.run(["squeue", "--noheader", "--steps", "--jobs", job,
                                 "--format", "%i %j"], capture_output=True, text=True,
                                env=self.environ)
        for line in listed.stdout.splitlines():
            step, _, name = line.strip().partition(" ")
            if name.strip() == self.step_name(request):
                subprocess.run(["scancel", "--signal=KILL", step], capture_output=True,
                               env=self.environ)


def read_hostfile(path: str) -> list[str]:
    """One node per line (OpenMPI syntax: `host [slots=N]`); comments and blank lines skipped."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as error:
        raise LauncherError(f"hostfile {path} cannot be read ({error.strerror}); pass an OpenMPI "
                            "hostfile with --perf-hostfile") from None
    hosts = [line.split("#", 1)[0].split()[0] for line in lines if line.split("#", 1)[0].strip()]
    if not hosts:
        raise LauncherError(f"hostfile {path} lists no hosts; write one line per node, e.g. "
                            "'node1 slots=8'")
    return hosts


class MpirunLauncher(Launcher):
    """OpenMPI starts one torchrun agent per hostfile line; c10d rendezvous on the first host."""
    name = "mpirun"

    def __init__(self, hostfile: str) -> None:
        self.hostfile = hostfile
        self.hosts = read_hostfile(hostfile)

    def check_usable(self) -> None:
        require_program("mpirun", self.name, "openmpi-bin")

    def skip_reason(self, case: Case, host: Host) -> str | None:
        if case.nodes > len(self.hosts):
            return (f"needs {case.nodes} hosts, the hostfile {self.hostfile} lists "
                    f"{len(self.hosts)}")
        return host.lacks(self.workers_per_host(case))

    def workers_per_host(self, case: Case) -> int:
        chosen = self.hosts[:case.nodes]
        return case.gpus_per_node * max(chosen.count(host) for host in chosen)

    def commands(self, request: LaunchRequest) -> list[tuple[str, list[str]]]:
        case = request.case
        chosen = self.hosts[:case.nodes]
        address, port = self.rendezvous(request, chosen)
        # As many slots on a host as the nodes it stands for: two lines of `localhost` run two
        # agents there, as two simulated nodes.
        hostfile = request.run_dir / "hostfile"
        hostfile.write_text("".join(f"{host} slots={chosen.count(host)}\n"
                                    for host in dict.fromkeys(chosen)))
        mpirun = ["mpirun", "--hostfile", str(hostfile), "-np", str(case.nodes),
                  "--map-by", "slot", "--bind-to", "none"]
        if os.geteuid() == 0:
            mpirun.append("--allow-run-as-root")
        for name in ("PATH", "PYTHONPATH", TOKEN_VARIABLE, WORKERS_PER_HOST_VARIABLE,
                     "RN50_DATA_CACHE", "RN50_FAULT", "LD_LIBRARY_PATH",
                     *network.SOCKET_IFNAME_VARIABLES):
            if name in request.env or name in (TOKEN_VARIABLE, WORKERS_PER_HOST_VARIABLE):
                mpirun += ["-x", name]
        rendezvous = c10d_rendezvous(address, port, f"mpirun-{port}")
        one_agent_per_host = len(set(chosen)) == len(chosen)
        torchrun = torchrun_command(case.nodes, case.gpus_per_node, rendezvous,
                                    request.worker_args)
        return [("mpirun", mpirun + node_agent_command(address, one_agent_per_host,
                                                       request.run_dir, torchrun))]


def make_launcher(name: str, hostfile: str | None = None) -> Launcher:
    if name == "local":
        return LocalLauncher()
    if name == "simulated":
        return SimulatedLauncher()
    if name == "slurm":
        return SlurmLauncher()
    if name == "mpirun":
        if not hostfile:
            raise LauncherError("--perf-launcher mpirun needs --perf-hostfile FILE (one line per "
                                "node)")
        return MpirunLauncher(hostfile)
    raise LauncherError(f"launcher {name!r} is not available; use one of {', '.join(LAUNCHERS)}")
