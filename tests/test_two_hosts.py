"""Multi-node runs across two real hosts (tests/two_hosts.py: network namespaces joined by a veth
pair, each with its own address, hostname and hosts file): Slurm with a slurmd on each host, and
mpirun starting its remote daemon through an rsh agent. The suite runs on node 1, as a batch
script does; the rendezvous must be published on node 1's own address and the collectives bound
to the interface that reaches node 2. A node lost or cut off mid-run ends the run with one line
naming it, leaves nothing on either host, and keeps the runs measured before it.

One suite session per launcher keeps this to a few minutes on two cores: a case that measures,
then cases in which a fault strikes mid-run (later cases still run after a failed one)."""
from __future__ import annotations

import json
import os
import re
import signal
import statistics
import threading
import time
from contextlib import contextmanager

import pytest

from conftest import TINY_CASE_ARGS, processes_mentioning

pytestmark = pytest.mark.slow

ONE_RUN = ["--perf-runs", "1", "--perf-set", "max-runs=1"]
# 2n1g_fp32_b2 measures; in the b4 cases rank 1 stops at its first timed iteration, which pins
# the moment a fault is injected to the middle of a run: the agent on node 2 is killed in
# fp32_b4, node 2's link goes down in bf16_b4.
CASES = ["-k", "2n1g", "--perf-batches", "2,4", *TINY_CASE_ARGS, *ONE_RUN]
STOP_IN_B4 = "stop@rank=1,iter=1,batch=4"
# Far above what a run takes here, even on a loaded CI machine: the faults must end it sooner.
FAULT_TIMEOUT = 240
MEASURED, NODE_LOST, PARTITION = "2n1g_fp32_b2", "2n1g_fp32_b4", "2n1g_bf16_b4"


@contextmanager
def allocation_of_both(two_host_slurm, monkeypatch):
    """As `salloc -N 2` on node 1: the allocation's environment is the suite's."""
    with two_host_slurm.allocation(nodes=2, options=["--exclusive"]) as job_env:
        for key, value in job_env.items():
            if key.startswith("SLURM") or key == "PATH":
                monkeypatch.setenv(key, value)
        yield job_env


def run_record(run, case_id: str, index: int = 1) -> dict:
    return json.loads((run.results_dir / case_id / f"run-{index}.json").read_text())


def assert_nothing_left(run, two_hosts):
    assert processes_mentioning(str(run.results_dir)) == []
    for node in two_hosts.nodes:
        left = [pid for pid in two_hosts.processes_on(node)
                if str(run.results_dir) in open(f"/proc/{pid}/cmdline").read()]
        assert left == [], f"processes of the run left on {node.name}: {left}"


def assert_met_on_node1(saved: dict, two_hosts, set_by_user: list[str]):
    """The rendezvous on node 1's address; each node's own address and interface recorded, and
    its ranks run there."""
    first, second = two_hosts.nodes
    network = saved["network"]
    assert network["rendezvous_endpoint"].startswith(f"{first.address}:"), network
    nodes = {node["host"]: node for node in network["nodes"]}
    assert set(nodes) == {first.name, second.name}, network
    for node in two_hosts.nodes:
        seen = nodes[node.name]
        assert seen["address"] == node.address and seen["interface"] == "fabric0", seen
        assert seen["GLOO_SOCKET_IFNAME"] == "fabric0" and seen["set_by_user"] == set_by_user
        assert seen["hosts_rendezvous"] == (node == first)
    assert saved["record"]["nodes"] == 2 and saved["record"]["world_size"] == 2
    # Each node's ranks ran on that node (its local rank 0 reads its host): none forked on node 1.
    assert [(state["host"], state["node"]) for state in saved["record"]["host_state"]] == \
        [(first.name, 0), (second.name, 1)], saved["record"]["host_state"]


def process_state(pid: int) -> str | None:
    """The process's state letter from /proc (R, S, T for stopped, Z for a zombie); None where
    it is gone."""
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def worker_processes(results_dir) -> list[tuple[int, str, str]]:
    """(pid, state, command line) of the run's processes, on either host."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            command = open(f"/proc/{entry}/cmdline", "rb").read().replace(b"\0", b" ").decode()
        except OSError:
            continue
        state = process_state(int(entry))
        if str(results_dir) in command and state not in (None, "Z"):
            found.append((int(entry), state, command))
    return found


class MidRunFault(threading.Thread):
    """Waits until rank 1 of the case `case_id` has stopped (mid-run), then calls `inject`."""

    def __init__(self, results_dir, case_id: str, inject, timeout: float = 600) -> None:
        super().__init__(daemon=True)
        self.results_dir, self.case_id, self.inject = results_dir, case_id, inject
        self.timeout = timeout
        self.injected_at: float | None = None
        self.result = None   # what `inject` returned

    def run(self) -> None:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if any(state == "T" and f"/{self.case_id}/" in command
                   and "perf_tests.runs.agent" not in command
                   for _, state, command in worker_processes(self.results_dir)):
                self.result = self.inject()
                self.injected_at = time.monotonic()
                return
            time.sleep(0.2)


def kill_agent_on(two_hosts, node, results_dir) -> list[int]:
    """SIGKILL the run's agent on `node`: the node is lost to the run, and its rank, stopped
    mid-run, is left an orphan for the launcher to end."""
    killed = []
    for pid, _, command in worker_processes(results_dir):
        if "perf_tests.runs.agent" in command and pid in two_hosts.processes_on(node):
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
    return killed


def lose_node(two_hosts, node, results_dir) -> list[int]:
    """Every process of the run on `node` killed, as a node that dies takes them all: its agent
    first (so that no agent reports its rank's end), then the rest. Under Slurm an orphaned rank
    that still held the task's output kept slurmstepd waiting a fixed 60 s before it reported
    the task's end (docs/development.md); the mpirun test leaves the orphan to its launcher."""
    killed = kill_agent_on(two_hosts, node, results_dir)
    deadline = time.monotonic() + 10
    while any(process_state(pid) not in (None, "Z") for pid in killed) \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    on_node = set(two_hosts.processes_on(node))
    for pid, _, _ in worker_processes(results_dir):
        if pid in on_node and pid not in killed:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
    return killed


def test_two_host_slurm_measures_then_loses_node2_then_is_cut_off_from_it(
        run_suite, two_hosts, two_host_slurm, tmp_path, monkeypatch):
    second = two_hosts.nodes[1]
    results_dir = tmp_path / "results"
    # The user's interface is honoured (and recorded as theirs).
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "fabric0")
    monkeypatch.setenv("RN50_FAULT", STOP_IN_B4)
    lost = MidRunFault(results_dir, NODE_LOST, lambda: lose_node(two_hosts, second, results_dir))
    cut_off = MidRunFault(results_dir, PARTITION,
                          lambda: two_hosts.set_link(second, up=False))
    lost.start()
    cut_off.start()
    try:
        with allocation_of_both(two_host_slurm, monkeypatch):
            run = run_suite("--perf-launcher", "slurm", *CASES, "--perf-case", PARTITION,
                            "--perf-set", f"timeout={FAULT_TIMEOUT}", results_dir=results_dir,
                            prefix=two_host_slurm.client_prefix)
    finally:
        lost.join(timeout=5)
        cut_off.join(timeout=5)
        # Slurm declared node 2 failed; nothing uses the cluster after this test.
        two_hosts.set_link(second, up=True)
    assert lost.result, "the agent on node 2 was not found mid-run"
    assert cut_off.injected_at, "node 2's link was not taken down mid-run"
    assert run.outcome.ret == 1, run.output

    measured = run.cases[MEASURED]
    assert measured["verdict"] == "no-baseline" and measured["median_ips"] > 0, measured
    saved = run_record(run, MEASURED)
    assert_met_on_node1(saved, two_hosts, ["GLOO_SOCKET_IFNAME"])
    (command,) = saved["commands"]
    assert command[0] == "srun" and command[command.index("--nodes") + 1] == "2"

    assert run.cases[NODE_LOST]["message"] == (
        f"{NODE_LOST}: run 1: node {second.name} lost: its agent (Slurm task 1) was killed; "
        "Slurm ended the step")
    assert run.cases[PARTITION]["message"] == (
        f"{PARTITION}: run 1: node {second.name} stopped answering Slurm (node failure: down or "
        "cut off from the network); Slurm ended the step")
    for case_id in (NODE_LOST, PARTITION):
        assert run.cases[case_id]["verdict"] == "error"
        assert run_record(run, case_id)["launch_seconds"] < FAULT_TIMEOUT
    assert_nothing_left(run, two_hosts)


def test_two_host_mpirun_measures_then_loses_node2(run_suite, two_hosts, tmp_path, monkeypatch):
    first, second = two_hosts.nodes
    hostfile = tmp_path / "hostfile"
    # By name: on node 1 its own name resolves to 127.0.1.1, which node 2 cannot reach.
    hostfile.write_text(f"{first.name} slots=1\n{second.name} slots=1\n")
    results_dir = tmp_path / "results"
    monkeypatch.setenv("OMPI_MCA_plm_rsh_agent", str(two_hosts.rsh_agent))
    monkeypatch.delenv("GLOO_SOCKET_IFNAME", raising=False)
    monkeypatch.delenv("NCCL_SOCKET_IFNAME", raising=False)
    monkeypatch.setenv("RN50_FAULT", STOP_IN_B4)
    lost = MidRunFault(results_dir, NODE_LOST,
                       lambda: kill_agent_on(two_hosts, second, results_dir))
    lost.start()
    run = run_suite("--perf-launcher", "mpirun", "--perf-hostfile", str(hostfile), *CASES,
                    "--perf-set", f"timeout={FAULT_TIMEOUT}", results_dir=results_dir,
                    prefix=two_hosts.enter(first))
    lost.join(timeout=5)
    assert lost.result, "the agent on node 2 was not found mid-run"
    assert run.outcome.ret == 1, run.output

    measured = run.cases[MEASURED]
    assert measured["verdict"] == "no-baseline" and measured["median_ips"] > 0, measured
    saved = run_record(run, MEASURED)
    assert_met_on_node1(saved, two_hosts, [])
    assert f"reaches {second.name}" in saved["network"]["rendezvous_address_chosen_as"]

    failed = run.cases[NODE_LOST]
    assert failed["verdict"] == "error"
    assert failed["message"] == (f"{NODE_LOST}: run 1: node {second.name} lost: its agent "
                                 "(mpirun process 1) was killed by signal 9; mpirun ended the "
                                 "others")
    assert run_record(run, NODE_LOST)["launch_seconds"] < FAULT_TIMEOUT
    assert_nothing_left(run, two_hosts)


# The interconnect beside the scaling cases: 1n1g on node 1 and 2n1g across both hosts. Six
# all-reduces of each message where the bus bandwidth must read unchanged: with two, a session
# with slowed devices read it -33% to +20% on the noisy 2-core VM, past the band (six: -8%, 0%;
# about half a second more a 2n1g run). Two on the throttled link, which costs them over a
# second each and cuts the bandwidth by nine tenths.
SCALING = ["-k", "1n1g or 2n1g", "--perf-batches", "2", *TINY_CASE_ARGS,
           "--perf-set", "interconnect-iters=6", "--perf-explain", "never"]
THROTTLED_ITERS = ["--perf-set", "interconnect-iters=2"]
# One run a case in a judged session, capped at one: a regression then stands on that run (the
# protocol confirms on twice --perf-runs, up to the cap). Both slowdowns below are far beyond the
# band on any host, and what this test proves is which measure each one moves; confirmation on
# more runs is tests/test_verdicts.py's and tests/test_gate_protocol.py's. The cap
# saves the quiet phase a throttled 2n1g run (20 s) and a slowed run of each case (16 s).
JUDGED = ["--perf-runs", "1", "--perf-set", "max-runs=1"]
# The band: below both slowdowns (the throttled link costs the 2n1g case three quarters of its
# throughput and the bus bandwidth more, the compute slowdown costs every device 60%, the 2n1g
# case less: its all-reduce gains from the idle devices; it measured -57% and -59%) and above
# the runs' noise, which depends on the machine: 40%, or twice the farthest recorded run from
# its case's median where that is more (of two runs: the whole gap between them), up to 45%.
# The floor is the VM's two speed levels between sessions: a session judged at the slower one
# read the bus bandwidth -36% and one device's compute 23% below the slowdown's 60% (CI,
# 2026-12-06), past a floor of 30%. The slowdowns, at the faster level (+20%), still read -48%
# or more. Three times the farthest run failed the test on those levels alone (2026-12-06: runs
# of 11.6 and 8.4 img/s, 16% from their median, a band of 47%; four times in the day).
BAND_FLOOR, BAND_CEILING, NOISE_MARGIN = 0.40, 0.45, 2
SCALED = "2n1g_fp32_b2"
SCALED_IMAGES_PER_STEP = 2 * 2   # two ranks of batch 2
# The throttled link: each step's all-reduce of the gradients takes THROTTLED_STEPS steps more
# than recorded (the 2n1g case 1 - 1 / (1 + 3) = 75% slower wherever it runs, as its step waits
# on the link), and at least THROTTLED_LINK times the recorded all-reduce (the bus bandwidth a
# quarter or less). A fixed 500 Mbit/s cost each step here nearly five steps more (-83%),
# and each throttled run 14 s more; on a machine whose link is fast beside its devices, less.
THROTTLED_STEPS, THROTTLED_LINK = 3, 4


def band_over_noise(entries: dict) -> float:
    """The tolerance the judged sessions use, from the recorded runs' own spread."""
    farthest = max(abs(value / statistics.median(entry["runs_ips"]) - 1)
                   for entry in entries.values() for value in entry["runs_ips"])
    band = max(BAND_FLOOR, NOISE_MARGIN * farthest)
    assert band <= BAND_CEILING, (
        f"the recorded runs spread {farthest:.0%} from their median: too noisy a host to tell "
        f"a {1 - BAND_CEILING:.0%} slowdown from noise ({entries})")
    return round(band, 2)


def throttled_rate(entry: dict) -> str:
    """tc's rate for the link (what each node sends), from the 2n1g entry the session recorded:
    the gradients' bytes (its bus bandwidth by its all-reduce time: two ranks send the whole
    of them each) over the throttled all-reduce's time."""
    allreduce_s = entry["gradient_allreduce_s"]
    step_s = SCALED_IMAGES_PER_STEP / entry["median_ips"]
    throttled_s = max(THROTTLED_LINK * allreduce_s, allreduce_s + THROTTLED_STEPS * step_s)
    return f"{entry['busbw_gbps'] * allreduce_s * 8e3 / throttled_s:.0f}mbit"


# Slower devices: every step of every rank followed by an idle wait, so each device trains at
# 40% of its speed (rn50_model/faults.py, Fault). Pinning the run to fewer cores does not do it
# here: a worker takes one thread (two or more fight over a loaded CI machine's cores and slow
# down twentyfold), and one worker alone on one core is as fast as before, so the 1n1g case
# would not see the slowdown the 2n1g case's two workers on one core do.
SLOWER_DEVICES = "slow@share=0.6"


def change_named(message: str, name: str) -> int:
    """The change a regression line gives for `name` ('interconnect busbw', '1n1g compute') in
    whole percent; 0 where it reads unchanged (within the tolerance)."""
    found = re.search(re.escape(name) + r" (unchanged \((?P<within>[-+]\d+)%\)|.*? "
                      r"\((?P<change>[-+]\d+)%\))(;|$)", message)
    assert found, f"no {name} in: {message}"
    return 0 if found["within"] is not None else int(found["change"])


@pytest.mark.quiet_host   # a band over quiet noise: two sessions beside it would move the 1n1g more
def test_two_host_interconnect_throttled_then_compute_slowed(run_suite, two_hosts, tmp_path,
                                                             monkeypatch):
    """A slower link and slower devices both make the 2n1g case slower; its line says which:
    recorded unthrottled, judged with the link throttled (tc tbf), then unthrottled with every
    device slowed down. What did not change passes in each: the 1n1g case beside the throttled
    link, the bus bandwidth beside the slowed devices (a session judged unthrottled, which
    passed, was left out: those two are its controls, and it cost the quiet phase 20 s)."""
    first, second = two_hosts.nodes
    hostfile = tmp_path / "hostfile"
    hostfile.write_text(f"{first.name} slots=1\n{second.name} slots=1\n")
    monkeypatch.setenv("OMPI_MCA_plm_rsh_agent", str(two_hosts.rsh_agent))
    baseline = tmp_path / "baseline.json"
    on_node1 = two_hosts.enter(first)
    launch = ["--perf-launcher", "mpirun", "--perf-hostfile", str(hostfile), *SCALING]

    # Two runs a case, forced (a baseline wants ten): judged by every run below the band.
    recorded = run_suite(*launch, "--perf-runs", "2", "--perf-set", "max-runs=2",
                         "--perf-update-baselines=force", baseline_file=baseline,
                         prefix=on_node1)
    assert recorded.outcome.ret == 0, recorded.output
    entries = json.loads(baseline.read_text())["entries"]
    entry = entries[SCALED]
    assert entry["busbw_gbps"] > 0 and entry["gradient_allreduce_s"] > 0, entry
    assert "busbw_gbps" not in entries["1n1g_fp32_b2"]
    row = recorded.cases[SCALED]
    assert len(row["runs_busbw_gbps"]) == 2 and row["busbw_gbps"] > 0, row
    judged = [*JUDGED, "--perf-tolerance", str(band_over_noise(entries))]

    rate = throttled_rate(entry)
    try:
        two_hosts.throttle(rate)
        throttled = run_suite(*launch, *judged, *THROTTLED_ITERS, baseline_file=baseline,
                              prefix=on_node1)
    finally:
        two_hosts.throttle(None)
    row = throttled.cases[SCALED]
    assert row["verdict"] == "regression", throttled.output
    assert row["busbw_gbps"] < entry["busbw_gbps"] * 0.5, row
    message = row["message"]
    assert f"; interconnect busbw {entry['busbw_gbps']:.3g} -> " in message, message
    assert change_named(message, "interconnect busbw") <= -50, message
    assert change_named(message, "1n1g compute") >= 0, message   # compute is not blamed
    assert throttled.cases["1n1g_fp32_b2"]["verdict"] == "pass", throttled.output

    monkeypatch.setenv("RN50_FAULT", SLOWER_DEVICES)
    slowed = run_suite(*launch, *judged, baseline_file=baseline, prefix=on_node1)
    row = slowed.cases[SCALED]
    assert row["verdict"] == "regression", slowed.output
    message = row["message"]
    assert change_named(message, "1n1g compute") <= -25, message
    assert change_named(message, "interconnect busbw") >= 0, message   # nor the fabric here
    assert slowed.cases["1n1g_fp32_b2"]["verdict"] == "regression", slowed.output
    print("\n".join((f"throttled to {rate}: " + throttled.cases[SCALED]["message"],
                     "devices slowed: " + message)))
    assert_nothing_left(slowed, two_hosts)
