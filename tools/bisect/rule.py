"""The decision rule of a component bisection's probe: does the whole set of changes make the
reference slower, and which of two parts of it carries that slowdown. Judged on rounds in which
the reference, the whole and both parts each ran once (fresh launches, in rotating order:
`perf_tests.runs.protocol.run_rounds`), so the host's drift falls on every stack alike and each
question is asked within the rounds, relative to the whole's own slowdown there.

Every claim is a sign interval at CONFIDENCE (`perf_tests.stats.paired_ratio`: order statistics
of one per-round ratio, distribution-free, one wild round moves one order statistic) lying
wholly on one side of a line:

- the whole W against the reference R, W_i / R_i: *slow* where the interval is below 1 and the
  median below 1 - 5% (A/B's regression); *not slow* where its low end is at 0.90 or above
  (half of a 20% slowdown, as a probe before any slowdown was measured asks of a pass);
- each part P against the midpoint of the two, P_i / sqrt(R_i W_i): *more than half* the
  whole's slowdown where the interval is below 1, *less than half* where it is above 1;
- each part against both ends, P_i / R_i below 1 and P_i / W_i above 1: it *holds part* of the
  slowdown, and not all of it.

The answer, once the whole is slow: FIRST (the first part holds more than half, the second less)
or SECOND; else BOTH (each holds part: two causes, or one the parts share); else NEITHER (each
holds less than half: they are slow only together, an interaction). The rule is looked at after
every round from the first to the cap; each one-sided claim is then false, at the least
favourable truth (a part exactly at the line), at most `stats.sequential_sign_error` of the
time: 2.35% from 7 to 16 rounds at 97% (docs/bisect.md). Pure: numbers in, answer out.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from perf_tests.core.stats import PairedRatio, paired_ratio

REFERENCE, WHOLE, FIRST, SECOND = "reference", "whole", "first", "second"
# The answers: the whole not slow (nothing to bisect), slow (a probe without parts), or, where it
# is slow, which part carries it.
NOT_SLOW, SLOW, BOTH, NEITHER = "not slow", "slow", "both", "neither"
# Each look's interval: 97% takes 7 rounds (all 7 on one side happen by chance 2 in 128), so a
# probe is first judged after its 7th round; over the looks from 7 to 16 rounds a one-sided
# claim is false at most 2.35% of the time.
CONFIDENCE = 0.97
# The whole is slow below A/B's band, and not slow where its interval rules out 10% (half of a
# 20% slowdown, the smallest worth bisecting: 2 x A/B's 5%).
TOLERANCE = 0.05
NOT_SLOW_PRECISION = 0.10


@dataclass(frozen=True)
class PartFigures:
    """One part's intervals: against the reference, the midpoint, and the whole."""
    to_reference: PairedRatio
    to_midpoint: PairedRatio
    to_whole: PairedRatio

    @property
    def decided(self) -> bool:
        return self.to_midpoint.low is not None

    @property
    def more_than_half(self) -> bool:
        return self.decided and self.to_midpoint.high < 1

    @property
    def less_than_half(self) -> bool:
        return self.decided and self.to_midpoint.low > 1

    @property
    def holds_part(self) -> bool:
        return self.decided and self.to_reference.high < 1 and self.to_whole.low > 1

    @property
    def slow(self) -> bool:
        """Slower than the reference on its own, as A/B's regression is."""
        return is_slow(self.to_reference)

    @property
    def side(self) -> str:
        """Where the part lies, in words: the table's column."""
        if self.more_than_half:
            return "more than half"
        if self.less_than_half:
            return "less than half"
        return "part" if self.holds_part else "undecided"


@dataclass(frozen=True)
class Judgement:
    """A probe's answer after `rounds` rounds (None: undecided, with `why`), and the figures."""
    answer: str | None
    rounds: int
    whole: PairedRatio
    parts: dict[str, PartFigures] = field(default_factory=dict)
    why: str = ""

    def ratios(self) -> dict[str, float]:
        """Each stack's median ratio to the reference, by arm."""
        return {WHOLE: self.whole.ratio,
                **{arm: part.to_reference.ratio for arm, part in self.parts.items()}}

    def slow_arms(self) -> set[str]:
        """The parts slower than the reference on their own (A/B's regression)."""
        return {arm for arm, part in self.parts.items() if part.slow}


def is_slow(measured: PairedRatio) -> bool:
    return measured.low is not None and measured.high < 1 and measured.ratio < 1 - TOLERANCE


def interval_text(measured: PairedRatio) -> str:
    if measured.low is None:
        return f"{measured.ratio:.3f}, no interval yet"
    return f"{measured.ratio:.3f} ({measured.confidence:.0%} CI {measured.low:.3f}-" \
           f"{measured.high:.3f})"


def judge_rounds(rounds: dict[str, list[float]], confidence: float = CONFIDENCE) -> Judgement:
    """The answer on `rounds` (img/s by arm: REFERENCE, WHOLE, and FIRST and SECOND or neither,
    index i being round i; rounds some arm did not complete are left out)."""
    count = min(len(values) for values in rounds.values())
    reference = rounds[REFERENCE][:count]
    whole = rounds[WHOLE][:count]
    to_whole = paired_ratio(reference, whole, confidence)
    midpoint = [math.sqrt(r * w) for r, w in zip(reference, whole)]
    parts = {arm: PartFigures(paired_ratio(reference, rounds[arm][:count], confidence),
                              paired_ratio(midpoint, rounds[arm][:count], confidence),
                              paired_ratio(whole, rounds[arm][:count], confidence))
             for arm in (FIRST, SECOND) if arm in rounds}
    judged = Judgement(None, count, to_whole, parts)
    if to_whole.low is None:
        return _undecided(judged, f"{count} rounds give no {confidence:.0%} interval")
    if not is_slow(to_whole):
        if to_whole.low >= 1 - NOT_SLOW_PRECISION:
            return _decided(judged, NOT_SLOW)
        return _undecided(judged, f"the whole, ratio {interval_text(to_whole)}, is neither "
                          f"slow nor shown to be within {NOT_SLOW_PRECISION:.0%}")
    if not parts:
        return _decided(judged, SLOW)
    first, second = parts[FIRST], parts[SECOND]
    if first.more_than_half and second.less_than_half:
        return _decided(judged, FIRST)
    if second.more_than_half and first.less_than_half:
        return _decided(judged, SECOND)
    if first.holds_part and second.holds_part:
        return _decided(judged, BOTH)
    if first.less_than_half and second.less_than_half:
        return _decided(judged, NEITHER)
    return _undecided(judged, f"the whole is slow (ratio {interval_text(to_whole)}) but the "
                      f"parts are not shown on either side of half of it (to the midpoint: "
                      f"first {interval_text(first.to_midpoint)}, second "
                      f"{interval_text(second.to_midpoint)})")


def _decided(judged: Judgement, answer: str) -> Judgement:
    return Judgement(answer, judged.rounds, judged.whole, judged.parts)


def _undecided(judged: Judgement, why: str) -> Judgement:
    return Judgement(None, judged.rounds, judged.whole, judged.parts, why)
