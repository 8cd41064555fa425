"""The CPU host's state around a run's window: each reading on fake /proc and /sys trees (cgroup
v1 and v2, files missing), the reasons a run is marked busy, and one real worker run beside
busy-looping processes."""
import dataclasses
import json
import os
import subprocess
import sys

import pytest

from perf_tests.modes.throughput import run_line
from perf_tests.runs.outcome import RunOutcome
from perf_tests.runs.processes import TOKEN_VARIABLE as LAUNCHER_TOKEN_VARIABLE
from rn50_model import host_state as hs
from rn50_model.host_state import CpuSnapshot, busy_reasons, host_state
from rn50_model.run_state import host_busy

TICKS = hs.CLOCK_TICKS
HOG = "import os\nos.nice(19)\nwhile True: pass"
QUIET = {"host": "vm", "window_s": 10.0, "cpu_count": 2, "other_cores": 0.05,
         "steal_cores": 0.0, "throttled_periods": 0, "throttled_s": 0.0, "cpu_pressure": 0.02,
         "memory_pressure": 0.0, "governor": None, "frequency_mhz": None,
         "loadavg": [1.0, 1.0, 1.0]}


def write(root, relative: str, text: str | bytes):
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)


def stat_line(name: str, user: int, system: int, steal: int = 0) -> str:
    """A /proc/stat CPU line: user nice system idle iowait irq softirq steal guest guest_nice."""
    return f"{name} {user} 0 {system} 5000 7 0 0 {steal} 0 0\n"


def process(root, pid: int, ppid: int, ticks: int, environ: bytes = b"PATH=/bin\0"):
    """A /proc/<pid> whose utime + stime + cutime + cstime make `ticks`."""
    write(root, f"proc/{pid}/stat",
          f"{pid} (python3 -m x) S {ppid} 1 1 0 -1 0 0 0 0 0 {ticks} 0 0 0 20 0 4 0\n")
    write(root, f"proc/{pid}/environ", environ)


def token_environ(token: str) -> bytes:
    return f"PATH=/bin\0{hs.TOKEN_VARIABLE}={token}\0".encode()


def test_the_worker_reads_the_launchers_token_variable():
    assert hs.TOKEN_VARIABLE == LAUNCHER_TOKEN_VARIABLE


def test_busy_and_steal_are_summed_over_the_cpus_this_process_may_use(tmp_path):
    write(tmp_path, "proc/stat", stat_line("cpu", 900, 90, 9) + stat_line("cpu0", 100, 10, 1)
          + stat_line("cpu1", 200, 20, 2) + stat_line("cpu2", 600, 60, 6) + "intr 1 2 3\n")
    snapshot = CpuSnapshot.read("t", tmp_path, cpus={0, 1})
    assert snapshot.busy_s == pytest.approx(330 / TICKS)
    assert snapshot.steal_s == pytest.approx(3 / TICKS)
    assert CpuSnapshot.read("t", tmp_path, cpus=set()).busy_s == pytest.approx(990 / TICKS)


def test_a_cpu_missing_from_proc_stat_leaves_busy_unknown(tmp_path):
    write(tmp_path, "proc/stat", stat_line("cpu", 900, 90) + stat_line("cpu0", 100, 10))
    snapshot = CpuSnapshot.read("t", tmp_path, cpus={0, 1})
    assert snapshot.busy_s is None and snapshot.steal_s is None


def test_the_runs_own_processes_are_those_holding_its_token(tmp_path):
    process(tmp_path, 100, 1, 40, token_environ("abc"))
    process(tmp_path, 101, 100, 60, token_environ("abc"))
    process(tmp_path, 200, 1, 500, token_environ("other"))
    process(tmp_path, 300, 1, 700)
    write(tmp_path, "proc/400/stat", "400 (gone")  # unreadable: left out
    snapshot = CpuSnapshot.read("abc", tmp_path, cpus=set())
    assert snapshot.own_processes == 2 and snapshot.own_s == pytest.approx(100 / TICKS)


def test_without_a_token_the_run_is_the_tree_of_this_process_parent(tmp_path):
    parent = os.getppid()
    process(tmp_path, parent, 1, 10)
    process(tmp_path, 5001, parent, 20)
    process(tmp_path, 5002, 5001, 30)
    process(tmp_path, 6000, 1, 400)
    snapshot = CpuSnapshot.read(None, tmp_path, cpus=set())
    assert snapshot.own_processes == 3 and snapshot.own_s == pytest.approx(60 / TICKS)


def two_snapshots(tmp_path, before: dict, after: dict, seconds: float):
    """Snapshots of two fake trees `seconds` apart: {relative path: text} each."""
    snapshots = []
    for name, files in (("before", before), ("after", after)):
        for relative, text in files.items():
            write(tmp_path / name, relative, text)
        snapshots.append(CpuSnapshot.read("abc", tmp_path / name, cpus={0, 1}))
    return snapshots[0], dataclasses.replace(snapshots[1], at=snapshots[0].at + seconds)


def test_other_load_is_the_hosts_busy_time_less_the_runs_own_in_cores(tmp_path):
    ticks = TICKS * 10  # ten seconds of CPU
    before, after = two_snapshots(
        tmp_path,
        {"proc/stat": stat_line("cpu0", 0, 0) + stat_line("cpu1", 0, 0),
         "proc/100/stat": "100 (w) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0\n",
         "proc/100/environ": token_environ("abc")},
        {"proc/stat": stat_line("cpu0", ticks, 0, TICKS) + stat_line("cpu1", ticks, ticks),
         "proc/100/stat": f"100 (w) R 1 1 1 0 -1 0 0 0 0 0 {ticks} {ticks // 2} 0 0\n",
         "proc/100/environ": token_environ("abc")}, seconds=10.0)
    state = host_state(before, after)
    assert state["window_s"] == 10.0 and state["cpu_count"] == 2
    assert state["other_cores"] == pytest.approx(1.5) and state["steal_cores"] == 0.1
    assert state["own_processes"] == 1


def test_other_load_below_zero_reads_as_zero(tmp_path):
    before, after = two_snapshots(
        tmp_path, {"proc/stat": stat_line("cpu0", 0, 0) + stat_line("cpu1", 0, 0),
                   "proc/100/stat": "100 (w) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0\n",
                   "proc/100/environ": token_environ("abc")},
        {"proc/stat": stat_line("cpu0", 1, 0) + stat_line("cpu1", 0, 0),
         "proc/100/stat": "100 (w) R 1 1 1 0 -1 0 0 0 0 0 3 0 0 0\n",
         "proc/100/environ": token_environ("abc")}, seconds=1.0)
    assert host_state(before, after)["other_cores"] == 0.0


@pytest.mark.parametrize("files, throttled", [
    # cgroup v2: the process's own cgroup's cpu.stat, in microseconds
    ({"proc/self/cgroup": "0::/job/step\n",
      "sys/fs/cgroup/job/step/cpu.stat": "usage_usec 100\nnr_periods 40\nnr_throttled 12\n"
                                         "throttled_usec 800000\n"}, (12, 0.8)),
    # a hybrid mount: the unified hierarchy's cpu.stat without the cpu controller has no
    # throttling counters; v1's cpu,cpuacct has them, in nanoseconds
    ({"proc/self/cgroup": "4:memory:/x\n2:cpu,cpuacct:/job\n0::/job\n",
      "sys/fs/cgroup/unified/job/cpu.stat": "usage_usec 100\n",
      "sys/fs/cgroup/cpu,cpuacct/job/cpu.stat": "nr_periods 40\nnr_throttled 3\n"
                                                "throttled_time 1500000000\n"}, (3, 1.5)),
    # v1's cpu controller alone, its path hidden by the namespace: the mount's root
    ({"proc/self/cgroup": "1:cpu:/docker/abc\n2:cpuacct:/docker/abc\n",
      "sys/fs/cgroup/cpu/cpu.stat": "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n"},
     (0, 0.0)),
], ids=["v2", "v1-hybrid", "v1-namespaced"])
def test_cpu_throttling_is_read_from_the_process_own_cgroup(tmp_path, files, throttled):
    for path, text in files.items():
        write(tmp_path, path, text)
    snapshot = CpuSnapshot.read("t", tmp_path, cpus=set())
    assert (snapshot.throttled_periods, snapshot.throttled_s) == throttled


def test_pressure_governor_frequency_and_load_average(tmp_path):
    write(tmp_path, "proc/pressure/cpu", "some avg10=1.00 avg60=0.50 avg300=0.10 total=2500000\n"
          "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
    write(tmp_path, "proc/pressure/memory", "some avg10=0.00 avg60=0.00 avg300=0.00 total=7\n")
    write(tmp_path, "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", "powersave\n")
    write(tmp_path, "sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq", "2400000\n")
    write(tmp_path, "proc/loadavg", "1.07 2.70 3.12 3/92 17705\n")
    snapshot = CpuSnapshot.read("t", tmp_path, cpus=set())
    assert snapshot.cpu_pressure_s == 2.5 and snapshot.memory_pressure_s == 0.000007
    assert snapshot.governor == "powersave" and snapshot.frequency_mhz == 2400.0
    assert snapshot.loadavg == [1.07, 2.7, 3.12]


def test_pressure_is_a_share_of_the_window(tmp_path):
    line = "some avg10=0 avg60=0 avg300=0 total={}\n"
    before, after = two_snapshots(tmp_path, {"proc/pressure/cpu": line.format(1_000_000)},
                                  {"proc/pressure/cpu": line.format(4_500_000)}, seconds=10.0)
    state = host_state(before, after)
    assert state["cpu_pressure"] == 0.35 and state["memory_pressure"] is None


def test_nothing_readable_is_recorded_as_absent_never_guessed(tmp_path):
    write(tmp_path, "proc/stat", "garbage\n")
    write(tmp_path, "proc/self/cgroup", "not a cgroup line\n")
    write(tmp_path, "proc/pressure/cpu", "some avg10=x\n")
    write(tmp_path, "proc/loadavg", "")
    before = CpuSnapshot.read("t", tmp_path / "empty", cpus=set())
    after = CpuSnapshot.read("t", tmp_path, cpus=set())
    state = host_state(before, dataclasses.replace(after, at=before.at + 1.0))
    assert {key for key, value in state.items() if value is not None} == {"host", "window_s"}
    assert busy_reasons(state) == []


def test_no_process_of_the_run_found_leaves_its_time_unknown(tmp_path):
    process(tmp_path, 200, 1, 500, token_environ("other"))
    snapshot = CpuSnapshot.read("abc", tmp_path, cpus=set())
    assert snapshot.own_processes is None and snapshot.own_s is None


def test_a_quiet_host_gives_no_reason():
    assert busy_reasons(QUIET) == []
    assert busy_reasons({**QUIET, "other_cores": 0.45}) == []


@pytest.mark.parametrize("change, reason", [
    ({"other_cores": 1.42}, "other processes used 1.4 of 2 cores"),
    ({"other_cores": 0.5, "cpu_count": None}, "other processes used 0.5 cores"),
    ({"steal_cores": 0.6}, "the hypervisor took 0.6 of 2 cores (steal)"),
    ({"throttled_periods": 12, "throttled_s": 0.8}, "CPU quota throttled 12 times (0.8 s)"),
    ({"memory_pressure": 0.1}, "memory pressure 10% of the window"),
])
def test_each_thing_that_is_off_is_one_clause(change, reason):
    assert busy_reasons({**QUIET, **change}) == [reason]


def test_a_large_host_is_marked_from_a_quarter_of_its_cores():
    large = {**QUIET, "cpu_count": 64}
    assert busy_reasons({**large, "other_cores": 15.0}) == []
    assert busy_reasons({**large, "other_cores": 16.0}) == ["other processes used 16.0 of 64 cores"]


def test_cpu_pressure_alone_is_no_mark():
    """The run's own threads waiting for one another make it: 44% on a quiet run here."""
    assert busy_reasons({**QUIET, "cpu_pressure": 0.44}) == []


def test_a_little_throttling_is_no_mark():
    assert busy_reasons({**QUIET, "throttled_periods": 2, "throttled_s": 0.1}) == []


def test_several_hosts_name_the_host_and_node_of_each_reason():
    states = [{**QUIET, "node": 0}, {**QUIET, "host": "b", "node": 1, "other_cores": 1.0}]
    assert host_busy(states) == ["b (node 1): other processes used 1.0 of 2 cores"]
    assert host_busy(states[1:]) == ["other processes used 1.0 of 2 cores"]


def test_a_marked_run_says_why_in_its_progress_line():
    record = {"host_busy": ["other processes used 1.4 of 2 cores"]}
    marked = RunOutcome(2, "ok", 6.69, "", record=record)
    assert run_line("1n1g_fp32_b8", marked, 3, 9) == (
        "1n1g_fp32_b8 run 2/3: 6.69 img/s (host busy: other processes used 1.4 of 2 cores)")
    quiet = RunOutcome(4, "ok", 6.69, "", record={"host_busy": []})
    assert run_line("1n1g_fp32_b8", quiet, 3, 9) == (
        "1n1g_fp32_b8 run 4 (more runs to decide, up to 9): 6.69 img/s")


def test_a_worker_beside_busy_loops_is_marked_busy(tmp_path, worker_env):
    """Real processes: two busy loops beside a one-thread worker on this host take at least a
    core between them during its window, wherever the suite's other tests run. At the lowest
    priority, so that the worker's start-up is not slowed down with it."""
    worker_env[hs.TOKEN_VARIABLE] = "host-state-test"
    hog_env = {key: value for key, value in worker_env.items() if key != hs.TOKEN_VARIABLE}
    hogs = [subprocess.Popen([sys.executable, "-c", HOG], env=hog_env) for _ in range(2)]
    try:
        done = subprocess.run(
            [sys.executable, "-m", "rn50_model.worker", "--run-dir", str(tmp_path),
             "--precision", "fp32", "--batch-per-device", "4", "--image-size", "32",
             "--warmup-iters", "1", "--timed-iters", "8", "--threads", "1"],
            env=worker_env, capture_output=True, text=True, timeout=120)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads((tmp_path / "record.json").read_text())
    [state] = record["host_state"]
    # Two loops on two cores beside a one-thread worker: about one core; steal and clock-tick
    # rounding take some of it, so the test holds it to the floor that marks a run.
    assert state["own_processes"] == 1 and state["other_cores"] >= 0.5, state
    assert any(reason.startswith("other processes used") for reason in record["host_busy"])
