"""The verdict of a case against its baseline, and the one line that explains it.

A slowdown is a `regression` only when the median is below the tolerance band (its source:
perf_tests/judging/tolerance_band.py) *and* the runs are clearly slower than the baseline's: a
one-sided Mann-Whitney U test significant at `ALPHA` where the run counts can reach it, else every
run below the band. Before it is declared, a regression is confirmed on `confirm_runs` runs, unless
the first runs are slower beyond doubt (p at most `ALPHA_AT_ONCE`: 5 runs all below 10 steady
baseline runs). A median below the band without that evidence is `ambiguous`, and so is a median in
the lower half of the band whose runs look slower (p <= `SUSPECT_P`): the protocol collects more
runs, up to a cap; then the first is `inconclusive` and the second passes. One noisy run never
decides.

A run is marked where the host was unfit during its window (other load, throttling: the
worker's `host_busy`, or a GPU slowed down). A slowdown whose slow runs are the marked ones is
not the software's: judged on the unmarked runs alone it is no regression, and the case is
`host-unfit`, with the runs and why.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from statistics import median

from perf_tests.baselines.file import BaselineEntry
from perf_tests.core.rows import ThroughputRow
from perf_tests.core.row_values import row_of
from perf_tests.core.stats import mann_whitney_less, smallest_p_value, summarize
from perf_tests.core.text import counted, ips, marked_runs_text, runs_text
from perf_tests.judging.tolerance_band import Band

PASS, REGRESSION, IMPROVEMENT = "pass", "regression", "improvement"
NO_BASELINE, INCONCLUSIVE, AMBIGUOUS = "no-baseline", "inconclusive", "ambiguous"
OOM, ERROR, SKIPPED = "oom", "error", "skipped"
HOST_UNFIT = "host-unfit"
# The entry there is another machine's (another device, or CPUs: environment/differences.py
# `machine_differences`): measured, never judged against it.
NOT_COMPARABLE = "not-comparable"
# --perf-set share-devices=on: the ranks shared devices, so the figure is no case's: never
# judged
SHARED_DEVICES = "shared-devices"
NOT_CONVERGED = "not-converged"   # time to train: a run did not reach its target top-1
ALPHA = 0.01
ALPHA_AT_ONCE = 0.001
SUSPECT_P = 0.2


@dataclass(frozen=True)
class Judgement:
    verdict: str
    message: str
    delta: float | None = None          # median / baseline median - 1
    speedup_delta: float | None = None  # speedup / baseline speedup - 1
    on_speedup: bool = False            # decided by the speedup, not the throughput


def mann_whitney_decides(runs: list[float], baseline_runs: list[float]) -> bool:
    """Whether the test can reach ALPHA with these run counts (3 against 5 cannot: p >= 1/56)."""
    return len(runs) >= 3 and len(baseline_runs) >= 3 \
        and smallest_p_value(len(runs), len(baseline_runs)) <= ALPHA


def slower_for_sure(runs: list[float], baseline_runs: list[float], floor: float) -> bool:
    if mann_whitney_decides(runs, baseline_runs):
        return mann_whitney_less(runs, baseline_runs) <= ALPHA
    return all(value < floor for value in runs)


def beyond_doubt(runs: list[float], baseline_runs: list[float]) -> bool:
    """Whether the runs are slower than the baseline's at ALPHA_AT_ONCE: no confirming runs
    needed."""
    return len(runs) >= 3 and len(baseline_runs) >= 3 \
        and smallest_p_value(len(runs), len(baseline_runs)) <= ALPHA_AT_ONCE \
        and mann_whitney_less(runs, baseline_runs) <= ALPHA_AT_ONCE


def judge(case_id: str, runs_ips: list[float], entry: BaselineEntry, tolerance: float | Band,
          speedup: float | None = None, baseline_speedup: float | None = None,
          reference_ips: float | None = None, *, more_runs: bool = False,
          confirm_runs: int = 1, speedup_tolerance: Band | None = None) -> Judgement:
    """Throughput and speedup against the baseline entry; the worse of the two decides.

    `tolerance`: the band (a `Band` says where it came from in the line); `speedup_tolerance`
    the speedup's, by default the same. `reference_ips` is the 1n1g median the speedup was
    computed from: every run's own speedup against it must be below the band for a scaling
    regression. `more_runs` says whether the protocol can still add runs: only then is a
    regression on fewer than `confirm_runs` runs (and not slower beyond doubt), or a suspect
    median within the band, sent back for more.
    """
    bands = tolerance if isinstance(tolerance, Band) else Band(tolerance)
    tolerance = bands.tolerance
    summary = summarize(runs_ips)
    base = entry.median_ips
    delta = summary.median / base - 1
    low, high = base * (1 - tolerance), base * (1 + tolerance)
    band = bands.text
    runs = runs_text(runs_ips)
    unconfirmed = more_runs and len(runs_ips) < confirm_runs \
        and not beyond_doubt(runs_ips, entry.runs_ips)

    if summary.median < low:
        if slower_for_sure(runs_ips, entry.runs_ips, low):
            message = (f"{case_id}: {ips(summary.median)} img/s is {-delta:.1%} below the "
                       f"baseline {ips(base)} img/s ({band}, {runs})")
            if unconfirmed:
                return Judgement(AMBIGUOUS, message + f", to confirm on {confirm_runs} runs",
                                 delta)
            return Judgement(REGRESSION, message, delta)
        return Judgement(AMBIGUOUS, f"{case_id}: median {ips(summary.median)} img/s is "
                         f"{-delta:.1%} below the baseline {ips(base)} img/s ({band}), but its "
                         f"{runs} are not clearly slower than the baseline's "
                         f"{len(entry.runs_ips) or 'unrecorded'} runs", delta)
    if more_runs and summary.median < base * (1 - tolerance / 2) and len(entry.runs_ips) >= 3 \
            and mann_whitney_less(runs_ips, entry.runs_ips) <= SUSPECT_P:
        return Judgement(AMBIGUOUS, f"{case_id}: median {ips(summary.median)} img/s is "
                         f"{-delta:.1%} below the baseline {ips(base)} img/s, within the "
                         f"{band} but its {runs} look slower", delta)

    speedup_delta = None
    if speedup is not None and baseline_speedup:
        speedup_band = speedup_tolerance or bands
        speedup_delta = speedup / baseline_speedup - 1
        floor = baseline_speedup * (1 - speedup_band.tolerance)
        if speedup < floor:
            best_run_speedup = summary.maximum / reference_ips if reference_ips else speedup
            text = (f"{case_id}: speedup {speedup:.2f} is {-speedup_delta:.1%} below the "
                    f"baseline speedup {baseline_speedup:.2f} ({speedup_band.text}; throughput "
                    f"{ips(summary.median)} img/s, {delta:+.1%} against {ips(base)})")
            if best_run_speedup < floor and unconfirmed:
                return Judgement(AMBIGUOUS, text + f", to confirm on {confirm_runs} runs",
                                 delta, speedup_delta, on_speedup=True)
            if best_run_speedup < floor:
                return Judgement(REGRESSION, text, delta, speedup_delta, on_speedup=True)
            return Judgement(AMBIGUOUS, text + ", but its best run scales within the band",
                             delta, speedup_delta, on_speedup=True)

    if summary.median > high:
        return Judgement(IMPROVEMENT, f"{case_id}: {ips(summary.median)} img/s is {delta:.1%} "
                         f"above the baseline {ips(base)} img/s ({band}); refresh it with "
                         "--perf-update-baselines", delta, speedup_delta)
    return Judgement(PASS, f"{case_id}: {ips(summary.median)} img/s, {delta:+.1%} against the "
                     f"baseline {ips(base)} img/s ({band})", delta, speedup_delta)


def host_unfit(case_id: str, decided: Judgement, unmarked: Judgement | None,
               unmarked_runs: list[float], marked_runs: list[float],
               marked: dict[int, list[str]]) -> Judgement:
    """The verdict where runs were marked and the whole set is slower than the baseline.
    `host-unfit` where the slow runs are the marked ones: every run was marked (nothing is left
    to judge the software by), or the unmarked runs alone are not below the band and the marked
    ones are slower than they are. Otherwise `decided` stands (the unmarked runs are slower too,
    or too unclear to clear the software), the marks named beside it."""
    why = marked_runs_text(marked)
    if unmarked_runs and not (unmarked.verdict in (PASS, IMPROVEMENT)
                              and median(marked_runs) < median(unmarked_runs)):
        also = ("are slower too" if unmarked.verdict == REGRESSION
                else "do not clear the software on their own")
        return Judgement(decided.verdict, f"{decided.message}; the host was unfit in {why}, "
                         f"but the {len(unmarked_runs)} unmarked runs {also}",
                         decided.delta, decided.speedup_delta, decided.on_speedup)
    if unmarked_runs:
        low, high = ips(min(unmarked_runs)), ips(max(unmarked_runs))
        count = len(unmarked_runs)
        clean = (f"{count} unmarked run{'s' if count > 1 else ''} "
                 f"({low if low == high else f'{low}-{high}'} img/s) are not below the "
                 "baseline's band")
    else:
        clean = "no run was unmarked"
    slower = decided.message.split(": ", 1)[1]
    return Judgement(HOST_UNFIT, f"{case_id}: host unfit, not a software regression: "
                     f"{slower}; the host was unfit in {why}; {clean}: rerun on a quiet host",
                     decided.delta, decided.speedup_delta, decided.on_speedup)


def failed_measures(verdict: str, row: ThroughputRow | Mapping) -> list[str]:
    """The measures on which a judged throughput case fails the gate, one clause each with its
    figure, as a refresh that would record its runs names them: 'peak memory (RSS of the worker
    process, its largest rank) 782 MiB -> 1.08 GiB (+41%, tolerance 10%)', 'throughput 20.4 ->
    18.1 img/s (-11.3%)', 'speedup 1.90 -> 1.62 (-14.7%)', 'throughput -9.1% since 2026-11-20
    across 2 refreshes (drift)'. `row` is the result's row or its results.json row. Empty where
    the case does not fail the gate."""
    if verdict != REGRESSION:
        return []
    row = row_of("", row)
    memory = row.memory_regression
    clauses = [memory.split(": ", 1)[1]] if memory else []
    speed = (row.throughput_verdict or verdict) if memory else verdict
    if speed != REGRESSION:
        return clauses
    drifted = row.drift
    if drifted:
        refreshes = counted(drifted["refreshes"], "refresh", "refreshes")
        clauses.append(f"throughput {drifted['delta']:+.1%} since "
                       f"{str(drifted.get('since'))[:10]} across {refreshes} (drift)")
    elif row.speedup_delta is not None and row.baseline_speedup:
        clauses.append(f"speedup {row.baseline_speedup:.2f} -> {row.speedup:.2f} "
                       f"({row.speedup_delta:+.1%})")
    elif row.baseline_ips and row.median_ips:
        clauses.append(f"throughput {ips(row.baseline_ips)} -> "
                       f"{ips(row.median_ips)} img/s ({row.delta:+.1%})")
    return clauses


def shared_line(case, shared: str, median: float, recording: bool) -> str:
    """The line of a case whose ranks shared devices (--perf-set share-devices=on; `shared`:
    '2 ranks on 1 CUDA device'): the path ran, its figure is no real case's, so it is judged
    against nothing and, `recording`, stored nowhere."""
    line = (f"{case.case_id}: {ips(median)} img/s with {shared} (--perf-set "
            f"share-devices=on): the path ran; not a real {case.topology} figure, not judged "
            "against a baseline")
    if recording:
        line += ("; not recorded as a baseline (--perf-update-baselines): its ranks shared "
                 "devices")
    return line
