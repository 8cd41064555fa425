"""A real one-node Slurm cluster (munged, slurmctld, slurmd) that lives entirely in one directory,
for tests that launch through salloc and srun; nothing of the machine's own Slurm or munge is used.

    with SlurmCluster(tmp_path / "slurm") as cluster:
        subprocess.run(["srun", "-N1", "-n2", "hostname"], env=cluster.env)
        done = cluster.salloc(["printenv", "SLURM_JOB_ID"])
        with cluster.allocation() as job_env:   # the environment salloc gives its command
            subprocess.run(["srun", "-N1", "hostname"], env=job_env)
"""
from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

# Clients read these (SLURM_JOB_ID sends srun into a job, SQUEUE_FORMAT changes squeue's output),
# so a test run from inside a real allocation would otherwise talk about the wrong cluster.
CLIENT_ENV_PREFIXES = ("SLURM_", "SALLOC_", "SBATCH_", "SRUN_", "SQUEUE_", "SINFO_", "SCONTROL_",
                       "SCANCEL_")
CLIENT_PROGRAMS = ("srun", "salloc", "sbatch", "squeue", "scancel", "sinfo", "scontrol")
DAEMON_PROGRAMS = ("munged", "slurmctld", "slurmd")
# Set in the environment of salloc (inherited by its command and the steps srun starts from it),
# so that ending an allocation finds all of its processes.
JOB_MARKER = "SLURM_TEST_CLUSTER_JOB"
# Daemons live in sbin, which a non-login shell's PATH may lack.
SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
# Unix socket paths longer than this do not fit in sockaddr_un.
MAX_SOCKET_PATH = 100
INSTALL_HINT = "install them with .ci/install-launchers.sh (Debian: slurm-wlm munge)"


class SlurmUnavailable(RuntimeError):
    """The cluster could not be started; the message ends with the tail of the daemon logs."""


def slurm_available() -> str | None:
    """None when this machine can run the cluster, else the reason (for pytest.skip)."""
    missing = [name for name in DAEMON_PROGRAMS + CLIENT_PROGRAMS
               if shutil.which(name, path=SEARCH_PATH) is None]
    if missing:
        return f"Slurm test cluster needs {', '.join(missing)}, not found on PATH; {INSTALL_HINT}"
    if os.geteuid() != 0:
        return ("Slurm test cluster runs slurmd, which starts job steps, as root; "
                "run the tests as root")
    return None


def free_ports(count: int) -> list[int]:
    """Ports free on this host now; held open together so that they differ from each other."""
    sockets = []
    try:
        for _ in range(count):
            held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            held.bind(("", 0))
            sockets.append(held)
        return [held.getsockname()[1] for held in sockets]
    finally:
        for held in sockets:
            held.close()


def node_hardware() -> tuple[str, str]:
    """This host's node name and hardware as slurmd detects them (`slurmd -C`), so that the
    configured node never disagrees with what slurmd registers (which would drain it)."""
    try:
        found = subprocess.run([shutil.which("slurmd", path=SEARCH_PATH) or "slurmd", "-C"],
                               capture_output=True, text=True, timeout=30,
                               env={**os.environ, "SLURM_CONF": os.devnull}).stdout
    except (OSError, subprocess.TimeoutExpired):
        found = ""
    for line in found.splitlines():
        if line.startswith("NodeName="):
            fields = dict(field.split("=", 1) for field in line.split() if "=" in field)
            name = fields.pop("NodeName")
            # Memory is not scheduled here, and a configured RealMemory above what slurmd later
            # measures would drain the node.
            kept = ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore")
            return name, " ".join(f"{key}={fields[key]}" for key in kept if key in fields)
    return socket.gethostname().split(".")[0], f"CPUs={os.cpu_count() or 1}"


def process_state(pid: int) -> str | None:
    """The state letter of a process (R, S, Z...), None when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def is_running(pid: int) -> bool:
    # Daemons are re-parented to PID 1, which may never reap them: a zombie counts as gone.
    return process_state(pid) not in (None, "Z")


def process_environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    pairs = (item.decode(errors="replace").partition("=") for item in raw.split(b"\0") if item)
    return {key: value for key, _, value in pairs}


def parent_pids() -> dict[int, int]:
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    return parents


def processes_with_env(key: str, value: str) -> set[int]:
    """Running processes whose environment sets key=value, never this process or its parents."""
    spared = own_ancestors()
    return {pid for pid in parent_pids() if pid not in spared and is_running(pid)
            and process_environ(pid).get(key) == value}


def own_ancestors() -> set[int]:
    """This process and those above it, which a sweep must never kill."""
    parents = parent_pids()
    pids, pid = set(), os.getpid()
    while pid > 0 and pid not in pids:
        pids.add(pid)
        pid = parents.get(pid, 0)
    return pids


def read_tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return f"--- {path}: not written"
    return "\n".join([f"--- {path} (last {len(text)} lines)"] + text)


class SlurmCluster:
    """munged, slurmctld and slurmd for one node, with every file under `root`.

    Clients find the cluster through `env` alone (SLURM_CONF); pass it to every subprocess.
    `stop()` kills the daemons and everything they started; it leaves `root` for debugging.

    With `hosts` (tests/two_hosts.py) it is a two-node cluster across them: slurmctld and the
    first slurmd on node 1, the second slurmd on node 2, each node at its own address (NodeAddr),
    one munged for both (its socket is a file, which both hosts see). Clients then run on node 1:
    prefix their commands with `client_prefix`.
    """

    def __init__(self, root: Path, start_timeout: float = 60.0, stop_grace: float = 10.0,
                 hosts=None) -> None:
        self.root = Path(root).resolve()
        self.conf = self.root / "slurm.conf"
        self.start_timeout = start_timeout
        self.stop_grace = stop_grace
        self.node_name, self.node_hardware = node_hardware()
        self.cpus = int(dict(field.split("=") for field in self.node_hardware.split())["CPUs"])
        self.hosts = hosts
        if hosts is not None:
            self.node_name = hosts.nodes[0].name
        # (node name, address, the two_hosts node it runs on: None for this host)
        self.nodes = ([(node.name, node.address, node) for node in hosts.nodes] if hosts
                      else [(self.node_name, "127.0.0.1", None)])
        self.munge_dir = self.root / "munge"
        self.munge_socket = self.munge_dir / "munge.socket"
        self.log_dir = self.root / "log"
        self.pid_dir = self.root / "run"
        self.env = {key: value for key, value in os.environ.items()
                    if not key.startswith(CLIENT_ENV_PREFIXES)}
        self.env["SLURM_CONF"] = str(self.conf)
        self.env["PATH"] = SEARCH_PATH
        self.cluster_name = "t" + uuid.uuid4().hex[:8]
        # Pids seen at start, kept after the pid files go, so a caller can check they are gone.
        self.daemon_pids: dict[str, int] = {}

    # -- files -----------------------------------------------------------------------------

    def pid_file(self, daemon: str, node: str = "%n") -> Path:
        return self.pid_dir / (f"{daemon}-{node}.pid" if daemon == "slurmd" else f"{daemon}.pid")

    def log_file(self, daemon: str, node: str = "%n") -> Path:
        return self.log_dir / (f"{daemon}-{node}.log" if daemon == "slurmd" else f"{daemon}.log")

    def daemons(self) -> list[tuple[str, str | None]]:
        """(daemon, node) in start order; a node only for slurmd."""
        return [("munged", None), ("slurmctld", None)] + [("slurmd", name)
                                                          for name, _, _ in self.nodes]

    def daemon_key(self, daemon: str, node: str | None) -> str:
        return f"slurmd {node}" if daemon == "slurmd" and len(self.nodes) > 1 else daemon

    @property
    def client_prefix(self) -> list[str]:
        return self.prefix_for(self.nodes[0][2])

    def prefix_for(self, node) -> list[str]:
        return self.hosts.enter(node) if node is not None else []

    def write_config(self) -> None:
        # slurmd writes its topology and step sockets into its spool folder before creating it.
        for folder in (self.root, self.munge_dir, self.log_dir, self.pid_dir, self.root / "state",
                       *(self.root / "spool" / name for name, _, _ in self.nodes),
                       self.root / "allocations"):
            folder.mkdir(parents=True, exist_ok=True)
            # munged wants its socket folder open to all for execute, and nothing writable by
            # others; it is started with --force because it also wants that of every folder
            # above, which pytest's private temporary folders are not.
            folder.chmod(0o711 if folder == self.munge_dir else 0o700)
        if len(str(self.munge_socket)) > MAX_SOCKET_PATH:
            raise SlurmUnavailable(f"munge socket path {self.munge_socket} is longer than "
                                   f"{MAX_SOCKET_PATH} characters; give SlurmCluster a shorter "
                                   "root")
        key = self.munge_dir / "munge.key"
        if not key.exists():
            key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        plugstack = self.root / "plugstack.conf"
        plugstack.write_text("")
        controller_port, node_port = free_ports(2)
        user = pwd.getpwuid(os.geteuid()).pw_name
        self.conf.write_text("\n".join([
            f"# One-node test cluster written by {Path(__file__).name}; every path is under here.",
            f"ClusterName={self.cluster_name}",
            f"SlurmctldHost={self.nodes[0][0]}({self.nodes[0][1]})",
            f"SlurmctldPort={controller_port}",
            f"SlurmdPort={node_port}",
            f"SlurmUser={user}",
            f"SlurmdUser={user}",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={self.munge_socket}",
            f"StateSaveLocation={self.root / 'state'}",
            f"SlurmdSpoolDir={self.root / 'spool' / '%n'}",
            f"SlurmctldPidFile={self.pid_file('slurmctld')}",
            f"SlurmdPidFile={self.pid_file('slurmd')}",
            f"SlurmctldLogFile={self.log_file('slurmctld')}",
            f"SlurmdLogFile={self.log_file('slurmd')}",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            # The machine's /etc/slurm/plugstack.conf would load SPANK plugins into every step.
            f"PlugStackConfig={plugstack}",
            # No cgroups: CI machines and containers often cannot delegate them.
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "MpiDefault=none",
            # CI machines have no mail program, and slurmctld complains when it is missing.
            "MailProg=/bin/true",
            "SchedulerType=sched/backfill",
            # Cores, not whole nodes: `srun -n2` fits on one node and a job left running by a
            # failed test does not block the next one.
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "ReturnToService=2",
            # Short timeouts: a cancelled step ends within seconds, a dead daemon is noticed soon.
            "SlurmctldTimeout=10",
            "SlurmdTimeout=10",
            "MessageTimeout=10",
            "KillWait=5",
            # Finished jobs leave squeue sooner, so that a test reading it sees only its own.
            "MinJobAge=30",
            *(f"NodeName={name} NodeAddr={address} {self.node_hardware} State=UNKNOWN"
              for name, address, _ in self.nodes),
            f"PartitionName=test Nodes={','.join(name for name, _, _ in self.nodes)} Default=YES "
            "MaxTime=INFINITE State=UP",
            "",
        ]))

    # -- life cycle ------------------------------------------------------------------------

    def start(self) -> None:
        """Start munged, slurmctld and slurmd, and wait until the node is idle."""
        reason = slurm_available()
        if reason:
            raise SlurmUnavailable(reason)
        # A cluster left running on this root (a crashed session) would hold the pid files.
        self.stop()
        self.write_config()
        try:
            self.start_daemon("munged", ["--force",
                                         "--key-file", str(self.munge_dir / "munge.key"),
                                         "--socket", str(self.munge_socket),
                                         "--pid-file", str(self.pid_file("munged")),
                                         "--log-file", str(self.log_file("munged")),
                                         "--seed-file", str(self.munge_dir / "munged.seed")])
            self.start_daemon("slurmctld", ["-c"], self.nodes[0][2])
            for name, _, node in self.nodes:
                self.start_daemon("slurmd", [], node, name)
            self.wait_until_idle()
        except BaseException:
            self.stop()
            raise

    def start_daemon(self, daemon: str, arguments: list[str], node=None,
                     node_name: str = "%n") -> None:
        started = subprocess.run([*self.prefix_for(node), shutil.which(daemon, path=SEARCH_PATH),
                                  *arguments],
                                 env=self.env, stdin=subprocess.DEVNULL, capture_output=True,
                                 text=True, timeout=self.start_timeout)
        if started.returncode != 0:
            self.fail(f"{daemon} exited with status {started.returncode} at start "
                      f"({(started.stderr or started.stdout).strip()[-300:]})")
        deadline = time.monotonic() + self.start_timeout
        while (pid := self.read_pid(daemon, node_name)) is None or not is_running(pid):
            if time.monotonic() > deadline:
                self.fail(f"{daemon} wrote no pid file {self.pid_file(daemon, node_name)} of a "
                          f"running process within {self.start_timeout:.0f} s")
            time.sleep(0.05)
        self.daemon_pids[self.daemon_key(daemon, node_name)] = pid

    def wait_until_idle(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        state = "no answer"
        while True:
            for daemon, pid in self.daemon_pids.items():
                if not is_running(pid):
                    self.fail(f"{daemon} (pid {pid}) died while the node was coming up")
            names = ",".join(name for name, _, _ in self.nodes)
            listed = subprocess.run([*self.client_prefix, "sinfo", "--noheader", "--Node",
                                     "--nodes", names, "--format", "%T"], env=self.env,
                                    capture_output=True, text=True, timeout=30)
            states = listed.stdout.split()
            state = " ".join(states) or listed.stderr.strip() or "no answer"
            if len(states) == len(self.nodes) and set(states) == {"idle"}:
                return
            if time.monotonic() > deadline:
                self.fail(f"node {names} is '{state}', not idle, "
                          f"{self.start_timeout:.0f} s after start")
            time.sleep(0.2)

    def fail(self, reason: str) -> None:
        logs = "\n".join(read_tail(self.log_file(daemon, node or "%n"))
                         for daemon, node in self.daemons())
        raise SlurmUnavailable(f"Slurm test cluster in {self.root}: {reason}; see its logs\n{logs}")

    def read_pid(self, daemon: str, node: str = "%n") -> int | None:
        try:
            return int(self.pid_file(daemon, node).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def stop(self) -> None:
        """Stop the daemons and kill every process of this cluster; wait until all are gone.

        Safe to call more than once, after a failed start, or from another SlurmCluster on the
        same root (e.g. to clean up after a crashed session).
        """
        # slurmd first so that no new step starts; munged last since the others use it.
        for daemon, node in reversed(self.daemons()):
            key = self.daemon_key(daemon, node)
            pid = self.read_pid(daemon, node or "%n") or self.daemon_pids.get(key)
            # A stale pid file may name a pid since reused by another program.
            if pid and is_running(pid) and self.process_name(pid) == daemon:
                self.daemon_pids.setdefault(key, pid)
                self.end_processes([pid], grace=self.stop_grace)
        # Job steps outlive slurmd by design (slurmstepd and the tasks it started), and clients
        # wait for them: nothing of them is worth a grace period any more.
        self.end_processes(self.processes(), grace=0)

    @staticmethod
    def process_name(pid: int) -> str:
        try:
            return Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            return ""

    def end_processes(self, pids: Sequence[int], grace: float) -> None:
        """SIGTERM, then SIGKILL whatever is still there after `grace` seconds (at once if 0)."""
        rounds = [(signal.SIGTERM, grace)] if grace > 0 else []
        for signum, wait in rounds + [(signal.SIGKILL, 5.0)]:
            alive = [pid for pid in pids if is_running(pid)]
            for pid in alive:
                try:
                    os.kill(pid, signum)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + wait
            while any(is_running(pid) for pid in alive) and time.monotonic() < deadline:
                time.sleep(0.05)

    def processes(self) -> list[int]:
        """Every running process of this cluster: those whose environment names its slurm.conf
        (daemons, slurmstepd, tasks, clients started with `env`) and everything below them."""
        parents = parent_pids()
        spared = own_ancestors()
        mine = processes_with_env("SLURM_CONF", str(self.conf))
        mine.update(pid for pid in self.daemon_pids.values() if pid not in spared)
        grew = True
        while grew:
            below = {pid for pid, parent in parents.items()
                     if parent in mine and pid not in mine and pid not in spared}
            mine |= below
            grew = bool(below)
        return sorted(pid for pid in mine if is_running(pid))

    def __enter__(self) -> SlurmCluster:
        self.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    # -- jobs ------------------------------------------------------------------------------

    def salloc(self, command: Sequence[str], nodes: int = 1, timeout: float = 120.0,
               options: Sequence[str] = (), **popen_kwargs) -> subprocess.CompletedProcess:
        """Run `command` in a new allocation of `nodes` nodes, as `salloc -N nodes command`.

        The command sees SLURM_JOB_ID, SLURM_JOB_NODELIST, SLURM_NNODES; output is captured as
        text unless popen_kwargs say otherwise. On timeout the job is cancelled, salloc and the
        command are killed, and subprocess.TimeoutExpired is raised.
        """
        job_name = f"salloc-{uuid.uuid4().hex[:12]}"
        arguments = [*self.client_prefix, "salloc", "--nodes", str(nodes), "--job-name",
                     job_name, *options, *command]
        popen_kwargs["env"] = {**popen_kwargs.get("env", self.env), JOB_MARKER: job_name}
        popen_kwargs.setdefault("stdin", subprocess.DEVNULL)
        if popen_kwargs.pop("capture_output", not ({"stdout", "stderr"} & set(popen_kwargs))):
            popen_kwargs["stdout"] = popen_kwargs["stderr"] = subprocess.PIPE
        if not {"text", "universal_newlines", "encoding", "errors"} & set(popen_kwargs):
            popen_kwargs["text"] = True
        with subprocess.Popen(arguments, **popen_kwargs) as popen:
            try:
                stdout, stderr = popen.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.cancel(job_name)
                stdout, stderr = popen.communicate()
                raise subprocess.TimeoutExpired(arguments, timeout, stdout, stderr) from None
        return subprocess.CompletedProcess(arguments, popen.returncode, stdout, stderr)

    @contextmanager
    def allocation(self, nodes: int = 1, timeout: float = 60.0,
                   options: Sequence[str] = ()) -> Iterator[dict[str, str]]:
        """Hold an allocation of `nodes` nodes; yields the environment salloc gives its command
        (SLURM_JOB_ID, SLURM_JOB_NODELIST, ...), for running srun, or the suite, inside it.
        Leaving the block cancels the job and kills everything started with that environment."""
        job_name = f"allocation-{uuid.uuid4().hex[:12]}"
        env_file = self.root / "allocations" / f"{job_name}.env"
        log_file = self.root / "allocations" / f"{job_name}.log"
        # The command writes its environment (atomically) and then only holds the allocation.
        holder = 'env -0 > "$0.partial" && mv "$0.partial" "$0" && exec sleep 86400'
        with open(log_file, "wb") as log:
            popen = subprocess.Popen(
                [*self.client_prefix, "salloc", "--nodes", str(nodes), "--job-name",
                 job_name, *options,
                 "sh", "-c", holder, str(env_file)],
                env={**self.env, JOB_MARKER: job_name}, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + timeout
            while not env_file.exists():
                if popen.poll() is not None or time.monotonic() > deadline:
                    ended = (f"salloc exited with status {popen.returncode}"
                             if popen.returncode is not None
                             else f"no allocation within {timeout:.0f} s")
                    raise SlurmUnavailable(f"salloc --nodes {nodes} in {self.root}: {ended}; "
                                           f"see {log_file}\n{read_tail(log_file)}")
                time.sleep(0.05)
            pairs = (item.partition("=") for item in env_file.read_text().split("\0") if item)
            yield {key: value for key, _, value in pairs}
        finally:
            self.cancel(job_name)
            popen.wait()

    def cancel(self, job_name: str) -> None:
        """Cancel the job and kill every process started for it: salloc, its command (which salloc
        puts in a process group of its own) and whatever inherited that environment."""
        subprocess.run([*self.client_prefix, "scancel", "--name", job_name], env=self.env,
                       capture_output=True,
                       timeout=30)
        self.end_processes(sorted(processes_with_env(JOB_MARKER, job_name)), grace=0)
