"""The wall-clock marks a worker leaves in its record (`marks`: epoch seconds, rank 0's), from
which the suite splits a run's wall time into phases (perf_tests/runs/phases.py): when the
process started, when its imports were done, its device and process group were up, its model
and data were built, its first step and its warm-up were done, its timed window opened and
closed, its record was ready and it ended.

No torch and no other module of the project: the worker imports this first.
"""
from __future__ import annotations

import os
import time

# In the order a throughput run reaches them; a run of another kind leaves those it reaches.
MARKS = ("process", "imported", "started", "built", "first_step", "warmed", "window_opened",
         "window_closed", "recorded", "ended")


def process_started() -> float | None:
    """When this process started, in epoch seconds (to the kernel's clock tick, 10 ms), from
    /proc: its start since boot against the time since boot now. None without /proc."""
    try:
        with open("/proc/self/stat") as handle:
            # Field 22, starttime; the name in parentheses (field 2) may hold spaces.
            ticks = int(handle.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as handle:
            uptime = float(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return time.time() - (uptime - ticks / os.sysconf("SC_CLK_TCK"))


class RunClock:
    """The marks of one worker process, in the order it reached them."""

    def __init__(self) -> None:
        started = process_started()
        self.marks: dict[str, float] = {} if started is None else {"process": round(started, 3)}

    def mark(self, name: str) -> None:
        self.marks[name] = round(time.time(), 4)
