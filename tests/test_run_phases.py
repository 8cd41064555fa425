"""A run's wall time split into phases (perf_tests/runs/phases.py) and report.md's table of it,
on made-up marks: the real ones are checked in test_worker.py and test_suite_sessions.py."""
import os
import subprocess
import sys
import time

import pytest

from conftest import REPO_ROOT

from perf_tests.report.run_cost import run_cost_table
from perf_tests.runs.phases import NAMES, measured_share, median_phases, run_phases
from rn50_model.run_clock import MARKS

LAUNCHED = 1000.0
# A throughput run's marks, seconds after its launch.
AFTER = {"process": 1.5, "imported": 3.0, "started": 3.1, "built": 4.0, "first_step": 4.5,
         "warmed": 5.0, "window_opened": 5.1, "window_closed": 7.1, "recorded": 7.4,
         "ended": 7.5}


def marks(**moved):
    return {name: LAUNCHED + moved.get(name, at) for name, at in AFTER.items()}


def test_a_throughput_run_is_split_into_every_phase_that_adds_up_to_its_wall_time():
    phases = run_phases(marks(), LAUNCHED, LAUNCHED + 8.0)
    assert list(AFTER) == list(MARKS)
    assert list(phases) == ["wall", *NAMES]
    assert phases["wall"] == 8.0 and phases["launch"] == 1.5 and phases["imports"] == 1.5
    assert phases["window"] == 2.0 and phases["exit"] == 0.5
    assert sum(phases[name] for name in NAMES) == pytest.approx(8.0)
    # First step, warm-up and window: 0.5 + 0.5 + 2.0 of 8 s.
    assert measured_share(phases) == pytest.approx(3.0 / 8.0)


def test_a_run_with_fewer_marks_puts_a_missing_phase_into_the_next_and_a_failed_one_is_its_wall():
    only = {name: at for name, at in marks().items() if name in ("process", "imported", "ended")}
    phases = run_phases(only, LAUNCHED, LAUNCHED + 8.0)   # training to a target, say
    assert phases == {"wall": 8.0, "launch": 1.5, "imports": 1.5, "teardown": 4.5, "exit": 0.5}
    assert measured_share(phases) is None
    assert run_phases(None, LAUNCHED, LAUNCHED + 3.0) == {"wall": 3.0}


def test_the_median_of_each_phase_over_the_runs_and_the_report_table():
    runs = [run_phases(marks(imported=at), LAUNCHED, LAUNCHED + 8.0) for at in (2.0, 3.0, 2.5)]
    median = median_phases(runs + [{"wall": 30.0}])
    assert median["imports"] == 1.0 and median["wall"] == 8.0
    table = run_cost_table({"1n1g_fp32_b8": {"run_phases": median}, "1n2g_fp32_b8": {}})
    assert table[1] == "### Where a run's time went"
    [line] = [line for line in table if line.startswith("| 1n1g_fp32_b8 |")]
    assert line.split(" | ")[1:4] == ["8.00", "1.50", "1.00"] and line.endswith("| 38% |")
    assert run_cost_table({"1n1g_fp32_b8": {}}) == []


def test_a_process_start_is_read_between_its_parents_popen_and_its_first_line():
    before = time.time()
    done = subprocess.run([sys.executable, "-c", "import time; from rn50_model.run_clock import "
                           "process_started; print(process_started(), time.time())"],
                          capture_output=True, text=True, check=True, cwd=REPO_ROOT)
    started, first_line = map(float, done.stdout.split())
    tick = 2 / os.sysconf("SC_CLK_TCK")   # each of the two readings is to a tick
    assert before - tick <= started <= first_line + tick


def test_bench_harness_prints_the_workers_split_beside_the_bare_loops_wall_time():
    from tools.bench.harness import split_lines
    lines = split_lines(run_phases(marks(), LAUNCHED, LAUNCHED + 8.0), 3.5)
    assert lines[0] == ("median wall time: worker 8.00 s, bare loop 3.50 s (start to exit; the "
                        "worker's warm-up and window 38% of its)")
    assert lines[1:3] == ["  launch        1.50 s", "  imports       1.50 s"]
    assert len(lines) == 1 + len(NAMES)
