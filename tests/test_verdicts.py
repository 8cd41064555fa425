"""The verdict rule, its statistics and its messages, on hand-made runs."""
import math

import pytest

from perf_tests.baselines.file import BaselineEntry
from perf_tests.core.stats import mann_whitney_less, smallest_p_value, summarize
from perf_tests.environment.differences import environment_diff, explained, settings_diff
from perf_tests.judging.verdicts import (AMBIGUOUS, IMPROVEMENT, PASS, REGRESSION, failed_measures,
                                         judge)


def entry(median, runs=()):
    return BaselineEntry(case_id="1n1g_fp32_b8", median_ips=median, runs_ips=list(runs))


def test_within_the_band_passes_with_the_delta():
    verdict = judge("1n1g_fp32_b8", [98.0, 99.0, 101.0], entry(100.0), 0.05)
    assert verdict.verdict == PASS and verdict.delta == pytest.approx(-0.01)
    assert verdict.message == ("1n1g_fp32_b8: 99.0 img/s, -1.0% against the baseline 100.0 "
                               "img/s (tolerance 5%)")


def test_every_run_below_the_band_is_a_regression():
    verdict = judge("1n1g_fp32_b8", [80.0, 82.0, 81.0], entry(100.0), 0.05)
    assert verdict.verdict == REGRESSION
    assert verdict.message == ("1n1g_fp32_b8: 81.0 img/s is 19.0% below the baseline 100.0 "
                               "img/s (tolerance 5%, 3 runs 80.0-82.0)")


def test_one_slow_run_never_decides():
    # The median is above the band: one run far below changes nothing.
    assert judge("c", [50.0, 99.0, 100.0], entry(100.0), 0.05).verdict == PASS


def test_a_median_below_the_band_without_evidence_is_ambiguous():
    # Two runs low, one within the band, and the baseline's own runs spread widely.
    verdict = judge("c", [90.0, 91.0, 99.0], entry(100.0, [85.0, 100.0, 115.0]), 0.05)
    assert verdict.verdict == AMBIGUOUS
    assert "not clearly slower than the baseline's 3 runs" in verdict.message


def test_runs_significantly_below_the_baselines_are_a_regression_without_all_below_the_band():
    baseline_runs = [100.0, 101.0, 99.0, 100.0, 102.0]
    runs = [94.0, 93.0, 96.0, 92.0, 94.5]  # 96 is within the band (>= 95)
    assert mann_whitney_less(runs, baseline_runs) == pytest.approx(1 / 252)
    assert judge("c", runs, entry(100.0, baseline_runs), 0.05).verdict == REGRESSION


def test_improvement_is_above_the_band():
    verdict = judge("c", [120.0, 121.0, 119.0], entry(100.0), 0.05)
    assert verdict.verdict == IMPROVEMENT and \
        "refresh it with --perf-update-baselines" in verdict.message


def test_scaling_regression_needs_every_runs_speedup_below_the_band():
    base = entry(700.0)
    # Throughput within its own band, but 7.0/8 scaling against a baseline of 7.9.
    regression = judge("1n8g_fp32_b8", [700.0, 701.0, 702.0], base, 0.05, speedup=7.0,
                       baseline_speedup=7.9, reference_ips=100.0)
    assert regression.verdict == REGRESSION and regression.on_speedup
    assert "speedup 7.00 is 11.4% below the baseline speedup 7.90" in regression.message
    best_run_scales = judge("1n8g_fp32_b8", [700.0, 701.0, 780.0], base, 0.05, speedup=7.01,
                            baseline_speedup=7.9, reference_ips=100.0)
    assert best_run_scales.verdict == AMBIGUOUS


def test_small_throughputs_keep_significant_digits():
    verdict = judge("c", [2.21, 2.25, 2.3], entry(0.001), 0.15)
    assert "2.25 img/s" in verdict.message and "baseline 0.001 img/s" in verdict.message


def test_environment_diff_names_what_changed():
    before = {"driver": "535.104", "nccl": "2.18.3", "torch": "2.11.0", "cuda": "13.0"}
    after = {"driver": "550.54", "nccl": "2.19.3", "torch": "2.11.0", "cuda": "13.0"}
    assert environment_diff(before, after) == "driver 535.104 -> 550.54, nccl 2.18.3 -> 2.19.3"
    assert environment_diff(before, before) == "no change in driver, cuda, nccl, torch"
    assert environment_diff({}, after) == "the baseline records no environment"
    # Provenance: the container image and this repository's commit are named too.
    assert environment_diff({**before, "container": "NVIDIA_PYTORCH_VERSION=24.01",
                             "commit": "93d2cbf1a2b3"},
                            {**before, "container": "NVIDIA_PYTORCH_VERSION=24.03",
                             "commit": "a6e86fe9c1bc"}) == \
        "container NVIDIA_PYTORCH_VERSION=24.01 -> NVIDIA_PYTORCH_VERSION=24.03, " \
        "commit 93d2cbf1a2b3 -> a6e86fe9c1bc"


def test_settings_diff_names_the_workload_settings_that_changed():
    before = {"image_size": 64, "threads": 2, "memory_format": "channels_last",
              "launcher": "simulated", "compile": False, "cuda_graphs": False}
    after = {**before, "threads": 1, "memory_format": "contiguous", "compile": True}
    assert settings_diff(before, after) == ("threads 2 -> 1, memory_format channels_last -> "
                                            "contiguous, compile False -> True")
    assert settings_diff(before, before) == ""
    # A baseline that does not record a setting (hand-written, published) claims no change.
    assert settings_diff({"image_size": 224, "threads": None}, after) == ""
    # Nor one recorded before the workers' resolved memory format was stored ("auto").
    assert settings_diff({**after, "memory_format": "auto"}, after) == ""
    assert explained("1n1g_fp32_b8: slower", "no change in torch", "threads 2 -> 1") == \
        "1n1g_fp32_b8: slower; environment: no change in torch; settings: threads 2 -> 1"
    assert explained("1n1g_fp32_b8: slower", None, "") == "1n1g_fp32_b8: slower"


def test_summary_spread():
    summary = summarize([90.0, 100.0, 110.0])
    assert (summary.median, summary.mean, summary.minimum, summary.maximum) == (100, 100, 90, 110)
    assert summary.cv == pytest.approx(0.1)
    assert summarize([5.0]).cv == 0.0
    assert summary.robust_cv == pytest.approx(1.4826 * 10 / 100)


def test_a_regression_is_confirmed_on_more_runs_before_it_is_declared():
    baseline = entry(100.0, [99.0, 100.0, 101.0, 100.5, 99.5, 100.2, 99.8, 100.1, 99.9, 100.3])
    slow = [80.0, 81.0, 79.0]
    unconfirmed = judge("c", slow, baseline, 0.15, more_runs=True, confirm_runs=6)
    assert unconfirmed.verdict == AMBIGUOUS and "to confirm on 6 runs" in unconfirmed.message
    assert judge("c", slow * 2, baseline, 0.15, more_runs=True, confirm_runs=6).verdict \
        == REGRESSION
    # Where no more runs may be taken, the runs at hand decide.
    assert judge("c", slow, baseline, 0.15, more_runs=False, confirm_runs=6).verdict \
        == REGRESSION


def test_a_suspect_median_within_the_band_takes_more_runs_then_passes():
    baseline = entry(100.0, [99.0, 100.0, 101.0, 100.5, 99.5, 100.2, 99.8, 100.1, 99.9, 100.3])
    suspect = [91.0, 92.0, 90.0]  # within the 15% band, below its lower half, every run slower
    more = judge("c", suspect, baseline, 0.15, more_runs=True, confirm_runs=6)
    assert more.verdict == AMBIGUOUS and "within the tolerance 15% but its 3 runs" in more.message
    assert judge("c", suspect, baseline, 0.15, more_runs=False).verdict == PASS
    # In the upper half of the band nothing is suspect.
    assert judge("c", [95.0, 96.0, 94.0], baseline, 0.15, more_runs=True).verdict == PASS


def test_mann_whitney_decides_only_where_its_run_counts_can_reach_alpha():
    baseline = entry(100.0, [100.0, 101.0, 99.0, 100.0, 102.0])
    # 3 runs against 5 cannot reach p <= 0.01 (the best is 1/56): every run below the band
    # decides, and one within it keeps the case ambiguous.
    assert judge("c", [80.0, 81.0, 82.0], baseline, 0.05).verdict == REGRESSION
    assert judge("c", [80.0, 81.0, 96.0], baseline, 0.05).verdict == AMBIGUOUS


def test_mann_whitney_is_exact():
    assert mann_whitney_less([1, 2, 3], [4, 5, 6]) == pytest.approx(0.05)
    assert smallest_p_value(3, 3) == pytest.approx(0.05)
    assert mann_whitney_less([4, 5, 6], [1, 2, 3]) == 1.0
    # 5 is above 3 and 4: U = 2, and P(U <= 2) = (1 + 1 + 2) / 20.
    assert mann_whitney_less([1, 2, 5], [3, 4, 6]) == pytest.approx(0.2)
    # A tie counts half, rounded up against the sample: U = 0.5 is read as 1.
    assert mann_whitney_less([1, 2, 3], [3, 4, 5]) == pytest.approx(0.1)


def test_mann_whitney_matches_scipy_where_installed():
    stats = pytest.importorskip("scipy.stats")
    samples = [([3.1, 2.9, 3.3, 3.0], [3.4, 3.6, 3.2, 3.5, 3.3]),
               ([10, 12, 11], [10.5, 13, 9]),
               ([1.0, 2.0, 3.0, 4.0, 5.0], [2.5, 3.5, 4.5, 5.5, 6.5])]
    for sample, reference in samples:
        expected = stats.mannwhitneyu(sample, reference, alternative="less", method="exact").pvalue
        assert math.isclose(mann_whitney_less(sample, reference), expected, rel_tol=1e-9)


@pytest.mark.parametrize("verdict, details, measures", [
    ("regression", {"memory_regression": "c: peak memory (RSS of the worker process, its largest "
                                         "rank) 782 MiB -> 1.08 GiB (+41%, tolerance 10%)",
                    "throughput_verdict": "pass", "baseline_ips": 20.4, "median_ips": 22.5,
                    "delta": 0.103},
     ["peak memory (RSS of the worker process, its largest rank) 782 MiB -> 1.08 GiB (+41%, "
      "tolerance 10%)"]),
    ("regression", {"memory_regression": "c: peak memory 1 GiB -> 2 GiB (+100%, tolerance 10%)",
                    "throughput_verdict": "regression", "baseline_ips": 20.4, "median_ips": 18.1,
                    "delta": -0.113},
     ["peak memory 1 GiB -> 2 GiB (+100%, tolerance 10%)", "throughput 20.4 -> 18.1 img/s "
      "(-11.3%)"]),
    ("regression", {"speedup_delta": -0.147, "baseline_speedup": 1.9, "speedup": 1.62,
                    "baseline_ips": 38.0, "median_ips": 32.4, "delta": -0.147},
     ["speedup 1.90 -> 1.62 (-14.7%)"]),
    ("regression", {"drift": {"delta": -0.091, "since": "2026-11-20T10:00:00Z", "refreshes": 1},
                    "baseline_ips": 20.0, "median_ips": 19.8, "delta": -0.01},
     ["throughput -9.1% since 2026-11-20 across 1 refresh (drift)"]),
    ("pass", {"baseline_ips": 20.0, "median_ips": 19.8, "delta": -0.01}, []),
    ("inconclusive", {"memory_regression": "c: peak memory ..."}, []),
])
def test_a_refresh_names_each_measure_the_gate_fails_its_runs_on(verdict, details, measures):
    """Issue 63: a refresh recorded a memory regression saying only 'regression against the
    old one'; what it would record is named measure by measure, with its figures."""
    assert failed_measures(verdict, details) == measures
