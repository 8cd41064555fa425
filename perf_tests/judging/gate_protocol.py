"""The gate's protocol, once: how many runs a case takes, when one more is wanted, and what a
verdict still unclear at the end becomes. The throughput mode and `rn50-perf calibrate --replay`
(perf_tests/judging/protocol_replay.py) both judge through `GateProtocol`, so calibrating
measures the gate itself. The loop that launches the runs is perf_tests/runs/protocol.py; it asks
`more_wanted` after each run past the first `runs`.

A session takes `runs` runs, and more one at a time while the verdict is `ambiguous`, up to
`max_runs`; a regression stands once confirmed on `confirm_runs` runs (unless slower beyond
doubt, judging/verdicts.py). Recording a baseline adds no run to decide a verdict. An ambiguous
verdict when no run will come is `inconclusive`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from perf_tests.baselines.file import BaselineEntry
from perf_tests.core.cases import Case, Profile
from perf_tests.core.stats import summarize
from perf_tests.judging.tolerance_band import Band, tolerance_band
from perf_tests.judging.verdicts import (AMBIGUOUS, INCONCLUSIVE, REGRESSION, Judgement,
                                         host_unfit, judge)

MORE_RUNS_FACTOR = 3        # gating: up to 3 x the runs while the verdict is unclear
RECORDING_RUNS_FACTOR = 2   # recording: up to 2 x the runs, to replace the marked ones
CONFIRM_FACTOR = 2          # a regression is confirmed on twice the runs


@dataclass(frozen=True)
class RunCounts:
    runs: int           # the runs every session of the case takes
    max_runs: int       # the most, with those added while the verdict is unclear
    confirm_runs: int   # a regression stands on this many runs (or all the cap allows)


def run_counts(runs: int, max_runs: int | None = None, recording: bool = False) -> RunCounts:
    """The counts for `runs` runs: `max_runs` as --perf-set max-runs gives it (never below the
    runs), else 3 x the runs gating or 2 x recording; a regression confirmed on twice the runs,
    capped by the most."""
    factor = RECORDING_RUNS_FACTOR if recording else MORE_RUNS_FACTOR
    most = max(max_runs or factor * runs, runs)
    return RunCounts(runs, most, min(CONFIRM_FACTOR * runs, most))


@dataclass(frozen=True)
class GateProtocol:
    """How one case's runs are judged against its entry (None: only its band is asked for).
    `reference` is the 1n1g median a multi-device case's speedup is taken over."""
    case: Case
    entry: BaselineEntry | None
    given_tolerance: float | str | None   # --perf-tolerance: a number, auto or None
    profile: Profile                      # its band for entries that store none, and its floor
    max_runs: int
    confirm_runs: int
    recording: bool = False               # --perf-update-baselines: no run added to decide
    history: list[list[float]] | None = None   # the host's earlier unchanged sessions' runs
    reference: float | None = None
    baseline_speedup: float | None = None

    def band(self, runs_ips: list[float]) -> Band:
        """The band these runs are judged with (perf_tests/judging/tolerance_band.py)."""
        entry = self.entry
        return tolerance_band(self.given_tolerance, entry.tolerance if entry else None,
                              entry.runs_ips if entry else [], runs_ips,
                              self.profile.tolerance, self.profile.band_floor,
                              entry.host_shift if entry else None, self.history)

    def may_add_run(self, taken: int) -> bool:
        """Whether the protocol can still add a run after `taken` to decide a verdict."""
        return not self.recording and taken < self.max_runs

    def judgement(self, runs_ips: list[float], final: bool = False) -> Judgement:
        """The verdict on these runs against the entry (`final`: no more runs will come). A
        speedup carries the noise of two medians, the case's and its 1n1g reference's: its auto
        band is sqrt(2) times the throughput's."""
        multi = self.case.devices > 1
        median = summarize(runs_ips).median
        speedup = median / self.reference if self.reference and multi else None
        band = self.band(runs_ips)
        return judge(self.case.case_id, runs_ips, self.entry, band, speedup,
                     self.baseline_speedup if multi else None, self.reference,
                     more_runs=not final and self.may_add_run(len(runs_ips)),
                     confirm_runs=self.confirm_runs,
                     speedup_tolerance=band.widened(math.sqrt(2), self.profile.band_floor))

    def more_wanted(self, runs_ips: list[float]) -> bool:
        """The run loop's question after each run: another, where the verdict on these runs is
        unclear and the protocol can still add one."""
        return (self.entry is not None and self.may_add_run(len(runs_ips))
                and self.judgement(runs_ips).verdict == AMBIGUOUS)

    def host_aware(self, runs_ips: list[float], marked: dict[int, list[str]],
                   decided: Judgement) -> Judgement:
        """`decided`, or `host-unfit` where it is slower than the baseline and its slow runs
        are the `marked` ones (judged on the unmarked runs alone, it is no regression)."""
        if not marked or decided.verdict not in (REGRESSION, AMBIGUOUS):
            return decided
        numbers = {int(number) for number in marked}
        clean = [ips for number, ips in enumerate(runs_ips, 1) if number not in numbers]
        slow = [ips for number, ips in enumerate(runs_ips, 1) if number in numbers]
        return host_unfit(self.case.case_id, decided,
                          self.judgement(clean, final=True) if clean else None, clean, slow,
                          marked)

    def settled(self, decided: Judgement, runs: int) -> Judgement:
        """The verdict once the runs are all in: still `ambiguous` it is `inconclusive`, its
        line saying why no run was added."""
        if decided.verdict != AMBIGUOUS:
            return decided
        why = (" (recording a baseline takes no more runs to decide)" if self.recording else
               " (the most --perf-set max-runs allows); rerun on a quieter host or raise "
               "--perf-set max-runs")
        return Judgement(INCONCLUSIVE, f"{decided.message} after {runs} runs{why}",
                         decided.delta, decided.speedup_delta, decided.on_speedup)
