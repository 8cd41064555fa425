"""What a failing case tells its reader, in real `pytest perf_tests` sessions: the failure line
names the workload settings changed since the baseline, and report.md keeps that line. (That
report.md keeps a failed rank's stderr: tests/test_faults.py, whose raising rank leaves one.)"""
import json

import pytest

from conftest import TINY_CASE_ARGS

pytestmark = pytest.mark.slow

ONE_RUN = ["--perf-runs", "1", "--perf-set", "max-runs=1"]


def test_a_changed_thread_count_is_named_in_the_failure_line_and_in_report_md(run_suite,
                                                                              tmp_path):
    baseline_file = tmp_path / "cpu.json"
    # The later --perf-set threads wins: the baseline is recorded with two threads per worker.
    # No operator profile after the recording or the regression: not what this test is about.
    recorded = run_suite("-k", "1n1g", "--perf-batches", "2", *TINY_CASE_ARGS, *ONE_RUN,
                         "--perf-set", "threads=2", "--perf-update-baselines=force",
                         "--perf-explain", "never", baseline_file=baseline_file)
    assert recorded.outcome.ret == 0, recorded.output
    document = recorded.baseline()
    entry = document["entries"]["1n1g_fp32_b2"]
    assert entry["settings"]["threads"] == 2
    assert entry["settings"]["memory_format"] == "channels_last"  # as run, not "auto"
    # A thousandfold faster baseline makes the regression certain; its environment and
    # settings stay as recorded.
    entry["median_ips"] *= 1000
    entry["runs_ips"] = [value * 1000 for value in entry["runs_ips"]]
    baseline_file.write_text(json.dumps(document))

    gate = run_suite("-k", "1n1g", "--perf-batches", "2", *TINY_CASE_ARGS, *ONE_RUN,
                     "--perf-explain", "never", baseline_file=baseline_file)
    assert gate.outcome.ret == 1, gate.output
    row = gate.cases["1n1g_fp32_b2"]
    assert row["verdict"] == "regression"
    assert row["settings_diff"] == "threads 2 -> 1"
    failure = [line for line in gate.outcome.outlines
               if line.startswith("1n1g_fp32_b2:") and "below the baseline" in line]
    assert failure, gate.output
    assert "; environment: no change in " in failure[0]
    assert "; settings: threads 2 -> 1 [baseline " in failure[0]

    report = (gate.results_dir / "report.md").read_text()
    section = report.split("## Cases that did not pass\n", 1)[1]
    line = f"- **regression** {row['message']}; environment: {row['environment_diff']}; " \
           "settings: threads 2 -> 1"
    # ... and both end with the command that measures the case alone (perf_tests/cli/repro.py).
    assert section.splitlines()[1] == f"{line}; repro: `{row['repro']}`"
    assert line.removeprefix("- **regression** ") in failure[0]
    assert failure[0].endswith(f"; repro: {row['repro']}")
    assert "--perf-set threads=1" in row["repro"]

