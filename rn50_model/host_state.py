"""What else the CPU host was doing while a run's timed window was open: other processes' CPU
time, the CPU quota's throttling, pressure stalls, the frequency governor and the load average.

Read on each host's local rank 0 just before the barrier that opens the window and right after
the window closes, never inside it. Anything unreadable is left out (None), never guessed, and
no read raises. The run's own processes are those whose environment holds
`RN50_PERF_TOKEN=<token>` (the launcher's token; a forked worker's, kept by its fork server);
without one, the tree of this process's parent (torchrun's agent and its workers). No torch
import: this reads files only.
"""
from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

# The variable every process of one launch holds (set by perf_tests/runs/processes.py, which reads
# the token here too: rn50_model stands alone, the suite imports it).
TOKEN_VARIABLE = "RN50_PERF_TOKEN"
# The folder of a session's fork servers (rn50_model/fork_server.py) in the environment of each
# process one of them forks, and of the server: that process's /proc environ is its server's,
# so the server keeps each worker's own token and rank in the folder (`registry_file`).
SERVERS_VARIABLE = "RN50_FORK_SERVERS"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

# A run is marked busy when other processes used at least a quarter of its cores, and never for
# less than half a core: quiet runs on the 2-core development host read 0.0-0.37 other cores,
# runs beside other sessions or busy loops 0.7-1.4 (docs/measurement.md).
OTHER_LOAD_SHARE = 0.25
OTHER_LOAD_FLOOR = 0.5
# Before a session, the one-minute load average stands for other load: it counts the session's
# own processes too (pytest and the probe that reads it, up to about one runnable process over
# the last minute), so that much is allowed on top of the per-run limit.
SESSION_LOAD = 1.0
# Throttled time worth a mark: below the smallest tolerance (5%), with room for noise.
THROTTLED_SHARE = 0.02
# Memory stalls ("some" task waiting) worth a mark, as a share of the window. CPU pressure is
# recorded but marks nothing: the run's own threads waiting for one another make it (44% on a
# quiet run there, against 51-97% on busy ones).
MEMORY_PRESSURE_SHARE = 0.05


def quietly(read, *args):
    """`read(*args)`, or None where it fails for any reason: a missing or odd file."""
    try:
        return read(*args)
    except Exception:
        return None


def cpu_times(root: Path, cpus: set[int] | None) -> tuple[float, float]:
    """(busy, steal) seconds so far of the CPUs this process may run on (all CPUs where that is
    not known), from /proc/stat: busy is user + nice + system + irq + softirq."""
    wanted = {f"cpu{number}" for number in cpus} if cpus else {"cpu"}
    busy = steal = 0
    found = 0
    for line in (root / "proc/stat").read_text().splitlines():
        fields = line.split()
        if fields and fields[0] in wanted:
            user, nice, system, _idle, _iowait, irq, softirq, stolen = map(int, fields[1:9])
            busy += user + nice + system + irq + softirq
            steal += stolen
            found += 1
    if found != len(wanted):
        raise ValueError("a CPU line is missing from /proc/stat")
    return busy / CLOCK_TICKS, steal / CLOCK_TICKS


def process_table(root: Path) -> dict[int, tuple[int, float]]:
    """pid -> (parent pid, CPU seconds of the process and of its children it has reaped)."""
    table = {}
    for entry in (root / "proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2:].split()  # fields[0] is the state, field 3
            ticks = sum(int(value) for value in fields[11:15])  # utime stime cutime cstime
            table[int(entry.name)] = (int(fields[1]), ticks / CLOCK_TICKS)
        except (OSError, ValueError, IndexError):
            continue  # gone, or not ours to read
    return table


def alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie does not)."""
    return process_mark(pid) is not None


def process_mark(pid: int) -> str | None:
    """`pid` and its start time (/proc/<pid>/stat's 22nd field, in clock ticks since boot), or
    None where it does not run (gone, or a zombie): one process, where a pid alone names
    whichever process the kernel gave it to after it ended."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            stat = handle.read()
    except OSError:
        return None
    state, *fields = stat[stat.rindex(")") + 2:].split()
    return None if state == "Z" else f"{pid} {fields[18]}"


def still_runs(mark: str) -> bool:
    """Whether the process a `process_mark` named still runs: that pid, started then."""
    pid, _, _ = mark.strip().partition(" ")
    return pid.isdigit() and process_mark(int(pid)) == mark.strip()


def registry_file(folder: str | Path, pid: int) -> Path:
    """Where the fork server of `folder` keeps worker `pid`'s variables."""
    return Path(folder) / "children" / f"{pid}.json"


def registered_variables(folder: str, pid: int) -> dict[str, str]:
    """What a fork server of `folder` keeps of worker `pid`; {} for a process none forked."""
    try:
        return json.loads(registry_file(folder, pid).read_text())
    except (OSError, ValueError):
        return {}


def process_variables(root: Path, pid: int) -> dict[str, str]:
    """Process `pid`'s environment as its launch set it: /proc's, and for a worker a fork server
    forked (whose /proc environ is its server's), the token and rank the server keeps of it
    (rn50_model/fork_server.py); {} where it cannot be read."""
    try:
        environ = (root / f"proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    variables = dict(item.decode(errors="replace").split("=", 1)
                     for item in environ.split(b"\0") if b"=" in item)
    if SERVERS_VARIABLE in variables:
        variables.update(registered_variables(variables[SERVERS_VARIABLE], pid))
    return variables


def holds_token(root: Path, pid: int, token: str) -> bool:
    """Whether process `pid` belongs to the launch whose token is `token`."""
    return process_variables(root, pid).get(TOKEN_VARIABLE) == token


def descendants(table: dict[int, tuple[int, float]], top: int) -> set[int]:
    """`top` and every process below it."""
    found, frontier = {top}, [top]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, (ppid, _) in table.items() if ppid == parent and pid not in found]
        found.update(children)
        frontier.extend(children)
    return found & set(table)


def own_pids(root: Path, token: str | None,
             table: dict[int, tuple[int, float]] | None = None) -> set[int]:
    """The run's own processes: those holding its token, else the tree of this process's
    parent (torchrun's agent and its workers; for the suite's probe, the pytest process)."""
    table = process_table(root) if table is None else table
    if token:
        return {pid for pid in table if holds_token(root, pid, token)}
    return descendants(table, os.getppid())


def pids_of_this_run() -> set[int]:
    """`own_pids` of the run this process belongs to (its launcher's token)."""
    return own_pids(Path("/"), os.environ.get(TOKEN_VARIABLE))


def own_processes(root: Path, token: str | None) -> tuple[int, float]:
    """(how many, CPU seconds so far) of the run's own processes."""
    table = process_table(root)
    pids = own_pids(root, token, table)
    if not pids:
        raise LookupError("none of the run's processes is readable")  # this one at least is
    return len(pids), sum(table[pid][1] for pid in pids)


def cgroup_cpu_stat_files(root: Path) -> list[tuple[Path, str]]:
    """Where this process's CPU cgroup keeps `cpu.stat`, and the throttled-time key and unit
    each uses: cgroup v2 first (the unified mount, pure or hybrid), then v1's cpu controller.
    The mount's own root too, for a container whose cgroup namespace hides the path."""
    candidates = []
    for line in (root / "proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        inside = path.lstrip("/")
        if not controllers:
            mounts = ["sys/fs/cgroup", "sys/fs/cgroup/unified"]
            key = "throttled_usec"
        elif "cpu" in controllers.split(","):
            mounts = [f"sys/fs/cgroup/{controllers}", "sys/fs/cgroup/cpu,cpuacct",
                      "sys/fs/cgroup/cpu"]
            key = "throttled_time"
        else:
            continue
        for mount in mounts:
            candidates += [(root / mount / inside / "cpu.stat", key),
                           (root / mount / "cpu.stat", key)]
    return sorted(candidates, key=lambda candidate: candidate[1] == "throttled_time")


def cgroup_throttling(root: Path) -> tuple[int, float]:
    """(periods throttled, seconds throttled) so far by this process's CPU quota."""
    for path, key in cgroup_cpu_stat_files(root):
        try:
            stat = dict(line.split() for line in path.read_text().splitlines() if line.strip())
        except (OSError, ValueError):
            continue
        if "nr_throttled" in stat and key in stat:
            unit = 1e6 if key == "throttled_usec" else 1e9
            return int(stat["nr_throttled"]), int(stat[key]) / unit
    raise FileNotFoundError("no cgroup cpu.stat with throttling counters")


def pressure_seconds(root: Path, resource: str) -> float:
    """Seconds so far in which some task waited for `resource` (cpu, memory): PSI's total."""
    for line in (root / f"proc/pressure/{resource}").read_text().splitlines():
        if line.startswith("some "):
            fields = dict(field.split("=") for field in line.split()[1:])
            return int(fields["total"]) / 1e6
    raise ValueError(f"no 'some' line in /proc/pressure/{resource}")


def governor(root: Path) -> str:
    path = root / "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"
    return path.read_text().strip()


def frequency_mhz(root: Path) -> float:
    path = root / "sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq"
    return int(path.read_text().strip()) / 1000.0  # kHz


def load_average(root: Path) -> list[float]:
    """The 1, 5 and 15 minute load averages."""
    one, five, fifteen = (root / "proc/loadavg").read_text().split()[:3]
    return [float(one), float(five), float(fifteen)]


def allowed_cpus() -> set[int]:
    return set(os.sched_getaffinity(0))


@dataclass(frozen=True)
class CpuSnapshot:
    """The host's counters at one moment; two of them make a window's `host_state`."""
    at: float
    cpus: set[int] | None
    busy_s: float | None
    steal_s: float | None
    own_processes: int | None
    own_s: float | None
    throttled_periods: int | None
    throttled_s: float | None
    cpu_pressure_s: float | None
    memory_pressure_s: float | None
    governor: str | None
    frequency_mhz: float | None
    loadavg: list[float] | None

    @classmethod
    def read(cls, token: str | None, root: Path = Path("/"),
             cpus: set[int] | None = None) -> "CpuSnapshot":
        cpus = cpus if cpus is not None else quietly(allowed_cpus)
        busy, steal = quietly(cpu_times, root, cpus) or (None, None)
        count, own = quietly(own_processes, root, token) or (None, None)
        periods, throttled = quietly(cgroup_throttling, root) or (None, None)
        return cls(at=time.monotonic(), cpus=cpus, busy_s=busy, steal_s=steal,
                   own_processes=count, own_s=own, throttled_periods=periods,
                   throttled_s=throttled,
                   cpu_pressure_s=quietly(pressure_seconds, root, "cpu"),
                   memory_pressure_s=quietly(pressure_seconds, root, "memory"),
                   governor=quietly(governor, root), frequency_mhz=quietly(frequency_mhz, root),
                   loadavg=quietly(load_average, root))

    @classmethod
    def of_this_run(cls) -> "CpuSnapshot":
        """The snapshot of the run this process belongs to (its launcher's token)."""
        return cls.read(os.environ.get(TOKEN_VARIABLE))


def difference(before, after, rounding: int = 3):
    """after - before, rounded; None where either is unknown."""
    if before is None or after is None:
        return None
    return round(after - before, rounding)


def per_second(amount: float | None, seconds: float, rounding: int = 3) -> float | None:
    return None if amount is None or seconds <= 0 else round(amount / seconds, rounding)


def host_state(before: CpuSnapshot, after: CpuSnapshot) -> dict:
    """The record of one window: other load and steal in cores, throttling, pressure as a share
    of the window, and the governor, frequency and load average at its end. Other load below
    zero (clock-tick rounding) reads as zero."""
    window = after.at - before.at
    busy = difference(before.busy_s, after.busy_s)
    own = difference(before.own_s, after.own_s)
    other = per_second(busy - own, window) if busy is not None and own is not None else None
    return {
        "host": socket.gethostname(),
        "window_s": round(window, 3),
        "cpu_count": len(after.cpus) if after.cpus else None,
        "other_cores": max(other, 0.0) if other is not None else None,
        "own_processes": after.own_processes,
        "steal_cores": per_second(difference(before.steal_s, after.steal_s), window),
        "throttled_periods": difference(before.throttled_periods, after.throttled_periods),
        "throttled_s": difference(before.throttled_s, after.throttled_s),
        "cpu_pressure": per_second(difference(before.cpu_pressure_s, after.cpu_pressure_s),
                                   window),
        "memory_pressure": per_second(
            difference(before.memory_pressure_s, after.memory_pressure_s), window),
        "governor": after.governor,
        "frequency_mhz": after.frequency_mhz,
        "loadavg": after.loadavg,
    }


def busy_reasons(state: dict) -> list[str]:
    """One clause per thing that was off during the window; empty on a quiet host."""
    count = state.get("cpu_count")
    limit = max(OTHER_LOAD_FLOOR, OTHER_LOAD_SHARE * (count or 0))
    of_cores = f" of {count} cores" if count else " cores"
    window = state.get("window_s") or 0.0
    reasons = []
    if (state.get("other_cores") or 0.0) >= limit:
        reasons.append(f"other processes used {state['other_cores']:.1f}{of_cores}")
    if (state.get("steal_cores") or 0.0) >= limit:
        reasons.append(f"the hypervisor took {state['steal_cores']:.1f}{of_cores} (steal)")
    if state.get("throttled_periods") and (state.get("throttled_s") or 0.0) >= (
            THROTTLED_SHARE * window):
        reasons.append(f"CPU quota throttled {state['throttled_periods']} times "
                       f"({state['throttled_s']:.1f} s)")
    if (state.get("memory_pressure") or 0.0) >= MEMORY_PRESSURE_SHARE:
        reasons.append(f"memory pressure {state['memory_pressure']:.0%} of the window")
    return reasons


def load_reasons(loadavg: list[float] | None, cpu_count: int | None) -> list[str]:
    """Before a session: the one-minute load average where it says other processes keep the
    host busy (the per-run limit, plus SESSION_LOAD); empty where it does not or is unknown."""
    if not loadavg or not cpu_count:
        return []
    limit = max(OTHER_LOAD_FLOOR, OTHER_LOAD_SHARE * cpu_count) + SESSION_LOAD
    return [f"load average {loadavg[0]:.1f} on {cpu_count} cores"] if loadavg[0] >= limit else []
