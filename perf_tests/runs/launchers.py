"""How the workers of one run are started: one agent per node, by some launcher.

`local` runs one agent on this host, the suite's own (perf_tests/runs/agent.py: torchrun's
variables without torch's import); `slurm` and `mpirun` start the suite's agent on every allocated
node or hostfile entry at once, each node's rank its place in the allocation (SLURMD_NODENAME) or
mpirun's number for its process (OMPI_COMM_WORLD_RANK), and node 0's first worker the store's
host; `simulated` starts the suite's agent of each simulated node on this host itself, each
with its rank, node 0's first worker binding the store on a free port (one node as `local`).
Every launcher reduces to a list of commands; starting, watching and ending them is the same
code (`processes.ProcessTree`) for all. Nobody sets a node rank by hand.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from perf_tests.containers import pyxis_options
from perf_tests.core.cases import Case
from perf_tests.runs import network
from perf_tests.runs.fork_servers import ServerFolder
from perf_tests.runs.launch import (Host, Launcher, LauncherError, LaunchRequest, Stack,
                                    node_agent_command, numbered_node_command, one_node_command)
from perf_tests.runs.processes import TOKEN_VARIABLE
from perf_tests.runs.suite_code import image_code
from rn50_model.startup import WORKERS_PER_HOST_VARIABLE

LAUNCHERS = ("local", "simulated", "slurm", "mpirun")


def one_node(launcher: Launcher, request: LaunchRequest) -> list[tuple[str, list[str]]]:
    """One node's workers on this host, through the suite's agent: its store on the asked-for
    rendezvous port (checked free), else on a free one."""
    port = None if request.rdzv_port is None else launcher.rendezvous_port(request, "127.0.0.1")
    return [("agent0", one_node_command(request.case.gpus_per_node, port, request.worker_args))]


class LocalLauncher(Launcher):
    name = "local"

    def forks_workers(self, request: LaunchRequest) -> bool:
        return request.stack.image is None

    def skip_reason(self, case: Case, host: Host) -> str | None:
        if case.nodes > 1:
            return (f"{case.nodes} nodes need a multi-node launcher (--perf-launcher simulated, "
                    "slurm or mpirun)")
        return host.lacks(case.gpus_per_node)

    def commands(self, request: LaunchRequest) -> list[tuple[str, list[str]]]:
        return one_node(self, request)


class SimulatedLauncher(Launcher):
    """Several agents on this host, as if each were a node of a cluster, each started with its
    node's rank as Slurm and mpirun start theirs on every node; one node's workers start as
    the local launcher starts them."""
    name = "simulated"

    def workers_per_host(self, case: Case) -> int:
        return case.devices

    def forks_workers(self, request: LaunchRequest) -> bool:
        return request.stack.image is None

    def skip_reason(self, case: Case, host: Host) -> str | None:
        reason = host.lacks(case.devices)
        if reason and case.nodes > 1:
            reason += " (the simulated launcher puts all nodes on this host; use slurm or mpirun)"
        return reason

    def commands(self, request: LaunchRequest) -> list[tuple[str, list[str]]]:
        case = request.case
        if case.nodes == 1:
            return one_node(self, request)
        # The workers meet the store at the loopback address, not at the host's name, which an
        # image without the host's /etc/hosts (or a host with a stale one) does not resolve.
        port = self.rendezvous_port(request, "127.0.0.1")
        return [(f"agent{node}", numbered_node_command(case, "127.0.0.1", port, node,
                                                       request.worker_args))
                for node in range(case.nodes)]


def require_program(program: str, launcher: str, package: str) -> str:
    path = shutil.which(program)
    if path is None:
        raise LauncherError(f"--perf-launcher {launcher} needs {program}, which is not on PATH; "
                            f"install it (Debian: apt-get install {package}) or load its module")
    return path


class SlurmLauncher(Launcher):
    """Inside a Slurm allocation: one agent per node through srun, its node's rank the node's
    place in the allocation."""
    name = "slurm"

    def __init__(self, environ: dict[str, str] | None = None) -> None:
        super().__init__()
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
        # The step on exactly these nodes; each task's node rank is its node's place among them
        # (SLURMD_NODENAME), not its task number, which Slurm assigns in its own node order:
        # node 0, whose first worker binds the store, is the first node, the store's address.
        srun = ["srun", "--nodes", str(case.nodes), "--nodelist", ",".join(nodes), "--ntasks",
                str(case.nodes), "--ntasks-per-node", "1", "--kill-on-bad-exit=1",
                "--export=ALL", "--job-name", self.step_name(request)]
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
        # srun places one task on each node: one agent per host.
        agent = numbered_node_command(case, address, port, "SLURMD_NODENAME", request.worker_args,
                                      order=nodes)
        return [("srun", srun + node_agent_command(address, request.run_dir, agent))]

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
    """OpenMPI starts one agent per hostfile line, its MPI rank the node's; the store on the
    first host, where the suite runs (OpenMPI numbers the processes of its own host first)."""
    name = "mpirun"

    def __init__(self, hostfile: str) -> None:
        super().__init__()
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
        agent = numbered_node_command(case, address, port, "OMPI_COMM_WORLD_RANK",
                                      request.worker_args)
        return [("mpirun", mpirun + node_agent_command(address, request.run_dir, agent))]


def make_launcher(name: str, hostfile: str | None = None, servers: ServerFolder | None = None
                  ) -> Launcher:
    """The launcher `name`; `servers`: the session's fork servers, which fork its one-node
    runs' workers (--perf-set fork-server, on by default)."""
    if name == "local":
        return LocalLauncher(servers)
    if name == "simulated":
        return SimulatedLauncher(servers)
    if name == "slurm":
        return SlurmLauncher()
    if name == "mpirun":
        if not hostfile:
            raise LauncherError("--perf-launcher mpirun needs --perf-hostfile FILE (one line per "
                                "node)")
        return MpirunLauncher(hostfile)
    raise LauncherError(f"launcher {name!r} is not available; use one of {', '.join(LAUNCHERS)}")
