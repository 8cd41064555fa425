"""What a verdict could have seen: the smallest slowdown a case's runs, their spread and the
gate's own rule would have caught (`min_detectable_slowdown` in results.json, `detects` in the
tables), so that a pass on a few noisy runs does not read as "no slowdown".

Against a stored baseline (throughput, time to train), the case's runs are simulated at a
slowdown d: as many runs as it took, each the baseline's median moved by d and by a deviation
drawn from the case's own runs' deviations from their median (the spread this session saw).
The figure is the smallest d at which the gate's rule (the median beyond the band and
`verdicts.slower_for_sure` against the baseline's recorded runs) declares a regression in at
least POWER of DRAWS such sessions, found by bisection: the draws are fixed (seeded by the case
id), and every draw's runs only fall as d grows, so detection only grows with d. It is never
below the tolerance: the rule needs the median beyond the band. A/B reads it from its interval
instead (`paired_min_detectable`).
"""
from __future__ import annotations

import math
import random
import statistics
import zlib
from collections.abc import Callable

from perf_tests.core.rows import Row
from perf_tests.core.row_values import row_of
from perf_tests.core.stats import PairedRatio
from perf_tests.judging.verdicts import slower_for_sure

POWER = 0.8              # a slowdown counts as detectable where the rule catches it this often
DRAWS = 200              # simulated sessions per slowdown tried
MOST_DETECTABLE = 0.9    # beyond this the runs "could not detect any slowdown" (None)
PRECISION = 0.001        # the bisection stops within this of the smallest detectable slowdown


def deviations(runs: list[float]) -> list[float]:
    """Each run's relative deviation from the runs' median."""
    median = statistics.median(runs)
    return [value / median - 1 for value in runs]


def spread_to_draw(runs: list[float], baseline_runs: list[float]) -> list[float] | None:
    """The deviations the simulated runs draw from: the case's own; for a case of one run (which
    saw no spread) the baseline's recorded runs'; None where neither has two runs to show one."""
    for source in (runs, baseline_runs):
        if len(source) >= 2:
            return deviations(source)
    return None


def smallest_detected(detected: Callable[[float, list[float]], bool], spread: list[float],
                      runs: int, tolerance: float, seed: str) -> float | None:
    """The smallest slowdown in (tolerance, MOST_DETECTABLE] that `detected(slowdown, factors)`
    catches in POWER of DRAWS draws of `runs` factors 1 + a deviation from `spread`; None where
    even MOST_DETECTABLE is not. A draw caught at a slowdown is caught at every larger one, so
    each look asks only the draws the looks before have not settled."""
    generator = random.Random(zlib.crc32(seed.encode()))
    draws = [[1 + generator.choice(spread) for _ in range(runs)] for _ in range(DRAWS)]
    needed = math.ceil(POWER * DRAWS)
    caught_at_low: set[int] = set()             # surely caught at `low`, so at any slowdown
    maybe_at_high = set(range(DRAWS))           # all but those surely missed at `high`

    def look(slowdown: float) -> tuple[bool, set[int], set[int]]:
        """Whether POWER of the draws are caught at `slowdown`; the draws surely caught there,
        and those that may be (the ones asked and caught, and the ones left unasked)."""
        caught = set(caught_at_low)
        unasked = sorted(maybe_at_high - caught_at_low)
        while unasked and len(caught) < needed <= len(caught) + len(unasked):
            draw = unasked.pop()
            if detected(slowdown, draws[draw]):
                caught.add(draw)
        return len(caught) >= needed, caught, caught | set(unasked)

    low, high = tolerance, MOST_DETECTABLE
    if low >= high or not look(high)[0]:
        return None
    while high - low > PRECISION:
        middle = (low + high) / 2
        powerful, caught, maybe = look(middle)
        if powerful:
            high, maybe_at_high = middle, maybe
        else:
            low, caught_at_low = middle, caught
    return rounded_up(high)


def min_detectable_slowdown(case_id: str, runs: list[float], baseline_runs: list[float],
                            baseline_median: float, tolerance: float,
                            lower_is_better: bool = False) -> float | None:
    """The smallest relative slowdown these runs could have shown against the baseline: a
    throughput `d` lower, or (`lower_is_better`, a time to train) `d` longer. Times are judged
    negated, as verdicts.judge_time_to_train judges them."""
    spread = spread_to_draw(runs, baseline_runs)
    if spread is None:
        return None
    sign = -1 if lower_is_better else 1          # slower: a lower throughput, a longer time
    baseline = [sign * value for value in baseline_runs]
    floor = sign * baseline_median * (1 - sign * tolerance)

    def detected(slowdown: float, factors: list[float]) -> bool:
        slowed = sign * baseline_median * (1 - sign * slowdown)
        simulated = [slowed * factor for factor in factors]
        return statistics.median(simulated) < floor and \
            slower_for_sure(simulated, baseline, floor)

    return smallest_detected(detected, spread, len(runs), tolerance, case_id)


def detectable_figure(case_id: str, runs: list[float], baseline_runs: list[float],
                      baseline_median: float, tolerance: float,
                      lower_is_better: bool = False) -> dict:
    """`{"min_detectable_slowdown": figure}` for a row, or {} where neither the runs nor the
    baseline's show a spread to judge by (one run against an entry without recorded runs):
    then nothing is stated, rather than a null that reads as "nothing detectable"."""
    if spread_to_draw(runs, baseline_runs) is None:
        return {}
    return {"min_detectable_slowdown": min_detectable_slowdown(
        case_id, runs, baseline_runs, baseline_median, tolerance, lower_is_better)}


def paired_min_detectable(measured: PairedRatio, tolerance: float) -> float | None:
    """A/B: the slowdown at which an interval as wide as this one, moved with its median pair
    ratio to 1 - d, would lie wholly below 1 with the ratio below the band (the regression of
    modes/ab.py's `judge_ratio`), taking the interval's wider side for both: a sign test's
    interval is lopsided by chance, and a slowdown as far below the ratio as the interval
    reaches is one these pairs cannot tell from none (0.916-1.063 around 1.005 detects 8.9%,
    not the 5.5% its upper side alone gives). Never below the tolerance; None without an
    interval (too few pairs) or beyond MOST_DETECTABLE."""
    if measured.high is None or measured.low is None:
        return None
    slowdown = max(tolerance, 1 - measured.ratio / measured.high,
                   1 - measured.low / measured.ratio)
    return rounded_up(slowdown) if slowdown <= MOST_DETECTABLE else None


def rounded_up(slowdown: float) -> float:
    """To four decimals, upwards: a figure rounded down could fall below the smallest slowdown
    caught."""
    return math.ceil(slowdown * 1e4) / 1e4


def detects_text(row: Row | dict) -> str:
    """The `detects` cell: '12%', '>90%' where nothing up to MOST_DETECTABLE was, '-' where the
    row states no figure (no baseline, no runs, a file from before the figure)."""
    row = row_of("", row)   # every kind states it alike
    if not row.detects_stated:
        return "-"
    figure = row.min_detectable_slowdown
    return f">{MOST_DETECTABLE:.0%}" if figure is None else f"{figure:.0%}"


def blind_pass_warning(case_id: str, row: Row | dict) -> str | None:
    """The warning of a pass that could not have seen a slowdown of its own tolerance (as the
    figures are shown, in whole percent); None for one that could."""
    row = row_of(case_id, row)
    if not row.detects_stated or row.tolerance is None:
        return None
    figure, tolerance = row.min_detectable_slowdown, row.tolerance
    if figure is None and tolerance < MOST_DETECTABLE:
        seen = f"any slowdown up to {MOST_DETECTABLE:.0%}"
    elif figure is not None and figure > tolerance and f"{figure:.0%}" != f"{tolerance:.0%}":
        seen = f"a slowdown below {figure:.0%}"
    else:
        return None
    return f"{case_id}: pass, but these runs could not have seen {seen}: take more runs " \
           "(--perf-runs)"
