"""The A/B verdict: a candidate stack against the reference over runs taken in pairs, on the median
of the per-pair ratios and a distribution-free interval for it (core/stats.py's `paired_ratio`,
the sign test's). Pure functions of the pairs; perf_tests/modes/ab.py runs them, and the stack
bisection's probes (tools) judge with the same interval.
"""
from __future__ import annotations

from dataclasses import replace

from perf_tests.core.stats import PairedRatio, deciding_pairs, paired_ratio
from perf_tests.judging.verdicts import AMBIGUOUS, IMPROVEMENT, PASS, REGRESSION, Judgement

# The smallest change an A/B verdict names (its tolerance where --perf-tolerance gives none): both
# stacks run in the same minutes, so the band the stored-baseline gate needs for the host's drift
# is not needed here.
AB_TOLERANCE = 0.05
CONFIDENCE = 0.95           # the interval reported, and the one judged at the cap
# While more pairs may run, the verdict is looked at after every pair: each look on a 95%
# interval is another chance of a false alarm (modelled on this host's calibration pairs: about
# 5% of sessions with an identical candidate over up to 30 looks), so the looks before the cap
# take a 99% interval.
INTERIM_CONFIDENCE = 0.99
# A pass before the cap needs the pairs to have measured the ratio to within this many bands
# either way (2 x 5%: the 10% the calibration asks A/B to catch). On a quiet host the first
# pairs do that; on a noisy one more pairs follow (perf_tests/modes/ab.py MORE_PAIRS_FACTOR).
# Measured on the 2-core VM (docs/ab.md): passing any ratio near 1 after six
# pairs let 3 of 20 sessions of a 12% slowdown pass, on intervals such as 0.83-1.13 and 0.97-3.2.
PRECISION_BANDS = 2


def ratio_text(measured: PairedRatio) -> str:
    pairs = f"{measured.pairs} pair{'s' if measured.pairs != 1 else ''}"
    confidence = f"{measured.confidence:.0%}"
    if measured.low is None:
        return (f"ratio {measured.ratio:.3f}, {pairs}: a {confidence} interval takes "
                f"{deciding_pairs(measured.confidence)}")
    return (f"ratio {measured.ratio:.3f}, {confidence} CI {measured.low:.3g}-{measured.high:.3g}, "
            f"{pairs}")


def judge_ratio(what: str, measured: PairedRatio, tolerance: float, more_runs: bool) -> Judgement:
    """`what` ("candidate", "candidate's speedup") against the reference: a regression needs the
    whole interval below 1 and the ratio below the band; an improvement the mirror image. While
    more pairs may run, a pass needs an interval within 1 +- PRECISION_BANDS bands and, where it
    does not settle the band, a ratio within half of it; pairs too few for an interval, or too
    noisy to bound the ratio that closely, ask for more. At the cap, a slower ratio the pairs do
    not settle is inconclusive, anything else passes."""
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
    precision = PRECISION_BANDS * tolerance
    if more_runs and not (1 - precision <= measured.low and measured.high <= 1 + precision):
        return Judgement(AMBIGUOUS, f"{what} {change:+.1%} against reference, not yet measured "
                         f"to within {precision:.0%} {detail}", change)
    return Judgement(PASS, f"{what} {change:+.1%} against reference {detail}, tolerance "
                     f"{tolerance:.0%}", change)


def judge_pairs(reference: list[float], candidate: list[float], tolerance: float,
                more_runs: bool, single_ratio: float | None = None) -> Judgement:
    """The verdict on pairs `reference[i]`, `candidate[i]`: on a 99% interval while more pairs
    may run, on the 95% one at the last. With `single_ratio` (a multi-device case whose 1n1g
    case ran in this session: its ratio), a pass is also judged on the candidate's speedup
    against its own 1n1g over the reference's."""
    measured = paired_ratio(reference, candidate, INTERIM_CONFIDENCE if more_runs else CONFIDENCE)
    verdict = judge_ratio("candidate", measured, tolerance, more_runs)
    if verdict.verdict == PASS and single_ratio:
        scaled = replace(measured, ratio=measured.ratio / single_ratio,
                         low=measured.low and measured.low / single_ratio,
                         high=measured.high and measured.high / single_ratio,
                         ratio_of_medians=None)
        by_speedup = judge_ratio("candidate's speedup", scaled, tolerance, more_runs)
        if by_speedup.verdict != PASS:
            return by_speedup
    return verdict
