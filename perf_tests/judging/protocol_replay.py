"""The gate's protocol replayed on recorded runs, with no worker started: what the band and the
rule catch at a known slowdown, and how often they cry wolf, on the runs of real hardware.

A replayed session of a 1n1g case is judged by the gate's own protocol
(perf_tests/judging/gate_protocol.py, as the throughput mode judges): its runs against a
baseline entry with the band `tolerance_band` gives (auto unless a number is given), more runs
one at a time while the verdict is unclear (up to the max runs `run_counts` gives, or
`max_runs`), a regression confirmed on its confirmation runs unless slower beyond doubt. Its
runs are drawn from a pool of recorded runs (their deviations from the pool's median, with
replacement: the spread within and between the sessions that recorded them), slowed by a known
share; with `history` earlier unchanged sessions drawn the same way, whose runs the band learns
the host's movement from, as a gate learns it from the sessions in its results folders.
`replay_sessions` counts the verdicts over many such sessions; `docs/gpu-hours/run-sets.json`
holds the GPU hours' runs, and `rn50-perf calibrate --replay` prints the table.
"""
from __future__ import annotations

import random
import statistics
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from perf_tests.baselines.file import AUTO, BaselineEntry
from perf_tests.core.cases import FULL, Case, Profile
from perf_tests.judging.gate_protocol import GateProtocol, run_counts

CASE = Case(1, 1, "amp", 256)   # one device: its speedup is never judged


@dataclass(frozen=True)
class Replayed:
    """One replayed session: its verdict, how many runs it took, the band it stated."""
    verdict: str
    runs: int
    tolerance: float


def replay_session(entry: BaselineEntry, next_run: Callable[[], float], runs: int,
                   given: float | str | None = None, profile: Profile = FULL,
                   history: list[list[float]] | None = None,
                   max_runs: int | None = None) -> Replayed:
    """A session of `runs` runs from `next_run`, and more while unclear (up to `max_runs`, as
    --perf-set max-runs gives it), against `entry`, its band learning from the `history` of
    earlier sessions' runs."""
    counts = run_counts(runs, max_runs)
    protocol = GateProtocol(CASE, entry, given, profile, counts.max_runs, counts.confirm_runs,
                            history=history)
    taken = [next_run() for _ in range(runs)]
    while protocol.more_wanted(taken):
        taken.append(next_run())
    return settled_session(protocol, taken)


def settled_session(protocol: GateProtocol, taken: list[float], final: bool = False) -> Replayed:
    """The verdict a gate gives on the `taken` runs, how many, and its band."""
    settled = protocol.settled(protocol.judgement(taken, final), len(taken))
    return Replayed(settled.verdict, len(taken), protocol.band(taken).tolerance)


def pool_drawer(pool: list[float], median: float, share: float,
                generator: random.Random) -> Callable[[], float]:
    """Runs at `median` x (1 - `share`), each moved by a deviation of `pool` from its median."""
    centre = statistics.median(pool)
    deviations = [value / centre - 1 for value in pool]
    return lambda: median * (1 - share) * (1 + generator.choice(deviations))


def replay_sessions(pool: list[float], runs: int, share: float, sessions: int,
                    baseline_runs: int = 10, given: float | str | None = None,
                    profile: Profile = FULL, seed: str = "", history: int = 0,
                    max_runs: int | None = None) -> tuple[Counter, list[Replayed]]:
    """`sessions` sessions of `runs` runs slowed by `share`, each against a baseline of
    `baseline_runs` runs recorded (with tolerance `auto`) from the same `pool`, after `history`
    unchanged sessions of `runs` runs, up to `max_runs` each (as --perf-set max-runs gives
    it): the verdicts counted, and each session. Seeded by the pool, the counts and `seed`: the
    same call gives the same figures."""
    generator = random.Random(zlib.crc32(
        f"{pool}{runs}{share}{sessions}{seed}{history or ''}{max_runs or ''}".encode()))
    median = statistics.median(pool)
    replayed = []
    for _ in range(sessions):
        recorded = pool_drawer(pool, median, 0.0, generator)
        baseline = [recorded() for _ in range(baseline_runs)]
        entry = BaselineEntry(CASE.case_id, statistics.median(baseline), baseline,
                              tolerance=AUTO)
        earlier = [[recorded() for _ in range(runs)] for _ in range(history)]
        replayed.append(replay_session(entry, pool_drawer(pool, median, share, generator), runs,
                                       given, profile, earlier if history else None,
                                       max_runs))
    return Counter(session.verdict for session in replayed), replayed


def recorded_session(baseline: list[float], runs: list[float], share: float,
                     given: float | str | None = AUTO, profile: Profile = FULL) -> Replayed:
    """Recorded `runs` slowed by `share`, judged as they are (no run to add) against an entry
    of the recorded `baseline` runs."""
    entry = BaselineEntry(CASE.case_id, statistics.median(baseline), list(baseline),
                          tolerance=AUTO)
    slowed = [value * (1 - share) for value in runs]
    counts = run_counts(len(slowed))
    return settled_session(GateProtocol(CASE, entry, given, profile, counts.max_runs,
                                        counts.confirm_runs), slowed, final=True)
