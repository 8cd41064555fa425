"""The step changes of a case's series: where its sessions' medians change level (ruptures' PELT on
the l2 cost, penalised by the noise the runs show), what changed in the environment or the
settings there, and whether the sessions since hold the new level.

A step is claimed (confirmed) once CONFIRMING = 3 sessions from it on hold the new level: one
session can be an outlier (a host busy in a way its runs did not show), and the median of three
sessions cannot be moved by one. A step holds where the median of the sessions from it to the
next step that holds, against that of the sessions from the one before, is a change by the
search's own rule (a break pays where it lowers the squared error by more than the penalty): on
medians, which one session cannot move, where the search weighs means, which it can. Confirmed
steps are found on the series as it grew, so that later sessions cannot move them: for each
prefix (its first L sessions, with their own noise), a break of its search is confirmed there,
at that session, where it has 3 sessions or more before it and after it, is 3 sessions or more
from every step confirmed before, holds, and the median of its first 3 sessions is nearer the
new level than the old. A confirmed step stays at its session; where it no longer holds on all
the sessions, it is withdrawn, with the level the sessions from it on hold now. A break that
the search of all sessions finds among the last two is unconfirmed. A confirmed step's change
is measured over all sessions now; a withdrawn one's as the sessions that confirmed it measured
it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

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
    # sessions from the step before, less 1 (a withdrawn step's as it was confirmed).
    change: float
    label: str
    what_changed: str
    state: str = CONFIRMED
    sessions: int = 0        # the sessions from `index` to the next step or the last
    confirmed_at: str = ""   # withdrawn: the session that confirmed it,
    withdrawn_at: str = ""   # the first after which it did not hold again,
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
    """A step as a prefix confirmed it (indices of the searched points)."""
    index: int
    change: float       # as measured on that prefix
    confirmed_at: int   # the newest session of that prefix
    held_through: int   # the newest session of the last prefix on which it held


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


def step_indices(medians: list[float], noise: float) -> list[int]:
    """Where the series of medians changes level (indices of the first point after each)."""
    import ruptures

    if len(medians) < 2:
        return []
    signal = np.array(medians) / np.median(medians)
    # PELT on the l2 cost: the kernel search with a linear kernel is that cost, searched by
    # ruptures' compiled PELT; its Python `Pelt(model="l2")` finds the same breaks 100 to 500
    # times slower (2.6 s for 1,000 sessions, which a site of 12 cases cannot wait for).
    breaks = ruptures.KernelCPD(kernel="linear", min_size=1).fit(signal).predict(
        pen=penalty(len(medians), noise))
    return [int(index) for index in breaks[:-1]]  # ruptures ends them with the length


def level_change(medians: np.ndarray, start: int, index: int, end: int) -> float:
    """The median of medians[index:end] over that of medians[start:index], less 1."""
    return float(np.median(medians[index:end]) / np.median(medians[start:index]) - 1)


def holding(medians: np.ndarray, steps: list[int], noise: float) -> list[int]:
    """Of these steps (sorted indices), those that hold (module docstring): the first that does
    not is dropped, until all that are left hold."""
    scale, limit = np.median(medians), penalty(len(medians), noise)
    kept = list(steps)
    while True:
        edges = [0, *kept, len(medians)]
        for number, index in enumerate(kept, 1):
            before, after = medians[edges[number - 1]:index], medians[index:edges[number + 1]]
            shift = (np.median(after) - np.median(before)) / scale
            if shift ** 2 * len(before) * len(after) / (len(before) + len(after)) <= limit:
                del kept[number - 1]
                break
        else:
            return kept


def around(steps: list[int], index: int, length: int) -> tuple[int, int]:
    """The step before `index` (or 0) and the one after it (or `length`), among `steps`."""
    return (max([0, *(step for step in steps if step < index)]),
            min([length, *(step for step in steps if step > index)]))


def first_sessions_hold(medians: np.ndarray, start: int, index: int, end: int) -> bool:
    """Whether the median of the CONFIRMING sessions from `index` is nearer the level from it
    (to `end`) than the level before it (from `start`)."""
    first = np.median(medians[index:index + CONFIRMING])
    return (abs(first - np.median(medians[index:end]))
            < abs(first - np.median(medians[start:index])))


def confirmations(medians: np.ndarray, noises: list[float]) -> list[Confirmation]:
    """The steps confirmed as the series grew, one search of each prefix (module docstring),
    each with the newest session of the last prefix on which it held."""
    found: dict[int, Confirmation] = {}
    for length in range(2 * CONFIRMING, len(medians) + 1):
        prefix, noise = medians[:length], noises[length - 1]
        held = holding(prefix, sorted(found), noise)
        for index in step_indices(prefix, noise):
            if not (CONFIRMING <= index <= length - CONFIRMING
                    and all(abs(index - step) >= CONFIRMING for step in found)):
                continue
            trial = holding(prefix, sorted([*held, index]), noise)
            start, end = around(trial, index, length)
            if index in trial and first_sessions_hold(prefix, start, index, end):
                held = trial
                found[index] = Confirmation(index, level_change(prefix, start, index, end),
                                            length - 1, length - 1)
        for index in held:
            found[index].held_through = length - 1
    return [found[index] for index in sorted(found)]


def what_changed(before: Point, after: Point) -> str:
    """`torch 2.11.0 -> 2.12.0, threads 2 -> 1`: environment and settings across a step."""
    old_env = before.session.document.get("environment") or {}
    new_env = after.session.document.get("environment") or {}
    settings = settings_diff(before.row.settings, after.row.settings, SETTING_KEYS)
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
    medians = np.array([point.stack_median for point in measured])
    noises = prefix_noises(measured)
    confirmed = confirmations(medians, noises)
    newest = len(medians) - 1
    held = [step.index for step in confirmed if step.held_through == newest]
    pending = [index for index in step_indices(medians, noises[-1])
               if len(medians) - index < CONFIRMING]

    def step(index: int, steps: list[int], **fields) -> Step:
        """The step at `index`, measured between the steps around it."""
        start, end = around(steps, index, len(medians))
        return Step(case_id, index, level_change(medians, start, index, end),
                    measured[index].session.label,
                    what_changed(measured[index - 1], measured[index]), sessions=end - index,
                    **fields)

    steps = [step(index, held + pending, state=UNCONFIRMED) for index in pending]
    for found in confirmed:
        now = step(found.index, held)
        steps.append(now if found.index in held else replace(
            now, state=WITHDRAWN, change=found.change, level=now.change,
            confirmed_at=measured[found.confirmed_at].session.label,
            withdrawn_at=measured[found.held_through + 1].session.label))
    return sorted(steps, key=lambda one: one.index)
