"""The tolerance band a throughput verdict judges with, and the words that say where it came from.

The first of these that applies decides:
- a number on the command line (`--perf-tolerance 0.03`): that band, for every entry;
- a number the entry stores (one recorded with `--perf-tolerance`, or one recorded before auto
  bands existed, whose stored band was at least the profile's): read as before;
- `auto` (`--perf-tolerance auto`, or an entry that stores `"tolerance": "auto"`, as every entry
  recorded without a number now does): `STANDARD_ERRORS` standard errors of the difference
  between the session's median and the baseline's, from the scatter of both sets of runs, plus
  how far below the baseline the host's earlier sessions on the same stack went (`Movement`),
  never below the floor nor above `MAX_TOLERANCE`. A steady GPU's runs give the floor; a noisy
  CPU's, or a host that got noisy since the baseline, a wider band. Where the baseline records
  fewer than `MIN_SPREAD_RUNS` runs there is no scatter to derive it from: the profile's band
  applies, and the line says so;
- else (an entry without a tolerance: published figures, hand-written ones) the profile's band.

Three words, three kinds of spread: a row's `spread` (the table's column, results.json's `cv`)
is the runs' standard deviation over their mean; a band's `scatter` is 1.4826 x the runs' median
absolute deviation over their median (one outlying run does not move it); the host's `movement`
is how far apart its sessions' medians lie.

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
from perf_tests.core.text import counted

STANDARD_ERRORS = 3.0
MEDIAN_EFFICIENCY = 1.2533   # the median's standard error over the mean's, for normal noise
MIN_SPREAD_RUNS = 3          # the baseline's runs an auto band needs to see a scatter
MAX_TOLERANCE = 0.5
# The host's earlier sessions on the baseline's stack (perf_tests/results/history.py): from this
# many on, the band learns how far the host moves between sessions; below it, the rule without
# them, and the line says so.
MIN_HISTORY = 4
# The lowest floor a steady host allows: the H200's unchanged sessions lay at most 0.21% apart
# over four sessions on two days (docs/gpu-hours/run-sets.json); half a percent is over twice
# that, and half the 1% the gate should catch on such a card. The floor taken is `FLOOR_FACTOR`
# times how far the host moved (`steadiness`), at least this, at most the profile's floor.
LOWEST_FLOOR = 0.005
FLOOR_FACTOR = 2.0


@dataclass(frozen=True)
class Band:
    """A band and where it came from; `reason` is empty for a number given or stored (the line
    then reads as it always did: `tolerance 5%`)."""
    tolerance: float
    reason: str = ""
    auto: bool = False

    @property
    def text(self) -> str:
        """`tolerance 1.2% (auto: 3 standard errors of the medians' difference, 1.2%; the
        baseline's 10 runs scatter 0.40%, these 5 runs 0.30%)`."""
        return f"tolerance {band_percent(self.tolerance)}" + (
            f" ({self.reason})" if self.reason else "")

    def widened(self, factor: float, floor: float) -> "Band":
        """The band of a ratio of two such medians (a speedup): an auto band `factor` times as
        wide, never below `floor`; a given or stored number as it is."""
        if not self.auto:
            return self
        return Band(min(MAX_TOLERANCE, max(floor, self.tolerance * factor)), self.reason, True)


@dataclass(frozen=True)
class Movement:
    """How the host's earlier sessions on the baseline's stack lay against the baseline.

    Robust to a slowed session among them: the `kth` slowest session sets how far below the
    baseline the host goes (`shortfall`), never the slowest alone, so one session slowed by
    something the environment does not record (or a tenth of them, in a long history) cannot
    widen the band that would catch the next one. A host's level is a level once two sessions
    have found it."""
    sessions: int
    kth: int
    shortfall: float   # how far the kth slowest session's median lies below the baseline's
    moved: float       # the kth fastest session's median over the kth slowest's, less 1
    deepest: float     # the kth deepest a session's slowest run went below its own median

    @property
    def words(self) -> str:
        return f"{counted(self.sessions, 'earlier session', 'earlier sessions')} on this stack"


def kth_of(sessions: int) -> int:
    """Which slowest session counts: the second, or the tenth percentile's in a long history."""
    return max(2, sessions // 10 + 1)


def deepest_run(runs: list[float]) -> float:
    """How far a set's slowest run lies below its median."""
    return 1 - min(runs) / statistics.median(runs)


def movement(baseline_median: float, sessions: list[list[float]]) -> Movement | None:
    """The host's movement from its earlier `sessions` (each one's runs); None below
    `MIN_HISTORY`."""
    sessions = [runs for runs in sessions if runs]
    if len(sessions) < MIN_HISTORY or baseline_median <= 0:
        return None
    kth = kth_of(len(sessions))
    medians = sorted(statistics.median(runs) for runs in sessions)
    slow, fast = medians[kth - 1], medians[-kth]
    deepest = sorted(map(deepest_run, sessions))[-kth]
    return Movement(len(sessions), kth, max(0.0, 1 - slow / baseline_median),
                    max(0.0, fast / slow - 1), deepest)


def band_percent(fraction: float) -> str:
    """'1.2%' below 10% (a whole one without its decimal: '5%'), '17%' from 10%."""
    if fraction >= 0.1 or math.isclose(fraction * 100, round(fraction * 100), abs_tol=1e-9):
        return f"{fraction:.0%}"
    return f"{fraction:.1%}"


def scatter_percent(fraction: float) -> str:
    """A scatter or movement in the band's reason: two decimals below 1% ('0.11%'), one above."""
    return f"{fraction:.2%}" if fraction < 0.01 else f"{fraction:.1%}"


def deviations(runs: list[float]) -> list[float]:
    """Each run's relative deviation from its own set's median."""
    median = statistics.median(runs)
    return [value / median - 1 for value in runs]


def robust_spread(values: list[float]) -> float:
    """The scatter: the scaled median absolute deviation of relative deviations, a coefficient
    of variation one outlying run cannot inflate."""
    return MAD_TO_STDEV * statistics.median(abs(value) for value in values) if values else 0.0


def slow_tail(baseline_runs: list[float]) -> float:
    """How far below its median the baseline's own slow runs went: its 10th-percentile run (the
    second slowest of 10, the slowest of fewer) as a fraction below the median. A host that
    shifts between speed levels for tens of seconds (the 2-core VM: sessions 17-18% slow with
    nothing changed) shows it here, where a robust scatter, made not to see one outlying run,
    does not."""
    ordered = sorted(baseline_runs)
    tenth = ordered[len(ordered) // 10]
    return max(0.0, 1 - tenth / statistics.median(ordered))


def resolution(baseline_runs: list[float], runs: list[float]) -> tuple[float, float, float]:
    """(3 standard errors of the medians' difference, the baseline's scatter, the session's).

    Each side's scatter is the larger of its own and the pooled one (both sets' deviations from
    their own medians): three runs alone can show almost none by chance, and a side noisier than
    the other keeps its own. The standard error of each median is 1.2533 x scatter /
    sqrt(runs)."""
    own_baseline = robust_spread(deviations(baseline_runs))
    own_session = robust_spread(deviations(runs)) if len(runs) > 1 else 0.0
    pooled = robust_spread(deviations(baseline_runs) + (deviations(runs) if len(runs) > 1
                                                        else []))
    error = MEDIAN_EFFICIENCY * math.sqrt(max(pooled, own_baseline) ** 2 / len(baseline_runs)
                                          + max(pooled, own_session) ** 2 / len(runs))
    return STANDARD_ERRORS * error, own_baseline, own_session


def auto_band(baseline_runs: list[float], runs: list[float], floor: float,
              host_shift: dict | None = None,
              history: list[list[float]] | None = None) -> Band | None:
    """The auto band of `runs` against `baseline_runs`, or None where the baseline has too few
    runs to show a scatter.

    The band is what the runs resolve (`resolution`) plus, from `MIN_HISTORY` earlier sessions
    on the baseline's stack on (`history`: each one's runs), how far below the baseline the host
    went in them (`Movement.shortfall`): its kth slowest session is one median, measured with
    the same noise, so a session at that level lies within the resolution of it. Where the host
    moved little (`steadiness`) the floor comes down to `FLOOR_FACTOR` x that, never below
    `LOWEST_FLOOR`. Never narrower than the baseline's slow tail (`slow_tail`): a session no
    slower than the baseline's own slow runs is within what the host did with nothing changed;
    nor narrower than the entry's `host_shift`, where `rn50-perf calibrate` measured one
    (perf_tests/baselines/host_shift.py).
    """
    if len(baseline_runs) < MIN_SPREAD_RUNS or not runs:
        return None
    resolved, own_baseline, own_session = resolution(baseline_runs, runs)
    moved = movement(statistics.median(baseline_runs), history or [])
    floor_words = "its floor"
    if moved is not None:
        steady = steadiness(moved, baseline_runs)
        if FLOOR_FACTOR * steady < floor:
            floor = max(LOWEST_FLOOR, FLOOR_FACTOR * steady)
            floor_words = (f"its floor, twice how far the host moved ({scatter_percent(steady)}: "
                           f"{moved.words}, the baseline's runs)")
    learned = resolved + (moved.shortfall if moved else 0.0)
    tail, shift = slow_tail(baseline_runs), shift_fraction(host_shift)
    tolerance = min(MAX_TOLERANCE, max(floor, learned, tail, shift))
    scatter = f"the baseline's {len(baseline_runs)} runs scatter {scatter_percent(own_baseline)}"
    if len(runs) > 1:
        scatter += f", these {len(runs)} runs {scatter_percent(own_session)}"
    if history is not None and moved is None:
        scatter += (f"; {counted(len(history), 'earlier session', 'earlier sessions')} on this "
                    f"stack, {MIN_HISTORY} needed to learn the host's movement")
    errors = f"3 standard errors of the medians' difference, {scatter_percent(resolved)}"
    if shift > max(floor, learned, tail):
        sessions = host_shift["sessions"]
        source = (f"this host's sessions, up to {scatter_percent(shift)} apart with nothing "
                  f"changed ({counted(sessions, 'session', 'sessions')}, rn50-perf calibrate)")
    elif tail > max(floor, learned):
        source = f"the baseline's own slow runs, {scatter_percent(tail)} below its median"
    elif learned < floor:
        source = floor_words
    elif moved is not None and moved.shortfall > 0:
        source = (f"{moved.words}, the {ordinal(moved.kth)} slowest "
                  f"{scatter_percent(moved.shortfall)} below the baseline, plus {errors}")
    elif moved is not None:
        source = (f"{errors}; {moved.words}, the {ordinal(moved.kth)} slowest not below the "
                  "baseline")
    else:
        source = errors
    return Band(tolerance, f"auto: {source}; {scatter}", auto=True)


def steadiness(moved: Movement, baseline_runs: list[float]) -> float:
    """How far the host moved where nothing changed: between its earlier sessions (their
    medians' movement) and within them and the baseline (a set's slowest run below its median),
    the largest. Only the floor reads it, and only to come down: a run the host recorded lies
    within its reach, however robustly the sessions' medians leave it aside."""
    return max(moved.moved, moved.deepest, deepest_run(baseline_runs))


def ordinal(number: int) -> str:
    return {1: "1st", 2: "2nd", 3: "3rd"}.get(number, f"{number}th")


def tolerance_band(given: float | str | None, stored: float | str | None,
                   baseline_runs: list[float], runs: list[float], profile_tolerance: float,
                   floor: float, host_shift: dict | None = None,
                   history: list[list[float]] | None = None) -> Band:
    """The band a case's `runs` are judged with against an entry (`stored`: its tolerance,
    `baseline_runs`: its runs, `host_shift`: its host's, `history`: the runs of each of the
    host's earlier sessions on its stack, None where none were looked for); `given`:
    --perf-tolerance (a number, `auto` or None)."""
    if isinstance(given, (int, float)):
        return Band(float(given))
    if given is None and isinstance(stored, (int, float)):
        return Band(float(stored))
    if given == AUTO or stored == AUTO:
        band = auto_band(baseline_runs, runs, floor, host_shift, history)
        if band is not None:
            return band
        return Band(profile_tolerance, f"the profile's: an auto band needs the baseline's "
                                       f"scatter, and it records {len(baseline_runs)} of the "
                                       f"{MIN_SPREAD_RUNS} runs that show one")
    return Band(profile_tolerance)
