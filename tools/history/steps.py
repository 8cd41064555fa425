"""The step changes of a case's series: where its sessions' medians change level (ruptures' PELT on
the l2 cost, penalised by the noise the runs show) and what changed in the environment or the
settings there."""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from perf_tests.core.stats import MAD_TO_STDEV, summarize
from perf_tests.environment.differences import environment_changes, settings_diff
from perf_tests.judging.tolerance_band import MEDIAN_EFFICIENCY
from tools.history.series import SETTING_KEYS, Point


@dataclass
class Step:
    case_id: str
    index: int          # the first session after the change
    change: float       # median of the sessions from `index` (to the next step) / before - 1
    label: str
    what_changed: str

    @property
    def line(self) -> str:
        direction = "up" if self.change > 0 else "down"
        because = f" ({self.what_changed})" if self.what_changed else ""
        return (f"{self.case_id}: step {direction} of {abs(self.change):.1%} at session "
                f"{self.label}{because}")


def searched(points: list[Point]) -> list[Point]:
    """The points the step search takes: a point the host marked in every run is left out (it
    measured the host, not the stack)."""
    return [point for point in points if point.stack_median]


def median_noise(points: list[Point]) -> float:
    """The relative standard error of one session's median, pooled over the sessions (of the
    runs the host did not mark)."""
    spreads = []
    for point in points:
        if len(point.unmarked) > 1:
            summary = summarize(point.unmarked)
            spreads.append((MEDIAN_EFFICIENCY * MAD_TO_STDEV * summary.mad / summary.median)
                           / math.sqrt(len(point.unmarked)))
    return math.sqrt(statistics.fmean(value ** 2 for value in spreads)) if spreads else 0.0


def step_indices(medians: list[float], noise: float) -> list[int]:
    """Where the series of medians changes level (indices of the first point after each)."""
    import numpy as np
    import ruptures

    if len(medians) < 2:
        return []
    signal = np.array(medians) / statistics.median(medians)
    # A floor under the noise: runs that happen to agree exactly must not make every wobble
    # of the medians a change.
    sigma = max(noise, 0.005)
    penalty = 2 * sigma ** 2 * math.log(len(medians))
    # PELT on the l2 cost: the kernel search with a linear kernel is that cost, searched by
    # ruptures' compiled PELT; its Python `Pelt(model="l2")` finds the same breaks 100 to 500
    # times slower (2.6 s for 1,000 sessions, which a site of 12 cases cannot wait for).
    breaks = ruptures.KernelCPD(kernel="linear", min_size=1).fit(signal).predict(pen=penalty)
    return breaks[:-1]  # ruptures ends the list with the series' length


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
    """The step changes of a case's points, on the medians of their unmarked runs."""
    measured = searched(points)
    medians = [point.stack_median for point in measured]
    indices = step_indices(medians, median_noise(measured))
    edges = [0] + indices + [len(measured)]
    steps = []
    for number, index in enumerate(indices):
        before = statistics.median(medians[edges[number]:index])
        after = statistics.median(medians[index:edges[number + 2]])
        steps.append(Step(case_id, index, after / before - 1, measured[index].session.label,
                          what_changed(measured[index - 1], measured[index])))
    return steps
