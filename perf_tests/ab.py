"""A/B on one host: this session's stack (the reference) against a candidate stack, no baseline.

For each case, runs alternate reference and candidate in ABBA order (pair 1 reference first,
pair 2 candidate first, ...), each a fresh launch, so the host's drift over minutes falls on
both sides alike. After the profile's runs per side, more pairs follow while the verdict is
undecided, up to the cap. The verdict is on the pairs: the median per-pair ratio (candidate
over reference) and a distribution-free 95% interval for it (`stats.paired_ratio`: the sign
test's, which one wild run cannot widen; it takes 6 pairs). The ratio of the two sides'
medians is recorded beside it; it is not judged, since the host's drift over the session
moves it and the pairs cancel that drift.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .cases import Case
from .device_lock import DeviceLockError, device_lock_path, holding_devices
from .launchers import Launcher, LaunchRequest, Stack
from .protocol import RunOutcome, run_once
from .results import ResultsFolder
from .stats import PairedRatio, paired_ratio, sign_interval_rank, summarize
from .verdicts import (AMBIGUOUS, ERROR, IMPROVEMENT, INCONCLUSIVE, OOM, PASS, REGRESSION,
                       Judgement, environment_diff, ips)

REFERENCE, CANDIDATE = "reference", "candidate"
# The smallest change an A/B verdict names: both stacks run in the same minutes, so the band
# the stored-baseline gate needs for the host's drift (smoke 15%) is not needed here.
DEFAULT_TOLERANCE = 0.05
# The fewest pairs whose per-pair ratios give a 95% interval (the sign test's: all 6 on one
# side of 1 happen by chance with probability 2/64); a clear change takes at least this many.
MIN_DECIDING_PAIRS = next(pairs for pairs in range(1, 100) if sign_interval_rank(pairs))


def abba_sides(pair: int) -> tuple[str, str]:
    """The order of pair `pair` (from 1): AB, BA, AB, ... so neither side always goes first."""
    return (REFERENCE, CANDIDATE) if pair % 2 == 1 else (CANDIDATE, REFERENCE)


@dataclass
class PairedRuns:
    runs: dict[str, list[RunOutcome]] = field(
        default_factory=lambda: {REFERENCE: [], CANDIDATE: []})
    order: list[str] = field(default_factory=list)   # the side of run 1, 2, ...
    failed: RunOutcome | None = None
    failed_side: str | None = None

    def ips(self, side: str) -> list[float]:
        return [run.global_ips for run in self.runs[side] if run.outcome == "ok"]

    def complete_pairs(self) -> tuple[list[float], list[float]]:
        pairs = min(len(self.ips(REFERENCE)), len(self.ips(CANDIDATE)))
        return self.ips(REFERENCE)[:pairs], self.ips(CANDIDATE)[:pairs]


def measure_pairs(case: Case, launcher: Launcher,
                  request_for: Callable[[Path, Stack], LaunchRequest], candidate: Stack,
                  results: ResultsFolder, pairs: int, max_pairs: int,
                  more_pairs_wanted: Callable[[list[float], list[float]], bool],
                  report_run: Callable[[RunOutcome, str], None]) -> PairedRuns:
    """`pairs` ABBA pairs, then more while wanted (up to `max_pairs`); stops at a failure.
    Each run's record names its side, its pair and its place in the pair."""
    done = PairedRuns()
    stacks = {REFERENCE: Stack(), CANDIDATE: candidate}
    pair = 0
    while True:
        pair += 1
        order = abba_sides(pair)
        for place, side in enumerate(order, start=1):
            index = len(done.order) + 1
            request = request_for(results.run_dir(case.case_id, index), stacks[side])
            labels = {"side": side, "pair": pair, "place_in_pair": place,
                      "pair_order": "AB" if order[0] == REFERENCE else "BA",
                      "stack": stacks[side].describe()}
            outcome = run_once(case, launcher, request, results, index, labels)
            done.order.append(side)
            done.runs[side].append(outcome)
            report_run(outcome, side)
            if outcome.outcome != "ok":
                done.failed, done.failed_side = outcome, side
                return done
        if pair >= pairs and (pair >= max_pairs
                              or not more_pairs_wanted(*done.complete_pairs())):
            return done


def ratio_text(measured: PairedRatio) -> str:
    pairs = f"{measured.pairs} pair{'s' if measured.pairs != 1 else ''}"
    if measured.low is None:
        return f"ratio {measured.ratio:.3f}, {pairs}: a 95% interval takes {MIN_DECIDING_PAIRS}"
    return f"ratio {measured.ratio:.3f}, 95% CI {measured.low:.3g}-{measured.high:.3g}, {pairs}"


def judge_ratio(what: str, measured: PairedRatio, tolerance: float, more_runs: bool) -> Judgement:
    """`what` ("candidate", "candidate's speedup") against the reference: a regression needs the
    whole interval below 1 and the ratio below the band; an improvement the mirror image. Pairs
    too few for an interval, or a ratio below half the band that the pairs do not settle, ask
    for more pairs while there may be more."""
    change = measured.ratio - 1
    detail = f"({ratio_text(measured)})"
    decided = measured.low is not None
    if decided and measured.high < 1 and measured.ratio < 1 - tolerance:
        return Judgement(REGRESSION, f"{what} {-change:.1%} slower than reference {detail}",
                         change)
    if decided and measured.low > 1 and measured.ratio > 1 + tolerance:
        return Judgement(IMPROVEMENT, f"{what} {change:.1%} faster than reference {detail}",
                         change)
    if not decided and more_runs:
        return Judgement(AMBIGUOUS, f"{what} {change:+.1%} against reference, not yet decided "
                         f"{detail}", change)
    unsettled = not decided or measured.low < 1 - tolerance
    if unsettled and (measured.ratio < 1 - tolerance or
                      (more_runs and measured.ratio < 1 - tolerance / 2)):
        return Judgement(AMBIGUOUS, f"{what} {-change:.1%} slower than reference, not clearly "
                         f"{detail}", change)
    return Judgement(PASS, f"{what} {change:+.1%} against reference {detail}, tolerance "
                     f"{tolerance:.0%}", change)


@dataclass(frozen=True)
class Comparison:
    """The A/B mode of a session: the candidate stack, and how a case is measured and judged."""
    candidate: Stack
    tolerance: float | None = None   # --perf-tolerance; else DEFAULT_TOLERANCE

    def header(self) -> dict:
        return {"candidate": self.candidate.describe(), "baseline_file": None}

    def measure(self, session, case: Case, config) -> "CaseResult":  # noqa: F821
        from .session import CaseResult  # the session's result type; imported late (cycle)

        settings = session.settings
        tolerance = self.tolerance if self.tolerance is not None else DEFAULT_TOLERANCE
        single = session.results.case(case.case_id if case.devices == 1
                                      else case.single_device.case_id) or {}

        def judgement(reference: list[float], candidate: list[float],
                      more_runs: bool) -> Judgement:
            measured = paired_ratio(reference, candidate)
            verdict = judge_ratio("candidate", measured, tolerance, more_runs)
            single_ratio = single.get("ratio") if case.devices > 1 else None
            if verdict.verdict == PASS and single_ratio:
                # The candidate's speedup against its own 1n1g, over the reference's.
                scaled = PairedRatio(measured.pairs, measured.ratio / single_ratio,
                                     measured.low and measured.low / single_ratio,
                                     measured.high and measured.high / single_ratio)
                by_speedup = judge_ratio("candidate's speedup", scaled, tolerance, more_runs)
                if by_speedup.verdict != PASS:
                    return by_speedup
            return verdict

        def report_run(run: RunOutcome, side: str) -> None:
            outcome = f"{ips(run.global_ips)} img/s" if run.outcome == "ok" else run.outcome
            session.progress(f"{case.case_id} run {run.index} ({side}): {outcome}")

        # By default every verdict has its interval: at least 6 pairs, up to 3 x as many while
        # undecided. Counts the user gave are kept (below 6 pairs, the verdict says it takes 6).
        pairs = (settings.runs if session.requested.runs
                 else max(settings.runs, MIN_DECIDING_PAIRS))
        max_pairs = (settings.max_runs if session.requested.max_runs
                     else max(settings.max_runs, 3 * pairs))
        pairs = min(pairs, max_pairs)
        request_for = session.launch_requests(case, config,
                                              session.results.path / case.case_id / "config.json")
        try:
            with holding_devices(device_lock_path(), session.progress):
                runs = measure_pairs(
                    case, session.launcher, request_for, self.candidate, session.results,
                    pairs, max_pairs,
                    lambda ref, cand: judgement(ref, cand, len(ref) < max_pairs)
                    .verdict == AMBIGUOUS, report_run)
        except DeviceLockError as error:
            return CaseResult(case, ERROR, f"{case.case_id}: {error}")
        return self.decide(case, runs, single, judgement, CaseResult)

    def decide(self, case: Case, runs: PairedRuns, single: dict, judgement, CaseResult):
        sides = {}
        for side in (REFERENCE, CANDIDATE):
            records = [run.record for run in runs.runs[side] if run.record]
            values = runs.ips(side)
            sides[side] = {"runs_ips": values,
                           "median_ips": summarize(values).median if values else None,
                           "environment": records[0]["environment"] if records else {}}
        if sides[CANDIDATE]["environment"] and sides[REFERENCE]["environment"]:
            change = environment_diff(sides[REFERENCE]["environment"],
                                      sides[CANDIDATE]["environment"])
        else:
            change = None
        details = {REFERENCE: sides[REFERENCE], CANDIDATE: sides[CANDIDATE],
                   "candidate_stack": self.candidate.describe(), "run_order": runs.order,
                   "environment_diff": change}
        if runs.failed is not None:
            failed = runs.failed
            verdict = OOM if failed.outcome == "oom" else ERROR
            stack = (f"the candidate: {self.candidate.describe()}"
                     if runs.failed_side == CANDIDATE else "the reference: this session's stack")
            return CaseResult(case, verdict, f"{case.case_id}: {failed.message} ({stack})",
                              runs.ips(CANDIDATE), details, failed.stderr_tail)
        reference, candidate = runs.complete_pairs()
        measured = paired_ratio(reference, candidate)
        decided = judgement(reference, candidate, False)
        summary = summarize(candidate)
        details.update(summary.to_dict())
        details.update(measured.to_dict())
        details["delta"] = measured.ratio - 1
        if case.devices > 1 and single.get(REFERENCE) and single.get(CANDIDATE):
            details[REFERENCE]["speedup"] = sides[REFERENCE]["median_ips"] / \
                single[REFERENCE]["median_ips"]
            details[CANDIDATE]["speedup"] = sides[CANDIDATE]["median_ips"] / \
                single[CANDIDATE]["median_ips"]
            details["speedup"] = details[CANDIDATE]["speedup"]
            # What the verdict judged: the paired ratio over the 1n1g case's paired ratio (each
            # side's own speedup above is from its medians, as the stored-baseline gate's is).
            details["speedup_ratio"] = (measured.ratio / single["ratio"] if single.get("ratio")
                                        else details["speedup"] / details[REFERENCE]["speedup"])
        elif case.devices == 1:
            details["speedup"] = 1.0
        verdict, message = decided.verdict, f"{case.case_id}: {decided.message}"
        if verdict == AMBIGUOUS:
            verdict = INCONCLUSIVE
            message += " after the most pairs --perf-max-runs allows; rerun or raise it"
        message += f"; candidate: {self.candidate.describe()}"
        return CaseResult(case, verdict, message, candidate, details)
