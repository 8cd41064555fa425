"""The host-unfit verdict in real sessions: a baseline recorded on a quiet host, then the gate
beside real busy loops (one on every core this process may use) and under a real CPU quota
(tools/host_load.py): the runs are marked and the verdict is host-unfit, not regression; a real
slowdown of the software on a quiet host (every step of the worker followed by an idle wait
three times its own length: a quarter of the throughput on any CPU) is still a regression;
recording beside busy loops says first that the host is busy, runs the marked runs again while
they can still make up the unmarked runs it needs, and refuses them.

These need the host to themselves (the tests run two at a time otherwise, and the other one
would mark every run): `make test` runs them alone after the rest (`-m quiet_host`), and they
skip under pytest-xdist.
"""
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO_ROOT, TINY_CASE_ARGS, empty_baseline, suite_arguments

pytestmark = [pytest.mark.slow, pytest.mark.quiet_host]

# The tiny case (32 px, one warm-up and two timed iterations, a thread per worker): a run is
# marked by what the host did in its timed window, and two iterations (about 0.3 s on the
# quiet 2-core VM, twice that beside busy loops or under the half-core quota) span tens of the
# kernel's 10 ms ticks and several 100 ms quota periods, so the marks and verdicts are those
# that 64 px and six iterations gave, the module in 121-123 s alone instead of 147. No
# operator profile: explain's own run after a recording or a regression is not what these
# tests are about (tests/test_explain_sessions.py is).
CASE = ["-k", "1n1g_fp32", *TINY_CASE_ARGS, "--perf-runs", "3", "--perf-set", "max-runs=3",
        "--perf-explain", "never"]
# Where every run is marked, two runs show what three do (each run carries its own mark, and
# the verdict is host-unfit once the marked runs are the slow ones), at two thirds of the time
# of sessions that run slowly by design (beside busy loops, under a CPU quota, a quarter of the
# throughput).
TWO_RUNS = ["--perf-runs", "2", "--perf-set", "max-runs=2"]


@pytest.fixture(autouse=True)
def alone():
    if os.environ.get("PYTEST_XDIST_WORKER"):
        pytest.skip("needs the host to itself: run `python3 -m pytest tests -m quiet_host` "
                    "without -n (make test does)")


def load(*options: str) -> list[str]:
    """The command prefix that runs a session under tools/host_load.py."""
    return [sys.executable, "-m", "tools", "host-load", *options, "--"]


def busy_loops() -> list[str]:
    """A busy loop on every core this process may use: other load of at least the quarter of the
    cores that marks a run, and every worker sharing its core, on a host of any size (two loops
    were a quarter of a 2-core host's cores and one eighth of a 16-core host's)."""
    return load("--loops", str(len(os.sched_getaffinity(0))))


@pytest.fixture(scope="module")
def quiet_baseline(tmp_path_factory):
    """A baseline file recorded on the quiet host with a thread per worker, as the gate sessions
    run: three runs, as the gates below measure at most. Two or three against three are judged
    by every run being below the band (the Mann-Whitney test cannot reach 1% there), which the
    slowdowns below (busy loops on every core, a half-core quota, a quarter of the throughput)
    pass on any CPU."""
    folder = tmp_path_factory.mktemp("quiet-baseline")
    path = folder / "baseline.json"
    # and room to run a run again that something else on the host overlapped
    recording = [*CASE, "--perf-runs", "3", "--perf-set", "max-runs=5",
                 "--perf-update-baselines=force"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest",
         *suite_arguments(recording, folder / "results", path, host_state=True)],
        cwd=folder, capture_output=True, text=True, timeout=900,
        env=dict(os.environ, RN50_PERF_DEVICE_LOCK=str(folder / "lock")))
    # A run something else on the host overlapped is run again, never recorded.
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return path


@pytest.fixture
def gate(run_suite, monkeypatch, quiet_baseline, tmp_path):
    """A gate session on a copy of the quiet baseline file, judging the host's marks."""
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT))   # for `rn50-perf host-load`

    def run(*args, prefix=None):
        copy = tmp_path / "baseline.json"
        copy.write_bytes(quiet_baseline.read_bytes())
        return run_suite(*CASE, *args, baseline_file=copy, prefix=prefix, host_state=True)
    return run


def runs_of(session) -> list[dict]:
    folder = session.results_dir / "1n1g_fp32_b8"
    import json
    return [json.loads(path.read_text())["record"]
            for path in sorted(folder.glob("run-*.json"))]


def test_beside_busy_loops_the_case_is_host_unfit_and_the_gate_is_not_green(gate):
    """The gate of README's recipe (--perf-require-baseline) could not judge the case: its
    session exits 75, which CI tells from a pass (0) and from a regression (1)."""
    # A fixed 10% band: two runs beside busy loops can scatter 15% on this VM (its runs fall
    # into two levels, 31-34 and 38-41 img/s, fresh or forked), and the auto band of their
    # scatter then held their 34% loss; the verdict on marked runs is the subject here.
    session = gate("--perf-require-baseline", *TWO_RUNS, "--perf-tolerance", "0.1",
                   prefix=busy_loops())
    row = session.cases["1n1g_fp32_b8"]
    assert row["verdict"] == "host-unfit", row["message"]
    assert row["message"].startswith("1n1g_fp32_b8: host unfit, not a software regression: ")
    assert "the host was unfit in runs 1-2: other processes used " in row["message"]
    assert sorted(row["marked_runs"]) == ["1", "2"]
    assert all(any(reason.startswith("other processes used") for reason in record["host_busy"])
               for record in runs_of(session))
    assert session.outcome.ret == 75, session.output
    assert session.outcome.parseoutcomes()["passed"] == 1
    assert "could not judge 1 case (1n1g_fp32_b8 host-unfit): the session exits 75, not 0 " \
           "(--perf-require-baseline); rerun on a quiet host" in session.output
    assert "(host busy: other processes used " in session.output


def test_under_a_cpu_quota_the_case_is_host_unfit_and_fails_under_strict(gate):
    from tools.host_load import QuotaError, cpu_controller
    try:
        cpu_controller()
    except QuotaError as error:
        pytest.skip(str(error))
    if os.geteuid() != 0:
        pytest.skip("a cgroup with a CPU quota needs root")
    session = gate("--perf-strict", *TWO_RUNS, prefix=load("--cpu-quota", "0.5"))
    row = session.cases["1n1g_fp32_b8"]
    assert row["verdict"] == "host-unfit", row["message"]
    assert "CPU quota throttled " in row["message"]
    assert all(any(reason.startswith("CPU quota throttled") for reason in record["host_busy"])
               for record in runs_of(session))
    assert session.outcome.ret == 1 and "(--perf-strict)" in session.output
    assert "could not judge 1 case (1n1g_fp32_b8 host-unfit): they fail (--perf-strict)" \
        in session.output


def test_on_a_quiet_host_a_real_slowdown_is_still_a_regression(gate, monkeypatch):
    """The same thread per worker as the baseline, but every step of the worker followed by an
    idle wait three times as long as the step (the fault knob's slow@share=0.75): the software
    really is slower, at a quarter of the throughput, on any CPU and whatever its cores, and the
    host stays quiet. The slowdowns used before depended on the CPU: one thread against two was
    20-30% here and 14% on CI's CPUs, within their noise; oneDNN held to SSE4.1 is a third to a
    half slower where AVX2 is present and nothing where it is not. Half the throughput
    (share=0.5) was inconclusive once in CI: its three runs scattered 17.6% (12.0-16.8 img/s
    against 26.8), the auto band of that scatter was 39%, and its fastest run was not below it.
    A quarter leaves every run below such a band with room (80% below, 2 runs 1.9% apart, here),
    and two runs show it at the cost three runs at half took. Two runs against the baseline's
    three, every one below the band."""
    monkeypatch.setenv("RN50_FAULT", "slow@share=0.75")
    session = gate(*TWO_RUNS)
    row = session.cases["1n1g_fp32_b8"]
    assert row["verdict"] == "regression", row["message"]
    assert row["marked_runs"] == {} and "unfit" not in row["message"]
    assert session.outcome.ret == 1


# Busy loops a core while the load average rises: it moves a twelfth of the way to the number of
# runnable processes every 5 s, so from a quiet host's 0.5 to the 2-core limit of 2.0 takes
# 10-15 s beside four a core, one or two updates beside sixteen.
LOOPS_PER_CORE = 16


def busy_load_average(margin: float = 0.5, timeout: float = 120.0) -> None:
    """Wait, beside LOOPS_PER_CORE busy loops a core, until the one-minute load average reads
    busy to the preflight (rn50_model.host_state.load_reasons) with `margin` to spare: it
    follows load over a minute, so the loops a session runs beside cannot make it busy in
    time."""
    from rn50_model.host_state import load_average, load_reasons
    from tools.host_load import start_loops, stop_loops
    cores = len(os.sched_getaffinity(0))
    loops = start_loops(LOOPS_PER_CORE * cores)
    try:
        deadline = time.monotonic() + timeout
        while not load_reasons([load_average(Path("/"))[0] - margin], cores):
            assert time.monotonic() < deadline, f"load average {load_average(Path('/'))} " \
                f"after {timeout:.0f} s beside {LOOPS_PER_CORE * cores} busy loops"
            time.sleep(1)
    finally:
        stop_loops(loops)


def test_recording_beside_busy_loops_runs_marked_runs_again_and_records_none(run_suite,
                                                                             monkeypatch,
                                                                             tmp_path):
    """And (issue 48, item 2) it says first that the host is busy, stops running marked runs
    again once the runs left cannot make up the unmarked ones (two needed, the first two
    marked, one left of three), and its line's repro command records again."""
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT))
    baseline = empty_baseline(tmp_path / "baseline.json")
    before = baseline.read_bytes()
    busy_load_average()
    session = run_suite("-k", "1n1g_fp32", *TINY_CASE_ARGS, "--perf-runs", "2",
                        "--perf-set", "max-runs=3",
                        "--perf-update-baselines", "--perf-explain", "never",
                        baseline_file=baseline,
                        prefix=busy_loops(), host_state=True)
    row = session.cases["1n1g_fp32_b8"]
    assert row["verdict"] == "error"
    assert "baseline not recorded: the host was unfit in runs 1-2: other processes used " \
        in row["message"]
    assert "leaving 0 unmarked runs of the 2 needed (where this load belongs in the baseline, " \
           "--perf-ignore-host-state records it)" in row["message"]
    lines = session.outcome.outlines
    preflight = next(index for index, line in enumerate(lines) if line.startswith("preflight:"))
    assert lines[preflight + 1].startswith("recording baselines on a busy host (load average ")
    assert "1n1g_fp32_b8: no more runs: the host marked 2 of its 2 runs, and the 1 more " \
           "--perf-set max-runs=3 allows cannot make up the 2 unmarked runs a recording needs" \
        in session.output
    assert len(row["runs_ips"]) == 2 and "run 3 (again" not in session.output
    assert "--perf-update-baselines" in row["repro"].split()
    assert baseline.read_bytes() == before
