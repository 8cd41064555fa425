"""Peak memory and energy beside speed (perf_tests/judging/footprint.py): the per-run figures, the
medians an entry stores (over its unmarked runs), the memory gate and its line, and how a
memory regression combines with the throughput's verdict. The real sessions are in
tests/test_footprint_sessions.py."""
import json

import pytest

from perf_tests.baselines.entries import entry_figures
from perf_tests.baselines.file import BaselineError, load_baseline_file
from perf_tests.judging.footprint import memory_growth, run_figures, with_memory
from perf_tests.judging.verdicts import ERROR, HOST_UNFIT, INCONCLUSIVE, OOM, PASS, REGRESSION
from perf_tests.report.tables import markdown_table, memory_cell, throughput_table

GIB = 2 ** 30
CPU = "whole process (peak resident set size)"


def record(memory, joules=None, covers=CPU) -> dict:
    return {"peak_memory_bytes": memory, "peak_memory_covers": covers,
            "joules_per_image": joules}


def test_the_case_figures_are_the_medians_of_its_runs():
    figures = run_figures([record(3 * GIB, 0.52), record(1 * GIB, 0.50), record(2 * GIB, None)])
    assert figures == {"runs_peak_memory_bytes": [3 * GIB, 1 * GIB, 2 * GIB],
                       "peak_memory_bytes": 2 * GIB,
                       "runs_joules_per_image": [0.52, 0.50, None],
                       "joules_per_image": pytest.approx(0.51),
                       "peak_memory_covers": CPU}
    assert isinstance(figures["peak_memory_bytes"], int)


def test_a_figure_no_run_recorded_is_left_out():
    """A CPU run has no energy; a record from before peak memory existed has none either."""
    assert run_figures([record(GIB), record(GIB)]).keys() == {
        "runs_peak_memory_bytes", "peak_memory_bytes", "peak_memory_covers"}
    assert run_figures([{}, {}]) == {}


def test_an_entry_stores_the_medians_of_the_runs_it_is_made_of():
    """The marked runs are not in the entry's img/s, so not in its memory either."""
    row = {"runs_peak_memory_bytes": [1 * GIB, 9 * GIB, 2 * GIB, 3 * GIB],
           "runs_joules_per_image": [0.5, 0.9, 0.6, 0.7],
           "marked_runs": {"2": ["other processes used 1.4 of 2 cores"]},
           "peak_memory_covers": CPU}
    assert entry_figures(row) == {"peak_memory_bytes": 2 * GIB, "joules_per_image": 0.6,
                                  "peak_memory_covers": CPU}
    assert entry_figures({"runs_ips": [10.0]}) == {}


def test_growth_beyond_the_tolerance_is_a_memory_regression_with_one_line():
    now = {"peak_memory_bytes": int(1.62 * GIB), "peak_memory_covers": CPU}
    before = {"peak_memory_bytes": int(1.31 * GIB), "peak_memory_covers": CPU}
    judged = memory_growth("1n1g_fp32_b8", now, before, 0.10)
    # The line says what it measured (issue 63): on a CPU the worker's resident set.
    assert judged["memory_regression"] == ("1n1g_fp32_b8: peak memory (RSS of the worker "
                                           "process, its largest rank) 1.31 GiB -> 1.62 GiB "
                                           "(+24%, tolerance 10%)")
    assert judged["memory_clause"] == judged["memory_regression"].split(": ", 1)[1]
    assert judged["memory_delta"] == pytest.approx(0.2366, abs=1e-3)
    assert judged["baseline_peak_memory_bytes"] == before["peak_memory_bytes"]
    on_gpu = {"peak_memory_covers": "timed window (after warm-up)"}
    judged = memory_growth("c", {**now, **on_gpu}, {**before, **on_gpu}, 0.10)
    assert judged["memory_regression"].startswith("c: peak memory (CUDA allocator's peak, its "
                                                  "largest rank) 1.31 GiB -> 1.62 GiB")


def test_growth_of_exactly_the_tolerance_passes_and_just_above_it_says_so():
    judged = memory_growth("c", {"peak_memory_bytes": 1100}, {"peak_memory_bytes": 1000}, 0.10)
    assert "memory_regression" not in judged
    judged = memory_growth("c", {"peak_memory_bytes": 1103}, {"peak_memory_bytes": 1000}, 0.10)
    assert judged["memory_regression"].endswith("(+10.3%, tolerance 10%)")


def test_growth_within_the_tolerance_and_shrinking_pass():
    before = {"peak_memory_bytes": 800 * 2 ** 20}
    for now in (880 * 2 ** 20 - 1, 500 * 2 ** 20):
        judged = memory_growth("1n1g_fp32_b8", {"peak_memory_bytes": now}, before, 0.10)
        assert "memory_regression" not in judged and "memory_delta" in judged


def test_no_figure_on_either_side_judges_nothing():
    """An entry recorded before peak memory was stored, or runs that recorded none."""
    assert memory_growth("c", {"peak_memory_bytes": GIB}, {"peak_memory_bytes": None}, 0.1) == {}
    assert memory_growth("c", {}, {"peak_memory_bytes": GIB}, 0.1) == {}


def test_peaks_that_span_different_things_are_not_compared():
    """A CUDA graph's peak includes its capture: against a plain window's it would be a false
    memory regression."""
    judged = memory_growth(
        "1n1g_amp_b256", {"peak_memory_bytes": 40 * GIB,
                          "peak_memory_covers": "CUDA graph capture and timed window (after "
                                                "warm-up)"},
        {"peak_memory_bytes": 20 * GIB, "peak_memory_covers": "timed window (after warm-up)"},
        0.1)
    assert judged == {"memory_note": "peak memory not compared: the baseline's spans the timed "
                                     "window (after warm-up), this session's the CUDA graph "
                                     "capture and timed window (after warm-up)"}


MEMORY = "1n1g_fp32_b8: peak memory 788 MiB -> 1.05 GiB (+36%, tolerance 10%)"


@pytest.mark.parametrize("verdict,message", [
    (PASS, "1n1g_fp32_b8: 16.9 img/s, -1.2% against the baseline 17.1 img/s (tolerance 15%)"),
    (INCONCLUSIVE, "1n1g_fp32_b8: median 14.9 img/s is 12.8% below the baseline 17.1 img/s"),
    (HOST_UNFIT, "1n1g_fp32_b8: host unfit, not a software regression: 8.43 img/s ..."),
])
def test_a_memory_regression_fails_a_case_however_fast_it_ran(verdict, message):
    decided, line = with_memory("1n1g_fp32_b8", verdict, message, MEMORY)
    assert decided == REGRESSION
    assert line == (f"{MEMORY}; throughput: {message.removeprefix('1n1g_fp32_b8: ')}")


def test_a_slowdown_and_a_memory_growth_are_both_named():
    slower = "1n1g_fp32_b8: 12.9 img/s is 19.3% below the baseline 16.0 img/s (tolerance 15%)"
    assert with_memory("1n1g_fp32_b8", REGRESSION, slower, MEMORY) == (
        REGRESSION, f"{slower}; peak memory 788 MiB -> 1.05 GiB (+36%, tolerance 10%)")


@pytest.mark.parametrize("verdict", [ERROR, OOM])
def test_a_case_that_failed_to_run_keeps_its_own_line(verdict):
    assert with_memory("c", verdict, "c: rank 0 exited", MEMORY) == (verdict, "c: rank 0 exited")
    assert with_memory("c", PASS, "c: fine", None) == (PASS, "c: fine")


def test_the_tables_show_the_peak_memory_and_what_decided_the_verdict():
    rows = {"1n1g_fp32_b8": {"nodes": 1, "gpus_per_node": 1, "batch_per_device": 8,
                             "precision": "fp32", "median_ips": 16.9, "runs_ips": [16.9],
                             "peak_memory_bytes": 1127 * 2 ** 20, "memory_delta": 0.43,
                             "memory_regression": "1n1g_fp32_b8: peak memory ...",
                             "verdict": REGRESSION},
            "1n1g_fp32_b16": {"nodes": 1, "gpus_per_node": 1, "batch_per_device": 16,
                              "precision": "fp32", "median_ips": 18.0, "runs_ips": [18.0],
                              "verdict": PASS}}
    assert memory_cell(rows["1n1g_fp32_b8"]) == "1.1 GiB +43%"
    assert memory_cell(rows["1n1g_fp32_b16"]) == "-"
    terminal = throughput_table(rows)
    assert any(line.endswith("regression (memory +43%)") for line in terminal)
    rows["1n1g_fp32_b8"]["speedup_delta"] = -0.12
    assert "regression (speedup -12.0%, memory +43%)" in throughput_table(rows)[2]
    markdown = markdown_table(rows)
    assert "| peak memory |" in markdown and "J/image" not in markdown
    rows["1n1g_fp32_b16"]["joules_per_image"] = 0.0412
    assert "| J/image |" in markdown_table(rows) and "| 0.0412 |" in markdown_table(rows)


def test_a_baseline_entry_keeps_its_memory_and_energy(tmp_path):
    path = tmp_path / "baseline.json"
    entry = {"median_ips": 16.0, "peak_memory_bytes": 826 * 2 ** 20,
             "peak_memory_covers": CPU, "joules_per_image": 0.41}
    path.write_text(json.dumps({"entries": {"1n1g_fp32_b8": entry}}))
    read = load_baseline_file(path).entry("1n1g_fp32_b8")
    assert (read.peak_memory_bytes, read.peak_memory_covers, read.joules_per_image) == (
        826 * 2 ** 20, CPU, 0.41)
    for bad in (0, -5, "826 MiB", True):
        path.write_text(json.dumps({"entries": {"1n1g_fp32_b8": {**entry,
                                                                 "peak_memory_bytes": bad}}}))
        with pytest.raises(BaselineError, match="entry 1n1g_fp32_b8 has peak_memory_bytes"):
            load_baseline_file(path)
