"""Real `pytest perf_tests --perf-explain ...` sessions on this CPU: a regression forced by a
written baseline names the operators that grew and leaves a trace; a passing case in auto mode
is not profiled; --perf-update-baselines stores the op_profile (in the tiny recording that
tests/conftest.py shares). (That never turns it off, even for a regression: the every-verdict
session of tests/test_suite_sessions.py.)"""
import json

import pytest

from conftest import READS_TINY_RECORDING, TINY_CASE_ARGS, baseline_document
from perf_tests.core.cases import PROFILED_ITERATIONS

pytestmark = pytest.mark.slow

ONE_RUN = ["--perf-runs", "1", "--perf-set", "max-runs=1"]
# A profile of a step far faster than any CPU can train: every operator grows.
FAST_PROFILE = {"schema_version": 1, "device_type": "cpu", "iterations": 3, "world_size": 1,
                "step_ms": 0.5, "host_ms": 0.4, "device_ms": None,
                "operators": {"aten::convolution_backward": {"ms": 0.2, "host_ms": 0.2},
                              "aten::mkldnn_convolution": {"ms": 0.1, "host_ms": 0.1}},
                "families": {"convolution": 0.3}, "communication_share": None}
UNREACHABLE = {"median_ips": 1e6, "runs_ips": [1e6, 1e6, 1e6]}


def test_a_regression_names_the_operators_that_grew_and_a_pass_is_not_profiled(run_suite):
    baseline = baseline_document({
        "1n1g_fp32_b2": {"median_ips": 30.0, "tolerance": 0.97},  # passes
        "1n1g_fp32_b3": {**UNREACHABLE, "op_profile": FAST_PROFILE},
        "1n1g_fp32_b4": UNREACHABLE,  # a regression against a baseline without a profile
    })
    run = run_suite("-k", "1n1g", "--perf-batches", "2,3,4", *TINY_CASE_ARGS, *ONE_RUN,
                    baseline=baseline)
    assert run.outcome.ret == 1, run.output
    assert run.cases["1n1g_fp32_b3"]["verdict"] == "regression"
    # Without a profile in the baseline: the current top operators, and what is needed.
    run.outcome.stdout.fnmatch_lines([
        "*1n1g_fp32_b4: * below the baseline 1000000.0 img/s*",
        "operator profile (* profiled iterations): the baseline entry has no op_profile, so "
        "there is nothing to compare with (the comparison needs a baseline recorded with one: "
        "rerun with --perf-update-baselines); the current top operators (self time per iteration):",
        "  aten::* ms/iter (*% of the step)"])
    assert "baseline_op_profile" not in run.cases["1n1g_fp32_b4"]["explain"]
    run.outcome.stdout.fnmatch_lines([
        "*1n1g_fp32_b3: * below the baseline 1000000.0 img/s*",
        f"operator profile ({PROFILED_ITERATIONS} profiled iterations) against the baseline's: "
        "the operators whose self time per iteration grew most:",
        "  aten::convolution_backward +*% (0.20 -> * ms/iter)",
        "  new: aten::*",  # what the stored profile lacks, e.g. aten::_slow_conv2d_backward
        "  where: on the host (a CPU run: every operator runs there): host 0.40 -> * ms/iter*",
        "  trace: */1n1g_fp32_b3/profile/trace.json (Perfetto or chrome://tracing)"])

    # The passing case paid nothing: no profiled launch, nothing in its row.
    assert not (run.results_dir / "1n1g_fp32_b2" / "profile").exists()
    assert "explain" not in run.cases["1n1g_fp32_b2"]

    # results.json points at the trace and both summaries, which load.
    details = run.cases["1n1g_fp32_b3"]["explain"]
    trace = json.loads((run.results_dir / details["trace"]).read_text())
    names = {event.get("name") for event in trace["traceEvents"]}
    assert "aten::convolution_backward" in names
    current = json.loads((run.results_dir / details["op_profile"]).read_text())
    assert current == run.cases["1n1g_fp32_b3"]["op_profile"]
    assert current["iterations"] == PROFILED_ITERATIONS and current["device_type"] == "cpu"
    assert json.loads((run.results_dir / details["baseline_op_profile"]).read_text()) == \
        FAST_PROFILE
    # The timed runs were not profiled: their records carry no operator profile.
    assert "op_profile" not in json.loads(
        (run.results_dir / "1n1g_fp32_b3" / "run-1.json").read_text())["record"]
    report = (run.results_dir / "report.md").read_text()
    assert "## Operator profiles (--perf-explain)" in report
    assert "| `aten::convolution_backward` | 0.20 |" in report


@READS_TINY_RECORDING
def test_update_baselines_stores_the_op_profile(tiny_recording):
    first = tiny_recording
    assert first.outcome.ret == 0, first.output
    stored = first.baseline()["entries"]["1n1g_fp32_b2"]["op_profile"]
    assert stored == first.cases["1n1g_fp32_b2"]["op_profile"]
    assert "aten::convolution_backward" in stored["operators"]


def test_a_bad_explain_mode_is_a_usage_error(run_suite):
    run = run_suite("--perf-explain", "sometimes")
    assert run.outcome.ret == 4
    assert "argument --perf-explain: invalid choice: 'sometimes'" in run.output
