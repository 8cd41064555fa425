"""The tolerance band a throughput verdict judges with, and the words that say where it came from.

The first of these that applies decides:
- a number on the command line (`--perf-tolerance 0.03`): that band, for every entry;
- a number the entry stores (one recorded with `--perf-tolerance`, or one recorded before auto
  bands existed, whose stored band was at least the profile's): read as before;
- `auto` (`--perf-tolerance auto`, or an entry that stores `"tolerance": "auto"`, as every entry
  recorded without a number now does): `STANDARD_ERRORS` standard errors of the difference
  between the session's median and the baseline's, from the spread of both sets of runs, never
  below the profile's floor nor above `MAX_TOLERANCE`. A steady GPU's runs give the floor; a
  noisy CPU's, or a host that got noisy since the baseline, a wider band. Where the baseline
  records fewer than `MIN_SPREAD_RUNS` runs there is no spread to derive it from: the profile's
  band applies, and the line says so;
- else (an entry without a tolerance: published figures, hand-written ones) the profile's band.

The band is the smallest change the gate names; the false-alarm bound is the significance test's
(perf_tests/judging/verdicts.py): a regression needs the runs slower than the baseline's at 1%.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from perf_tests.baselines.file import AUTO
from perf_tests.baselines.host_shift import shift_fraction
from perf_tests.core.stats import MAD_TO_STDEV

STANDARD_ERRORS = 3.0
MEDIAN_EFFICIENCY = 1.2533   # the median's standard error over the mean's, for normal noise
MIN_SPREAD_RUNS = 3          # the baseline's runs an auto band needs to see a spread
MAX_TOLERANCE = 0.5


@dataclass(frozen=True)
class Band:
    """A band and where it came from; `reason` is empty for a number given or stored (the line
    then reads as it always did: `tolerance 5%`)."""
    tolerance: float
    reason: str = ""
    auto: bool = False

    @property
    def text(self) -> str:
        """`tolerance 1.2% (auto: the baseline's 10 runs spread 0.4%, these 5 runs 0.3%)`."""
        return f"tolerance {band_percent(self.tolerance)}" + (
            f" ({self.reason})" if self.reason else "")

    def widened(self, factor: float, floor: float) -> "Band":
        """The band of a ratio of two such medians (a speedup): an auto band `factor` times as
        wide, never below `floor`; a given or stored number as it is."""
        if not self.auto:
            return self
        return Band(min(MAX_TOLERANCE, max(floor, self.tolerance * factor)), self.reason, True)


def band_percent(fraction: float) -> str:
    """'1.2%' below 10% (a whole one without its decimal: '5%'), '17%' from 10%."""
    if fraction >= 0.1 or math.isclose(fraction * 100, round(fraction * 100), abs_tol=1e-9):
        return f"{fraction:.0%}"
    return f"{fraction:.1%}"


def spread_percent(fraction: float) -> str:
    """A spread in the band's reason: two decimals below 1% ('0.11%'), one above."""
    return f"{fraction:.2%}" if fraction < 0.01 else f"{fraction:.1%}"


def deviations(runs: list[float]) -> list[float]:
    """Each run's relative deviation from its own set's median."""
    median = statistics.median(runs)
    return [value / median - 1 for value in runs]


def robust_spread(values: list[float]) -> float:
    """The scaled median absolute deviation of relative deviations: a coefficient of variation
    one outlying run cannot inflate."""
    return MAD_TO_STDEV * statistics.median(abs(value) for value in values) if values else 0.0


def slow_tail(baseline_runs: list[float]) -> float:
    """How far below its median the baseline's own slow runs went: its 10th-percentile run (the
    second slowest of 10, the slowest of fewer) as a fraction below the median. A host that
    shifts between speed levels for tens of seconds (the 2-core VM: sessions 17-18% slow with
    nothing changed) shows it here, where a robust spread, made not to see one outlying run,
    does not."""
    ordered = sorted(baseline_runs)
    tenth = ordered[len(ordered) // 10]
    return max(0.0, 1 - tenth / statistics.median(ordered))


def auto_band(baseline_runs: list[float], runs: list[float], floor: float,
              host_shift: dict | None = None) -> Band | None:
    """The auto band of `runs` against `baseline_runs`, or None where the baseline has too few
    runs to show a spread.

    Each side's spread is the larger of its own and the pooled one (both sets' deviations from
    their own medians): three runs alone can show almost none by chance, and a side noisier than
    the other keeps its own. The standard error of each median is 1.2533 x spread / sqrt(runs).
    The band is 3 standard errors of the difference of the medians, and never narrower than the
    baseline's slow tail (`slow_tail`): a session no slower than the baseline's own slow runs is
    within what the host did with nothing changed; nor narrower than the entry's `host_shift`,
    where `rn50-perf calibrate` measured one (perf_tests/baselines/host_shift.py).
    """
    if len(baseline_runs) < MIN_SPREAD_RUNS or not runs:
        return None
    own_baseline, own_session = (robust_spread(deviations(baseline_runs)),
                                 robust_spread(deviations(runs)) if len(runs) > 1 else 0.0)
    pooled = robust_spread(deviations(baseline_runs) + (deviations(runs) if len(runs) > 1
                                                         else []))
    error = MEDIAN_EFFICIENCY * math.sqrt(max(pooled, own_baseline) ** 2 / len(baseline_runs)
                                          + max(pooled, own_session) ** 2 / len(runs))
    resolved = STANDARD_ERRORS * error
    tail, shift = slow_tail(baseline_runs), shift_fraction(host_shift)
    tolerance = min(MAX_TOLERANCE, max(floor, resolved, tail, shift))
    spread = f"the baseline's {len(baseline_runs)} runs spread {spread_percent(own_baseline)}"
    if len(runs) > 1:
        spread += f", these {len(runs)} runs {spread_percent(own_session)}"
    if shift > max(floor, resolved, tail):
        sessions = host_shift["sessions"]
        return Band(tolerance, f"auto: this host's sessions, up to {spread_percent(shift)} apart "
                               f"with nothing changed ({sessions} session"
                               f"{'s' if sessions != 1 else ''}, rn50-perf calibrate); {spread}",
                    auto=True)
    if tail > max(floor, resolved):
        return Band(tolerance, f"auto: the baseline's own slow runs, {spread_percent(tail)} "
                               f"below its median; {spread}", auto=True)
    if resolved < floor:
        return Band(tolerance, f"auto: its floor; {spread}", auto=True)
    return Band(tolerance, f"auto: {spread}", auto=True)


def tolerance_band(given: float | str | None, stored: float | str | None,
                   baseline_runs: list[float], runs: list[float], profile_tolerance: float,
                   floor: float, host_shift: dict | None = None) -> Band:
    """The band a case's `runs` are judged with against an entry (`stored`: its tolerance,
    `baseline_runs`: its runs, `host_shift`: its host's); `given`: --perf-tolerance (a number,
    `auto` or None)."""
    if isinstance(given, (int, float)):
        return Band(float(given))
    if given is None and isinstance(stored, (int, float)):
        return Band(float(stored))
    if given == AUTO or stored == AUTO:
        band = auto_band(baseline_runs, runs, floor, host_shift)
        if band is not None:
            return band
        return Band(profile_tolerance, f"the profile's: an auto band needs the baseline's "
                                       f"spread, and it records {len(baseline_runs)} of the "
                                       f"{MIN_SPREAD_RUNS} runs that show one")
    return Band(profile_tolerance)
