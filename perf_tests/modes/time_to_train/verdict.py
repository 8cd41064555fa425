"""A time-to-train case's figures and verdict, as pure functions of its runs' records and its
baseline entry: the medians results.json keeps (`case_figures`), what a baseline entry keeps
(`baseline_figures`), and the verdict on time (the throughput gate's noise rule on negated times)
and accuracy (the median top-1 against the baseline's, absolute), or `not-converged`.
"""
from __future__ import annotations

from dataclasses import dataclass

from perf_tests.baselines.entries import baseline_times
from perf_tests.core.stats import summarize
from perf_tests.core.text import percent, seconds_text
from perf_tests.judging.verdicts import (IMPROVEMENT, INCONCLUSIVE, NOT_CONVERGED, PASS, REGRESSION,
                                         slower_for_sure)
from perf_tests.runs.outcome import RunOutcome


# What a baseline entry of a `_ttt` case keeps beside the throughput figures (written by
# --perf-update-baselines and by tools/promote_baseline.py alike).
@dataclass(frozen=True)
class RunFigures:
    """One run's convergence, from its record."""
    index: int
    reached_target: bool
    time_to_train_s: float | None
    top1: float
    top5: float
    epochs: int
    train_ips: float
    curve: list

    @classmethod
    def of(cls, run: RunOutcome) -> "RunFigures":
        record = run.record
        return cls(run.index, bool(record["reached_target"]), record.get("time_to_train_s"),
                   float(record["top1"]), float(record["top5"]), int(record["epochs"]),
                   float(record["global_ips"]), record.get("curve") or [])


def case_figures(figures: list[RunFigures]) -> dict:
    """results.json's time-to-train fields for the runs of one case."""
    converged = [one.time_to_train_s for one in figures if one.reached_target]
    top1 = [one.top1 for one in figures]
    return {
        "time_to_train_s": summarize(converged).median if converged else None,
        "runs_time_to_train_s": [one.time_to_train_s for one in figures],
        "reached_target": all(one.reached_target for one in figures),
        "runs_reached_target": [one.reached_target for one in figures],
        "top1": summarize(top1).median,
        "runs_top1": top1,
        "top5": summarize([one.top5 for one in figures]).median,
        "best_top1": max(max(point["top1"] for point in one.curve) for one in figures),
        "epochs": summarize([one.epochs for one in figures]).median,
        "runs_epochs": [one.epochs for one in figures],
        "median_ips": summarize([one.train_ips for one in figures]).median,
        "curve": [one.curve for one in figures],
    }


def measure_verdicts(figures: list[RunFigures], entry: dict | None, tolerance: float,
                     accuracy_tolerance: float) -> dict[str, str | None]:
    """Each measure's own verdict, as results.json keeps it (`time_verdict`,
    `accuracy_verdict`; results/measures.py reads them): the time by the throughput gate's rule
    on negated times (lower is better), the top-1 against the baseline's, absolute; None where
    a measure was not judged (no baseline figure of it, or a run that did not converge)."""
    verdicts: dict[str, str | None] = {"time_verdict": None, "accuracy_verdict": None}
    if entry is None or not figures or not all(one.reached_target for one in figures):
        return verdicts
    summary = case_figures(figures)
    base_top1 = entry.get("top1")
    if base_top1 is not None:
        verdicts["accuracy_verdict"] = (REGRESSION if summary["top1"] < base_top1 -
                                        accuracy_tolerance else PASS)
    base_time, time_s = entry.get("time_to_train_s"), summary["time_to_train_s"]
    if base_time:
        if time_s > base_time * (1 + tolerance):
            # Negated, "slower" is "smaller": the throughput rule applies unchanged.
            slower = slower_for_sure([-t for t in summary["runs_time_to_train_s"]],
                                     [-t for t in baseline_times(entry)],
                                     -base_time * (1 + tolerance))
            verdicts["time_verdict"] = REGRESSION if slower else INCONCLUSIVE
        elif time_s < base_time * (1 - tolerance):
            verdicts["time_verdict"] = IMPROVEMENT
        else:
            verdicts["time_verdict"] = PASS
    return verdicts


def judge_time_to_train(case_id: str, figures: list[RunFigures], entry: dict | None,
                        target_top1: float, epochs: int, tolerance: float,
                        accuracy_tolerance: float) -> tuple[str, str]:
    """The verdict and its line: not converged, accuracy and time against the baseline entry
    (each measure's own verdict: `measure_verdicts`). A regression of either is the case's;
    else the time's verdict (inconclusive, improvement), else a pass."""
    summary = case_figures(figures)
    missed = [one for one in figures if not one.reached_target]
    if missed:
        best = max(one.top1 for one in missed)
        message = (f"{case_id}: did not reach the target top-1 {percent(target_top1)} within "
                   f"{epochs} epochs in {len(missed)} of {len(figures)} runs (top-1 at the end "
                   f"{percent(best)})")
        if entry is not None and entry.get("reached_target") and entry.get("time_to_train_s"):
            message += (f"; the baseline reached it in {seconds_text(entry['time_to_train_s'])}"
                        f" ({entry.get('epochs', '?')} epochs)")
        return NOT_CONVERGED, message
    time_s, top1 = summary["time_to_train_s"], summary["top1"]
    runs = f"{len(figures)} run{'s' if len(figures) > 1 else ''}"
    reached = (f"{case_id}: {seconds_text(time_s)} to {percent(top1)} top-1 (target "
               f"{percent(target_top1)}, {summary['epochs']:g} epochs, {runs})")
    if entry is None:
        return PASS, reached
    verdicts = measure_verdicts(figures, entry, tolerance, accuracy_tolerance)
    problems = []
    base_top1, base_time = entry.get("top1"), entry.get("time_to_train_s")
    if verdicts["accuracy_verdict"] == REGRESSION:
        problems.append(f"accuracy: top-1 {percent(top1)} is {100 * (base_top1 - top1):.1f} "
                        f"points below the baseline {percent(base_top1)} (tolerance "
                        f"{100 * accuracy_tolerance:.1f} points)")
    time_verdict = verdicts["time_verdict"]
    if time_verdict is not None:
        delta = time_s / base_time - 1
        band = f"(tolerance {tolerance:.0%}"
        if time_verdict == REGRESSION:
            times = summary["runs_time_to_train_s"]
            problems.append(f"time: {seconds_text(time_s)} to train is {delta:.1%} longer "
                            f"than the baseline {seconds_text(base_time)} {band}, runs "
                            f"{', '.join(f'{t:.1f}' for t in times)} s)")
        elif time_verdict == INCONCLUSIVE:
            reached += (f"; {delta:.1%} longer than the baseline {seconds_text(base_time)} "
                        f"{band}) but its runs are not clearly slower")
        elif time_verdict == IMPROVEMENT:
            reached += (f"; {-delta:.1%} shorter than the baseline {seconds_text(base_time)} "
                        f"{band}): refresh it with --perf-update-baselines")
        else:
            reached += f"; {delta:+.1%} against the baseline {seconds_text(base_time)}"
    if problems:
        return REGRESSION, f"{case_id}: " + "; ".join(problems)
    return (time_verdict if time_verdict in (INCONCLUSIVE, IMPROVEMENT) else PASS), reached
