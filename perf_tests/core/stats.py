"""How the runs of a case become numbers: median, spread, and whether two sets of runs differ.

The one-sided Mann-Whitney U test is computed exactly here (the run counts are small), so the
gate needs no SciPy on the GPU hosts.
"""
from __future__ import annotations

import math
import statistics
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate

MAD_TO_STDEV = 1.4826


@dataclass(frozen=True)
class Summary:
    runs: int
    median: float
    mean: float
    minimum: float
    maximum: float
    stdev: float
    mad: float  # median absolute deviation from the median

    @property
    def cv(self) -> float:
        """Coefficient of variation: the spread of the runs relative to their mean."""
        return self.stdev / self.mean if self.mean else 0.0

    @property
    def robust_cv(self) -> float:
        """The spread one outlying run cannot inflate: the scaled median absolute deviation
        (1.4826 x MAD, which equals the standard deviation for normal noise) over the median."""
        return MAD_TO_STDEV * self.mad / self.median if self.median else 0.0

    def to_dict(self) -> dict:
        return {"median_ips": self.median, "mean_ips": self.mean, "min_ips": self.minimum,
                "max_ips": self.maximum, "stdev_ips": self.stdev, "cv": self.cv}


def summarize(values: list[float]) -> Summary:
    if not values:
        raise ValueError("no runs to summarize")
    median = statistics.median(values)
    return Summary(runs=len(values), median=median,
                   mean=statistics.fmean(values), minimum=min(values), maximum=max(values),
                   stdev=statistics.stdev(values) if len(values) > 1 else 0.0,
                   mad=statistics.median(abs(value - median) for value in values))


@lru_cache(maxsize=None)
def _u_counts(n: int, m: int) -> tuple[int, ...]:
    """counts[u]: how many of the C(n+m, n) orderings of two untied samples give U = u."""
    # Recurrence on the largest observation: it belongs to the first sample (adding m to U)
    # or to the second (adding nothing).
    if n == 0 or m == 0:
        return (1,)
    with_first = _u_counts(n - 1, m)
    with_second = _u_counts(n, m - 1)
    counts = [0] * (n * m + 1)
    for u, count in enumerate(with_first):
        counts[u + m] += count
    for u, count in enumerate(with_second):
        counts[u] += count
    return tuple(counts)


@lru_cache(maxsize=None)
def _u_at_most(n: int, m: int) -> tuple[int, ...]:
    """at_most[u]: how many orderings give U <= u (the p-value's numerator, summed once)."""
    return tuple(accumulate(_u_counts(n, m)))


def mann_whitney_less(sample: list[float], reference: list[float]) -> float:
    """One-sided p-value that `sample` is stochastically smaller than `reference`.

    U counts the pairs where the sample's value is above the reference's (ties count half);
    a small U means the sample sits below. Exact for untied data; a tie's half is rounded up
    against the sample, so with ties the p-value errs towards "not significant".
    """
    n, m = len(sample), len(reference)
    if n == 0 or m == 0:
        raise ValueError("both samples need at least one run")
    # Per run of the sample: the reference's runs below it, and half of those equal to it.
    ordered = sorted(reference)
    u = 0.0
    for x in sample:
        below, not_above = bisect_left(ordered, x), bisect_right(ordered, x)
        u += below + (not_above - below) / 2
    return _u_at_most(n, m)[math.ceil(u)] / math.comb(n + m, n)


def smallest_p_value(n: int, m: int) -> float:
    """The best p-value that n runs against m can reach: when every run is below every other."""
    return 1 / math.comb(n + m, n)


# Two-sided 95% quantiles of Student's t by degrees of freedom (beyond 30: the normal's 1.96).
T_QUANTILE_95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201,
                 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074,
                 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def sign_interval_rank(pairs: int, confidence: float = 0.95) -> int | None:
    """k such that the k-th smallest and k-th largest of `pairs` paired differences bound their
    median with at least `confidence` (the sign test's interval: coverage 1 - 2 P(B <= k-1),
    B ~ Binomial(pairs, 1/2)); None where even the smallest and largest do not (fewer than 6
    pairs at 95%)."""
    best = None
    below = 0
    for k in range(1, pairs // 2 + 1):
        below += math.comb(pairs, k - 1)
        if 1 - 2 * below / 2 ** pairs < confidence:
            break
        best = k
    return best


def sequential_sign_error(first: int, cap: int, confidence: float) -> float:
    """The chance that the sign interval at `confidence`, looked at after every pair (or round)
    from `first` to `cap`, ever lies wholly on one given side of the true median: the error of
    one one-sided claim over all its looks. The interval lies below the median where at least
    n - k + 1 of n values do (k its rank, `sign_interval_rank`), and that count is a fair coin's
    walk whatever each value's distribution (given its median), so the figure is exact."""
    walks = {0: 1.0}       # values below the median so far -> the chance of that count, unclaimed
    claimed = 0.0
    for n in range(1, cap + 1):
        stepped: dict[int, float] = {}
        for below, chance in walks.items():
            for count in (below, below + 1):
                stepped[count] = stepped.get(count, 0.0) + chance / 2
        walks = stepped
        k = sign_interval_rank(n, confidence) if n >= first else None
        if k is not None:
            for below in [count for count in walks if count >= n - k + 1]:
                claimed += walks.pop(below)
    return claimed


def t_interval(logs: list[float]) -> tuple[float, float]:
    """The paired t 95% interval for the mean of `logs` (at least 2): the calibration's
    comparison for the sign interval (one wild pair widens it past any decision)."""
    pairs = len(logs)
    t = T_QUANTILE_95[pairs - 2] if pairs - 1 <= len(T_QUANTILE_95) else 1.96
    half = t * statistics.stdev(logs) / math.sqrt(pairs)
    centre = statistics.fmean(logs)
    return centre - half, centre + half


@dataclass(frozen=True)
class PairedRatio:
    """Candidate against reference over runs taken in adjacent pairs: the median of the per-pair
    ratios, and a distribution-free 95% interval for it (the sign test's: order statistics of
    the per-pair ratios; each pair ran minutes apart, so the host's drift cancels within it,
    and one run slowed by a burst on the host moves one order statistic, not the interval).
    The estimate is paired like its interval: the ratio of the two sides' medians (kept as
    `ratio_of_medians`) carries the drift of the whole session, which the pairs cancel (a
    calibration session of a 10% slowdown whose host slowed by a third as it ran: pair ratios'
    median 0.91, ratio of medians 0.986). Chosen over a paired t interval by calibration
    (docs/ab.md)."""
    pairs: int
    ratio: float              # the median of candidate[i] / reference[i]
    low: float | None         # None with too few pairs for the interval (95%: fewer than 6)
    high: float | None
    ratio_of_medians: float | None = None   # median(candidate) / median(reference)
    confidence: float = 0.95                # of the interval low-high

    def to_dict(self) -> dict:
        return {"pairs": self.pairs, "ratio": self.ratio,
                "ratio_ci": [self.low, self.high] if self.low is not None else None,
                "ratio_of_medians": self.ratio_of_medians}


def paired_ratio(reference: list[float], candidate: list[float],
                 confidence: float = 0.95) -> PairedRatio:
    """`reference[i]` and `candidate[i]` ran as pair i."""
    pairs = min(len(reference), len(candidate))
    if pairs == 0:
        raise ValueError("no complete pair of runs")
    reference, candidate = reference[:pairs], candidate[:pairs]
    ratios = sorted(c / r for r, c in zip(reference, candidate))
    of_medians = statistics.median(candidate) / statistics.median(reference)
    k = sign_interval_rank(pairs, confidence)
    low, high = (ratios[k - 1], ratios[-k]) if k is not None else (None, None)
    return PairedRatio(pairs, statistics.median(ratios), low, high, of_medians, confidence)


def deciding_pairs(confidence: float) -> int:
    """The fewest pairs whose per-pair ratios give an interval at `confidence` (the sign test's:
    at 95%, all 6 on one side of 1 happen by chance 2 times in 64; at 99%, 8)."""
    return next(pairs for pairs in range(1, 100) if sign_interval_rank(pairs, confidence))
