"""The gate's protocol replayed on recorded runs, with no worker started: what the band and the
rule catch at a known slowdown, and how often they cry wolf, on the runs of real hardware.

A replayed session of a 1n1g case is judged as the throughput mode judges it: its runs against a
baseline entry with the band `tolerance_band` gives (auto unless a number is given), more runs
one at a time while the verdict is unclear (up to 3 x the runs), a regression confirmed on twice
the runs unless slower beyond doubt. Its runs are drawn from a pool of recorded runs (their
deviations from the pool's median, with replacement: the spread within and between the sessions
that recorded them), slowed by a known share; with `history` earlier unchanged sessions drawn
the same way, whose runs the band learns the host's movement from, as a gate learns it from
the sessions in its results folders. `replay_sessions` counts the verdicts over many such
sessions; `docs/gpu-hours/run-sets.json` holds the GPU hours' runs, and
`rn50-perf calibrate --replay` prints the table.
"""
from __future__ import annotations

import random
import statistics
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from perf_tests.baselines.file import AUTO, BaselineEntry
from perf_tests.core.cases import FULL, Profile
from perf_tests.judging.tolerance_band import tolerance_band
from perf_tests.judging.verdicts import AMBIGUOUS, INCONCLUSIVE, judge

CASE_ID = "1n1g_replay"


@dataclass(frozen=True)
class Replayed:
    """One replayed session: its verdict, how many runs it took, the band it stated."""
    verdict: str
    runs: int
    tolerance: float


def replay_session(entry: BaselineEntry, next_run: Callable[[], float], runs: int,
                   given: float | str | None = None, profile: Profile = FULL,
                   history: list[list[float]] | None = None) -> Replayed:
    """A session of `runs` runs from `next_run`, and more while unclear, against `entry`, its
    band learning from the `history` of earlier sessions' runs."""
    max_runs, confirm_runs = 3 * runs, 2 * runs
    taken = [next_run() for _ in range(runs)]
    while True:
        band = tolerance_band(given, entry.tolerance, entry.runs_ips, taken, profile.tolerance,
                              profile.band_floor, history=history)
        more = len(taken) < max_runs
        judged = judge(CASE_ID, taken, entry, band, more_runs=more, confirm_runs=confirm_runs)
        if judged.verdict != AMBIGUOUS or not more:
            verdict = INCONCLUSIVE if judged.verdict == AMBIGUOUS else judged.verdict
            return Replayed(verdict, len(taken), band.tolerance)
        taken.append(next_run())


def pool_drawer(pool: list[float], median: float, share: float,
                generator: random.Random) -> Callable[[], float]:
    """Runs at `median` x (1 - `share`), each moved by a deviation of `pool` from its median."""
    centre = statistics.median(pool)
    deviations = [value / centre - 1 for value in pool]
    return lambda: median * (1 - share) * (1 + generator.choice(deviations))


def replay_sessions(pool: list[float], runs: int, share: float, sessions: int,
                    baseline_runs: int = 10, given: float | str | None = None,
                    profile: Profile = FULL, seed: str = "",
                    history: int = 0) -> tuple[Counter, list[Replayed]]:
    """`sessions` sessions of `runs` runs slowed by `share`, each against a baseline of
    `baseline_runs` runs recorded (with tolerance `auto`) from the same `pool`, after `history`
    unchanged sessions of `runs` runs: the verdicts counted, and each session. Seeded by the
    pool, the counts and `seed`: the same call gives the same figures."""
    generator = random.Random(zlib.crc32(
        f"{pool}{runs}{share}{sessions}{seed}{history or ''}".encode()))
    median = statistics.median(pool)
    replayed = []
    for _ in range(sessions):
        recorded = pool_drawer(pool, median, 0.0, generator)
        baseline = [recorded() for _ in range(baseline_runs)]
        entry = BaselineEntry(CASE_ID, statistics.median(baseline), baseline, tolerance=AUTO)
        earlier = [[recorded() for _ in range(runs)] for _ in range(history)]
        replayed.append(replay_session(entry, pool_drawer(pool, median, share, generator), runs,
                                       given, profile, earlier if history else None))
    return Counter(session.verdict for session in replayed), replayed


def recorded_session(baseline: list[float], runs: list[float], share: float,
                     given: float | str | None = AUTO, profile: Profile = FULL) -> Replayed:
    """Recorded `runs` slowed by `share`, judged as they are (no run to add) against an entry
    of the recorded `baseline` runs."""
    entry = BaselineEntry(CASE_ID, statistics.median(baseline), list(baseline), tolerance=AUTO)
    slowed = [value * (1 - share) for value in runs]
    band = tolerance_band(given, entry.tolerance, entry.runs_ips, slowed, profile.tolerance,
                          profile.band_floor)
    judged = judge(CASE_ID, slowed, entry, band)
    verdict = INCONCLUSIVE if judged.verdict == AMBIGUOUS else judged.verdict
    return Replayed(verdict, len(slowed), band.tolerance)
