"""Where a run's wall time goes: its launch, from the suite starting the launcher to the launcher
being done, split into phases by the worker's marks (rn50_model/run_clock.py) and the suite's
own two (the launch's start and end).

The phases add up to the run's wall time: a run of another kind (the interconnect probe alone,
training to a target) has fewer marks, and a missing mark's phase falls into the next; a run
that failed leaves no marks, only its wall time. The marks are rank 0's: on several nodes the
launch's start and end are the suite's clock and the marks rank 0's host's, as close as their
clocks are.
"""
from __future__ import annotations

import statistics

# (phase, the mark that ends it, what it is), in the order a run goes through them: each phase
# begins where the one before ends, the first at the launch's start ("launched"), the last
# ending at the launcher's end ("done").
PHASES = (
    ("launch", "process",
     "the launcher and its agent until the worker starts"),
    ("imports", "imported", "the worker's interpreter and its imports (torch)"),
    ("start", "started", "the device, CPU threads and the process group"),
    ("build", "built", "the model, optimizer and data pipeline"),
    ("first step", "first_step", "the first warm-up iteration"),
    ("warm-up", "warmed", "the other warm-up iterations"),
    ("to window", "window_opened", "the GPU state reader and the barrier"),
    ("window", "window_closed", "the timed iterations"),
    ("probes", "recorded",
     "every rank's figures gathered, the interconnect probe, the environment"),
    ("teardown", "ended", "the process group destroyed"),
    ("exit", "done", "the record written, the workers and the agent gone, the launcher's end"),
)
NAMES = tuple(name for name, *_ in PHASES)
WALL = "wall"
MEASURED = ("warm-up", "first step", "window")   # what the protocol measures or runs on purpose


def run_phases(marks: dict | None, launched: float, done: float) -> dict[str, float]:
    """A run's phases in seconds, from the worker's `marks` and the launch's start and end
    (epoch seconds), with `wall` (the launch's own). Where a mark is missing, its phase's time
    falls into the next phase that has its end; a run that left no marks is its wall alone."""
    phases: dict[str, float] = {WALL: round(done - launched, 3)}
    if not marks:
        return phases
    at = {**marks, "done": done}
    since = launched
    for name, end, _ in PHASES:
        if end in at:
            phases[name] = round(max(at[end] - since, 0.0), 3)
            since = max(at[end], since)
    return phases


def median_phases(runs: list[dict]) -> dict[str, float]:
    """The median of each phase over the runs that have it (`runs`: each run's phases)."""
    named = [name for name in (WALL, *NAMES) if any(name in run for run in runs)]
    return {name: round(statistics.median(run[name] for run in runs if name in run), 3)
            for name in named}


def measured_share(phases: dict[str, float]) -> float | None:
    """The share of the wall time that warm-up and the timed window take: what the protocol
    asks for, against what the run costs."""
    wall = phases.get(WALL)
    if not wall or "window" not in phases:
        return None
    return sum(phases.get(name, 0.0) for name in MEASURED) / wall
