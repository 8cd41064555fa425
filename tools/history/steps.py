"""The step changes of a case's series: where its sessions' medians change level (ruptures' PELT on
the l2 cost, penalised by the noise the runs show), what changed in the environment or the
settings there, and whether the sessions since hold the new level.

A step is claimed (confirmed) once CONFIRMING = 3 sessions from it on hold the new level: one
session can be an outlier (a host busy in a way its runs did not show), and the median of three
sessions cannot be moved by one. Confirmed steps are searched on the series as it grew, so that
later sessions cannot move them: each prefix (its first L sessions, with their own noise) is
searched with segments of at least three sessions, and a break there is confirmed, at that
session, where it is three sessions or more from every step confirmed before, the search with
one-session segments breaks at the same session (a three-session segment can start a session
early), and the medians either side, not only the means one session can move, are a change by the
search's own rule. A confirmed step stays at its session; where the search of all sessions
(three-session segments) finds no break within two sessions of it, it is withdrawn, with the level
the sessions from it on hold now. A break that the search of all sessions with one-session
segments finds among the last two sessions is unconfirmed.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace

from perf_tests.core.stats import MAD_TO_STDEV, summarize
from perf_tests.core.text import counted
from perf_tests.environment.differences import environment_changes, settings_diff
from perf_tests.judging.tolerance_band import MEDIAN_EFFICIENCY
from tools.history.series import SETTING_KEYS, Point

CONFIRMING = 3
CONFIRMED, UNCONFIRMED, WITHDRAWN = "confirmed", "unconfirmed", "withdrawn"
# A floor under the noise: runs that happen to agree exactly must not make every wobble of the
# medians a change.
NOISE_FLOOR = 0.005


@dataclass
class Step:
    case_id: str
    index: int          # the first session after the change, among the searched ones
    # The median of the sessions from `index` to the next step (or the last) over that of the
    # sessions from the step before, less 1, over all sessions now; a withdrawn step's as the
    # sessions that confirmed it measured it.
    change: float
    label: str
    what_changed: str
    state: str = CONFIRMED
    sessions: int = 0        # the sessions from `index` to the next step or the last
    confirmed_at: str = ""   # withdrawn: the session that confirmed it,
    withdrawn_at: str = ""   # the first of those whose search no longer found it,
    level: float = 0.0       # and the level from `index` on against the one before, now

    @property
    def line(self) -> str:
        direction = "up" if self.change > 0 else "down"
        because = f" ({self.what_changed})" if self.what_changed else ""
        line = (f"{self.case_id}: step {direction} of {abs(self.change):.1%} at session "
                f"{self.label}{because}")
        if self.state == UNCONFIRMED:
            return (f"{line}, unconfirmed: {self.sessions} of the {CONFIRMING} sessions that "
                    "confirm a step")
        if self.state == WITHDRAWN:
            level = (f"{abs(self.level):.1%} {'above' if self.level > 0 else 'below'}"
                     if f"{abs(self.level):.1%}" != "0.0%" else "at")
            return (f"{line}, confirmed at session {self.confirmed_at}, withdrawn at session "
                    f"{self.withdrawn_at}: the {counted(self.sessions, 'session', 'sessions')} "
                    f"from it on are {level} the level before it")
        return line


@dataclass
class Confirmation:
    """A step as the search of a prefix confirmed it (indices of the searched points)."""
    index: int
    change: float       # as measured on that prefix
    confirmed_at: int   # the newest session of that prefix
    held_through: int   # the newest session of the last prefix whose search still found it


def searched(points: list[Point]) -> list[Point]:
    """The points the step search takes: a point the host marked in every run is left out (it
    measured the host, not the stack)."""
    return [point for point in points if point.stack_median]


def median_spread(point: Point) -> float | None:
    """The relative standard error of the point's median, from its unmarked runs (None with
    fewer than two)."""
    if len(point.unmarked) < 2:
        return None
    summary = summarize(point.unmarked)
    return ((MEDIAN_EFFICIENCY * MAD_TO_STDEV * summary.mad / summary.median)
            / math.sqrt(len(point.unmarked)))


def prefix_noises(points: list[Point]) -> list[float]:
    """The noise of the first 1, 2, ... points: their median_spread pooled (root mean square)."""
    squares, pooled, noises = 0.0, 0, []
    for point in points:
        spread = median_spread(point)
        if spread is not None:
            squares, pooled = squares + spread ** 2, pooled + 1
        noises.append(math.sqrt(squares / pooled) if pooled else 0.0)
    return noises


def penalty(length: int, noise: float) -> float:
    """BIC's penalty per change, 2 sigma^2 ln(n), on medians over their median."""
    return 2 * max(noise, NOISE_FLOOR) ** 2 * math.log(length)


def step_indices(medians: list[float], noise: float, min_size: int = 1) -> list[int]:
    """Where the series of medians changes level (indices of the first point after each), with
    segments of at least `min_size` points."""
    import numpy as np
    import ruptures

    if len(medians) < 2 * min_size:
        return []
    signal = np.array(medians) / statistics.median(medians)
    # PELT on the l2 cost: the kernel search with a linear kernel is that cost, searched by
    # ruptures' compiled PELT; its Python `Pelt(model="l2")` finds the same breaks 100 to 500
    # times slower (2.6 s for 1,000 sessions, which a site of 12 cases cannot wait for).
    breaks = ruptures.KernelCPD(kernel="linear", min_size=min_size).fit(signal).predict(
        pen=penalty(len(medians), noise))
    return breaks[:-1]  # ruptures ends the list with the series' length


def level_change(medians: list[float], start: int, index: int, end: int) -> float:
    """The median of medians[index:end] over that of medians[start:index], less 1."""
    return statistics.median(medians[index:end]) / statistics.median(medians[start:index]) - 1


def medians_differ(medians: list[float], start: int, index: int, end: int,
                   noise: float) -> bool:
    """Whether the medians of the segments either side of a break are a change by the search's
    rule (a break pays where it lowers the squared error by more than the penalty)."""
    shift = ((statistics.median(medians[index:end]) - statistics.median(medians[start:index]))
             / statistics.median(medians))
    before, after = index - start, end - index
    return shift ** 2 * before * after / (before + after) > penalty(len(medians), noise)


def confirmations(medians: list[float], noises: list[float]) -> list[Confirmation]:
    """The steps confirmed as the series grew, one search of each prefix (module docstring),
    each with the newest session of the last prefix whose search still found it."""
    found: list[Confirmation] = []
    for length in range(2 * CONFIRMING, len(medians) + 1):
        prefix, noise = medians[:length], noises[length - 1]
        breaks = step_indices(prefix, noise, CONFIRMING)
        for step in found:
            if any(abs(index - step.index) < CONFIRMING for index in breaks):
                step.held_through = length - 1
        edges = [0, *breaks, length]
        fresh = [(edges[number - 1], index, edges[number + 1])
                 for number, index in enumerate(breaks, 1)
                 if all(abs(index - step.index) >= CONFIRMING for step in found)
                 and medians_differ(prefix, edges[number - 1], index, edges[number + 1], noise)]
        if fresh:
            exact = step_indices(prefix, noise)
            found += [Confirmation(index, level_change(prefix, start, index, end), length - 1,
                                   length - 1)
                      for start, index, end in fresh if index in exact]
    return sorted(found, key=lambda step: step.index)


def what_changed(before: Point, after: Point) -> str:
    """`torch 2.11.0 -> 2.12.0, threads 2 -> 1`: environment and settings across a step."""
    old_env = before.session.document.get("environment") or {}
    new_env = after.session.document.get("environment") or {}
    settings = settings_diff(before.row.get("settings") or {}, after.row.get("settings") or {},
                             SETTING_KEYS)
    changes = environment_changes(old_env, new_env) + ([settings] if settings else [])
    return ", ".join(changes) if changes else "no recorded change in environment or settings"


def step_search_problem() -> str | None:
    """Why step changes cannot be searched here (ruptures missing), or None."""
    try:
        import ruptures  # noqa: F401
    except ImportError:
        return "step changes not searched: ruptures is not installed (pip install ruptures)"
    return None


def find_steps(case_id: str, points: list[Point]) -> list[Step]:
    """The step changes of a case's points, on the medians of their unmarked runs: confirmed,
    withdrawn and unconfirmed ones (module docstring), in session order."""
    measured = searched(points)
    if not measured:
        return []
    medians = [point.stack_median for point in measured]
    noises = prefix_noises(measured)
    confirmed = confirmations(medians, noises)
    newest = len(medians) - 1
    pending = [index for index in step_indices(medians, noises[-1])
               if len(medians) - index < CONFIRMING
               and all(abs(index - step.index) >= CONFIRMING for step in confirmed)]
    edges = [0, *sorted([step.index for step in confirmed if step.held_through == newest]
                        + pending), len(medians)]

    def step(index: int, **fields) -> Step:
        start = max(edge for edge in edges if edge < index)
        end = min(edge for edge in edges if edge > index)
        return Step(case_id, index, level_change(medians, start, index, end),
                    measured[index].session.label,
                    what_changed(measured[index - 1], measured[index]), sessions=end - index,
                    **fields)

    steps = [step(index, state=UNCONFIRMED) for index in pending]
    for found in confirmed:
        now = step(found.index)
        steps.append(now if found.held_through == newest else replace(
            now, state=WITHDRAWN, change=found.change, level=now.change,
            confirmed_at=measured[found.confirmed_at].session.label,
            withdrawn_at=measured[found.held_through + 1].session.label))
    return sorted(steps, key=lambda one: one.index)
