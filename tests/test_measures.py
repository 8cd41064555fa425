"""The table of each kind's measures (perf_tests/results/measures.py): the figures and the
verdict of each measure a row holds, as the exports, the site and the lineage read them."""
import pytest

from perf_tests.results.measures import MEASURES, measures_of

THROUGHPUT_ROW = {
    "kind": "throughput", "median_ips": 30.0, "runs_ips": [29.0, 30.0, 31.0],
    "baseline_ips": 30.5, "delta": -0.016, "tolerance": 0.05, "verdict": "regression",
    "throughput_verdict": "pass", "speedup": 1.0, "peak_memory_bytes": 900,
    "runs_peak_memory_bytes": [880, 900, None], "baseline_peak_memory_bytes": 700,
    "memory_delta": 0.2857, "memory_tolerance": 0.1, "memory_regression": "1n1g_fp32_b8: ..."}


def test_a_memory_regression_is_the_memorys_verdict_and_the_speed_keeps_its_own():
    measured = {value.measure.slug: value for value in measures_of("1n1g_fp32_b8",
                                                                   THROUGHPUT_ROW)}
    assert list(measured) == ["throughput", "speedup", "peak-memory"]   # no energy, no busbw
    assert measured["throughput"].verdict == "pass"
    assert measured["throughput"].runs == (29.0, 30.0, 31.0)
    memory = measured["peak-memory"]
    assert (memory.value, memory.baseline, memory.delta, memory.tolerance, memory.verdict) == (
        900, 700, 0.2857, 0.1, "regression")
    assert memory.runs == (880, 900, None)
    assert measured["speedup"].verdict is None          # no baseline speedup: not judged


def test_a_speedup_that_decided_the_verdict_carries_it_and_a_failed_case_judges_nothing():
    row = {**THROUGHPUT_ROW, "speedup": 1.5, "baseline_speedup": 1.8, "speedup_delta": -0.167,
           "memory_regression": None, "memory_delta": 0.01, "throughput_verdict": None}
    measured = {value.measure.slug: value for value in measures_of("1n2g_fp32_b8", row)}
    assert (measured["speedup"].verdict, measured["peak-memory"].verdict) == (
        "regression", "pass")
    failed = {**row, "verdict": "error"}
    assert {value.verdict for value in measures_of("1n2g_fp32_b8", failed)} == {None, "pass"}


def test_a_time_to_train_row_gives_its_time_and_top1_in_percent():
    row = {"kind": "time-to-train", "time_to_train_s": 12.0, "runs_time_to_train_s": [12.0, None],
           "baseline_time_to_train_s": 10.0, "top1": 0.81, "runs_top1": [0.81, 0.79],
           "baseline_top1": 0.82, "accuracy_tolerance": 0.05, "tolerance": 0.3,
           "verdict": "pass", "median_ips": 50.0}
    time, top1, speed = measures_of("1n1g_fp32_b8_ttt", row)
    assert (time.measure.unit, time.value, time.baseline, time.runs, time.tolerance) == (
        "s", 12.0, 10.0, (12.0, None), 0.3)
    assert (top1.measure.unit, top1.value, top1.baseline, top1.runs) == (
        "%", 81.0, 82.0, (81.0, 79.0))
    # top-1's band is absolute: 0.05 of accuracy is 5 points, in the measure's unit
    assert top1.measure.band_is_absolute and top1.tolerance == pytest.approx(5.0)
    assert not time.measure.band_is_absolute
    assert (speed.measure.unit, speed.value, speed.verdict, speed.measure.gated) == (
        "img/s", 50.0, None, False)


def test_every_kind_names_each_slug_once_and_gates_its_first_measure():
    for kind, measures in MEASURES.items():
        slugs = [measure.slug for measure in measures]
        assert len(slugs) == len(set(slugs)), kind
        assert measures[0].gated, kind
