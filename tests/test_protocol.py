"""The protocol's loop with real processes that stand in for the workers and write the records
a worker writes: runs are saved as they end, more runs are taken while the verdict asks, a
failure or a timeout ends the case, and nothing outlives a launch."""
import json
import os
import sys
from functools import partial
from pathlib import Path

import pytest

from perf_tests.core.cases import Case
from perf_tests.results.folder import ResultsFolder
from perf_tests.runs.agent import AGENT_EXIT_MARK
from perf_tests.runs.launch import Host, Launcher, LaunchRequest, LaunchResult
from perf_tests.runs.outcome import (assemble_run, killed_cause, node_lines, rank_exits,
                                      unresolved_store)
from perf_tests.runs.processes import WaitResult, processes_with_token
from perf_tests.runs.protocol import run_rounds

# Writes what rank 0 of a worker writes, with the img/s given for this run; `fail` exits 1
# without a record, `rank-failed` as the suite's agent does when a worker failed, `port-taken`
# as one whose rank 0 could not bind the store's port, `hang` sleeps past any timeout.
STAND_IN = """
import json, os, sys, time
run_dir, behaviour = sys.argv[1], sys.argv[2]
if behaviour == "hang":
    time.sleep(600)
if behaviour == "fail":
    print("stand-in failing", file=sys.stderr)
    sys.exit(1)
if behaviour == "rank-failed":  # the suite's agent's report of a worker's exit
    print("RN50_AGENT_EXIT " + json.dumps({"rank": 1, "exitcode": 1, "first": True}),
          file=sys.stderr)
    sys.exit(1)
if behaviour == "port-taken":   # the agent's store could not bind its port
    print("RuntimeError: The server socket has failed to bind to [::]:29500 (errno: 98 - "
          "Address already in use).", file=sys.stderr)
    sys.exit(1)
record = {"outcome": "ok", "global_ips": float(behaviour), "environment": {}}
with open(os.path.join(run_dir, "record.json"), "w") as handle:
    json.dump(record, handle)
"""


class StandInLauncher(Launcher):
    name = "stand-in"

    def __init__(self, behaviours):
        super().__init__()
        self.behaviours = list(behaviours)

    def skip_reason(self, case, host):
        return None

    def commands(self, request):
        behaviour = self.behaviours.pop(0)
        return [("agent0", [sys.executable, "-c", STAND_IN, str(request.run_dir), behaviour])]


CASE = Case(1, 1, "fp32", 8)


def run(tmp_path, behaviours, runs=3, max_runs=6, wanted=lambda ips: False, timeout=30.0,
        rdzv_port=None):
    results = ResultsFolder(tmp_path / "results")

    def request_for(run_dir: Path) -> LaunchRequest:
        return LaunchRequest(case=CASE, worker_args=[], run_dir=run_dir, env=dict(os.environ),
                             cwd=tmp_path, timeout=timeout, rdzv_port=rdzv_port)

    launcher = StandInLauncher(behaviours)
    return run_rounds(CASE, launcher, request_for, partial(results.run_dir, CASE.case_id), runs,
                      max_runs, more_wanted=lambda done: wanted(done.runs_ips)), results


def saved_runs(results):
    folder = results.path / CASE.case_id
    return sorted(json.loads(path.read_text())["outcome"] for path in folder.glob("run-*.json"))


def test_r_runs_each_saved_as_it_ends(tmp_path):
    case_runs, results = run(tmp_path, ["10", "11", "12"])
    assert case_runs.runs_ips == [10.0, 11.0, 12.0]
    assert saved_runs(results) == ["ok"] * 3
    record = json.loads((results.path / CASE.case_id / "run-2.json").read_text())
    assert record["run"] == 2 and record["global_ips"] == 11.0 and record["launcher"] == "stand-in"


def test_more_runs_while_the_verdict_wants_them_up_to_the_cap(tmp_path):
    asked = []

    def wanted(ips):
        asked.append(len(ips))
        return True

    case_runs, _ = run(tmp_path, ["10", "11", "12", "13", "14", "15"], wanted=wanted, max_runs=5)
    assert case_runs.runs_ips == [10.0, 11.0, 12.0, 13.0, 14.0]
    assert asked == [3, 4]  # asked after the R runs, and not again at the cap

    case_runs, _ = run(tmp_path / "b", ["10", "11", "12", "13"],
                       wanted=lambda ips: len(ips) < 4)
    assert len(case_runs.runs_ips) == 4


def test_a_failed_run_ends_the_case_and_is_saved(tmp_path):
    case_runs, results = run(tmp_path, ["10", "fail", "12"])
    assert case_runs.runs_ips == [10.0]
    assert case_runs.failed.message == "run 2: no record was written (agent0 exited with 1)"
    assert any("stand-in failing" in line for line in case_runs.failed.stderr_tail)
    assert saved_runs(results) == ["error", "ok"]


def test_a_run_whose_free_port_was_taken_is_launched_once_more(tmp_path):
    case_runs, results = run(tmp_path, ["10", "port-taken", "11", "12"])
    assert case_runs.runs_ips == [10.0, 11.0, 12.0] and case_runs.failed is None
    assert [run.index for run in case_runs.runs] == [1, 2, 3]   # the taken one's number reused
    (taken,) = case_runs.relaunched
    assert taken.index == 2 and taken.message == (
        "run 2: the free rendezvous port the launcher picked was taken before its store bound it")
    folder = results.path / CASE.case_id
    set_aside = json.loads((folder / "run-2-relaunched.json").read_text())
    assert set_aside["outcome"] == "error" and set_aside["relaunched"] is True
    assert (folder / "run-2-relaunched").is_dir()
    assert json.loads((folder / "run-2.json").read_text())["global_ips"] == 11.0
    assert saved_runs(results) == ["error", "ok", "ok", "ok"]


def test_a_relaunch_takes_none_of_the_runs_the_cap_allows(tmp_path):
    case_runs, _ = run(tmp_path, ["port-taken", "10", "11", "12"], runs=3, max_runs=3)
    assert case_runs.runs_ips == [10.0, 11.0, 12.0] and len(case_runs.relaunched) == 1


def test_a_second_taken_port_ends_the_case(tmp_path):
    case_runs, results = run(tmp_path, ["port-taken", "port-taken", "12"])
    assert case_runs.runs_ips == [] and len(case_runs.relaunched) == 1
    assert case_runs.failed.index == 1 and not case_runs.failed.relaunched
    assert "taken before its store bound it" in case_runs.failed.message
    assert saved_runs(results) == ["error", "error"]


def test_a_rank_that_exited_with_an_error_is_the_cause_and_no_launch_follows(tmp_path):
    case_runs, _ = run(tmp_path, ["rank-failed", "10"])
    assert case_runs.relaunched == [] and case_runs.runs_ips == []
    assert case_runs.failed.message == "run 1: rank 1 exited with code 1"


def test_a_given_port_in_use_fails_the_case_without_a_second_launch(tmp_path):
    # The user's --perf-set rdzv-port in use is theirs to change: no second launch.
    case_runs, _ = run(tmp_path / "given", ["port-taken", "10"], rdzv_port=29500)
    assert case_runs.runs_ips == [] and case_runs.failed.message == (
        "run 1: the rendezvous port was in use; pick another with --perf-set rdzv-port, or leave "
        "it out to use a free one")


@pytest.mark.idle_wait
def test_a_run_past_the_timeout_is_ended(tmp_path):
    # 5 s: the stand-in is asleep by then even on a loaded host (at 2 s it may still start up).
    case_runs, _ = run(tmp_path, ["hang"], runs=1, timeout=5.0)
    assert case_runs.failed.message.startswith("run 1: no result after 5 s (--perf-set timeout); "
                                               "at the timeout: pid ")
    assert "sleeping" in case_runs.failed.message or "waiting" in case_runs.failed.message


# What an agent whose workers could not resolve the host's name printed, every few seconds,
# until the run's timeout (an image without /etc/hosts, issue 60).
UNRESOLVED = ("[W1128 09:14:16.187188381 socket.cpp:764] [c10d] The IPv6 network addresses of "
              "(vm, 42305) cannot be retrieved (gai error: -2 - Name or service not known).\n")


def test_a_timed_out_run_names_a_rendezvous_store_whose_host_does_not_resolve():
    assert unresolved_store(UNRESOLVED * 6) == (
        "; c10d kept retrying its rendezvous store at vm, a name that does not resolve where "
        "the agents run (-2 - Name or service not known): add it to their /etc/hosts")
    # Once is a host without IPv6, whose IPv4 address then served.
    assert unresolved_store(UNRESOLVED) == ""


def test_no_process_outlives_a_launch(tmp_path):
    results = ResultsFolder(tmp_path / "results")
    launcher = StandInLauncher(["hang"])
    request = LaunchRequest(case=CASE, worker_args=[], run_dir=results.run_dir("x", 1),
                            env=dict(os.environ), cwd=tmp_path, timeout=1.0)
    launched = launcher.launch(request)
    assert launched.wait.timed_out
    command_line = [" ".join(argv) for argv in launched.commands][0]
    assert str(request.run_dir) in command_line
    for pid in os.listdir("/proc"):
        try:
            text = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        assert str(request.run_dir) not in text.replace("\0", " ")


def test_processes_are_found_by_their_token(tmp_path):
    import subprocess
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                               env=dict(os.environ, RN50_PERF_TOKEN="test-token-123"))
    try:
        assert sleeper.pid in processes_with_token("test-token-123")
        assert processes_with_token("another-token") == []
    finally:
        sleeper.kill()
        sleeper.wait()


@pytest.mark.parametrize("workers, slots, device_type, expected", [
    (2, 2, "cpu", None),
    (4, 2, "cpu", "needs 4 worker processes, this host has 2 CPU cores"),
    (8, 1, "cuda", "needs 8 CUDA devices on this host, found 1"),
])
def test_host_capacity(workers, slots, device_type, expected):
    host = Host(device_type, slots if device_type == "cuda" else 0, slots)
    assert host.lacks(workers) == expected


def test_node_lines_come_once_from_the_run_folder_and_the_launchers_output(tmp_path):
    """A line mpirun's forwarded output lost is still read from the file its agent wrote; a
    node whose agent could not write into the folder (not shared) is read from the output."""
    def node(host, pid):
        return {"host": host, "pid": pid, "address": f"10.0.0.{pid}"}
    for written in (node("n1", 1), node("n2", 2)):
        (tmp_path / f"node-{written['host']}-{written['pid']}.json").write_text(
            json.dumps(written))
    output = tmp_path / "mpirun.out"
    output.write_text("RN50_NODE " + json.dumps(node("n2", 2)) + "\n"
                      + "RN50_NODE " + json.dumps(node("n3", 3)) + "\nother output\n")
    assert node_lines(tmp_path, [output]) == [node("n1", 1), node("n2", 2), node("n3", 3)]
    assert node_lines(tmp_path / "elsewhere", [output]) == [node("n2", 2), node("n3", 3)]


def test_each_agent_reports_its_first_failed_rank_first():
    agent = "\n".join([
        "some worker output",
        AGENT_EXIT_MARK + json.dumps({"rank": 1, "exitcode": -9, "first": True}),
        AGENT_EXIT_MARK + json.dumps({"rank": 0, "exitcode": -15, "first": False})])
    assert rank_exits(agent) == [(1, -9), (0, -15)]
    # Two agents (two nodes), each with its own report, read node 0's first: both first ranks,
    # the earliest seen first (node 1's rank 3 failed, then node 0's rank 1 on the broken link),
    # then the others in their agents' order.
    def exit_line(rank, code, first, at):
        return AGENT_EXIT_MARK + json.dumps({"rank": rank, "exitcode": code, "first": first,
                                             "at": at})
    nodes = "\n".join([exit_line(1, 1, True, 1000.4), exit_line(0, -15, False, 1000.4),
                       exit_line(3, -9, True, 1000.1), exit_line(2, -15, False, 1000.1)])
    assert rank_exits(nodes) == [(3, -9), (1, 1), (2, -15), (0, -15)]
    assert rank_exits("") == []


def test_the_first_failure_is_the_cause_and_the_ranks_after_it_are_named(tmp_path):
    def failed(rank, at, message):
        (tmp_path / f"rank{rank}.failure.json").write_text(json.dumps({
            "rank": rank, "outcome": "error", "error_type": "RuntimeError", "message": message,
            "failed_at": at}))
    launched = LaunchResult(WaitResult({"agent0": 1}, False, 0.1), [], [], [])
    failed(1, 100.0, "injected")
    failed(0, 100.5, "Connection reset by peer")
    assert assemble_run(1, tmp_path, launched, 60).message == (
        "run 1: rank 1 failed: RuntimeError: injected (rank 0 failed too)")
    failed(2, 100.7, "Connection reset by peer")
    assert assemble_run(1, tmp_path, launched, 60).message == (
        "run 1: rank 1 failed: RuntimeError: injected (ranks 0, 2 failed too)")


def test_a_peer_the_launcher_ended_is_not_the_cause_of_a_rank_that_failed_on_its_own():
    """Seen on CI: rank 1 raised and exited 1; the suite's agent ended rank 0 with SIGTERM before
    rank 0 wrote a failure of its own. The raise is the cause, not the SIGTERM; a rank killed
    outright (SIGKILL) with no failure of its own still is, whatever its peers wrote."""
    raised = {1: {"outcome": "error", "error_type": "RuntimeError", "message": "injected"}}
    assert killed_cause([(1, 1), (0, -15)], raised) is None
    assert killed_cause([(1, -9), (0, -15)], {}) == (1, -9)
    assert killed_cause([(1, -9), (0, 1)], {0: raised[1]}) == (1, -9)
    # SIGTERM from outside, no rank having failed on its own: that is the cause.
    assert killed_cause([(0, -15)], {}) == (0, -15)
