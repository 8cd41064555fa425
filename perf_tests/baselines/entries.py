"""A baseline entry made from a case's row in results.json: the one function that both
`--perf-update-baselines` (each mode's `baseline_update`) and `rn50-perf promote` (rows of
a finished session) make entries with, so an entry is the same whichever way it was written; and
what an entry keeps of a row beside its speed (memory, energy, bus bandwidth; a time to train).
"""
from __future__ import annotations

from collections.abc import Mapping
from statistics import median
from typing import Any

from perf_tests.baselines.checks import recordable_runs, recordable_speedup
from perf_tests.baselines.file import AUTO, measured_entry
from perf_tests.core.cases import TIME_TO_TRAIN
from perf_tests.core.rows import Row, Speed, ThroughputRow, TimeToTrainRow
from perf_tests.core.row_values import row_of

# The figures beside the speed an entry keeps (perf_tests/judging/footprint.py measures them):
# a results row's per-run lists, and the medians an entry stores.
MEMORY, ENERGY = "peak_memory_bytes", "joules_per_image"
BUSBW, GRADIENT_ALLREDUCE = "busbw_gbps", "gradient_allreduce_s"
RUN_LISTS = {MEMORY: "runs_peak_memory_bytes", ENERGY: "runs_joules_per_image",
             BUSBW: "runs_busbw_gbps", GRADIENT_ALLREDUCE: "runs_gradient_allreduce_s"}
COVERS = "peak_memory_covers"


def median_of(values: list) -> float | int | None:
    """The median of the runs that have a figure (an int stays an int: bytes); None if none."""
    present = [value for value in values if value is not None]
    if not present:
        return None
    middle = median(present)
    return int(middle) if all(isinstance(value, int) for value in present) else middle


def entry_figures(row: ThroughputRow | Mapping[str, Any]) -> dict:
    """The figures a baseline entry stores from a throughput case's row (or its mode's details,
    as they become one): the medians of its memory and energy over the runs its img/s is
    recorded from (the unmarked ones), and what the memory spans."""
    row = row_of("", row)
    run_lists = {MEMORY: row.runs_peak_memory_bytes, ENERGY: row.runs_joules_per_image,
                 BUSBW: row.runs_busbw_gbps, GRADIENT_ALLREDUCE: row.runs_gradient_allreduce_s}
    entry = {}
    for name, runs in run_lists.items():
        middle = median_of(recordable_runs(list(runs), row.marked_runs))
        if middle is not None:
            # Four significant digits: a fast fabric's all-reduce takes a fraction of a ms.
            entry[name] = float(f"{middle:.4g}") if isinstance(middle, float) else middle
    if row.peak_memory_covers:
        entry[COVERS] = row.peak_memory_covers
    return entry


def baseline_figures(row: TimeToTrainRow) -> dict:
    """The time-to-train figures of a case's row that its baseline keeps, a null one too
    (perf_tests/modes/time_to_train/verdict.py judges them)."""
    figures = {"time_to_train_s": row.time_to_train_s,
               "runs_time_to_train_s": list(row.runs_time_to_train_s) or None,
               "top1": row.top1, "runs_top1": list(row.runs_top1) or None,
               "reached_target": row.reached_target, "target_top1": row.target_top1,
               "epochs": row.epochs}
    return {key: value for key, value in figures.items()
            if value is not None or key in row.nulls}


def baseline_times(entry: dict) -> list[float]:
    """The recorded runs' times to train of a baseline entry (the converged ones)."""
    return [value for value in entry.get("runs_time_to_train_s") or [] if value]


def stored_tolerance(given: float | str | None) -> float | str:
    """What a recorded entry stores as its tolerance: the number given, else `auto`."""
    return round(float(given), 4) if isinstance(given, (int, float)) else AUTO


def entry_from_row(case_id: str, row: Row | Mapping[str, Any], *, environment: dict, source: str,
                   tolerance: float | str | None = None) -> dict:
    """The entry for `case_id`'s `row`: the runs the host did not mark, their speedup over the same
    1n1g reference, `tolerance` where it is a number and else `auto` (a band from the noise,
    perf_tests/judging/tolerance_band.py), the figures beside the speed (peak memory, energy, bus
    bandwidth) and the operator profile, `environment` and `source` as its provenance. A
    time-to-train case keeps its time and top-1 figures instead, and no auto band: a band from its
    img/s would judge its time (its profile's band applies, or the number given)."""
    row = row_of(case_id, row)
    measured = [float(value) for value in row.runs_ips]
    judged = row if isinstance(row, ThroughputRow) else None
    runs = recordable_runs(measured, judged.marked_runs if judged else None)
    ttt = row.kind == TIME_TO_TRAIN
    if ttt:
        tolerance = tolerance if isinstance(tolerance, (int, float)) else None
    else:
        tolerance = stored_tolerance(tolerance)
    speedup = row.speedup if isinstance(row, Speed) else None
    op_profile = dict(judged.op_profile) if judged and judged.op_profile else None
    entry = measured_entry(runs, tolerance=tolerance,
                           speedup=recordable_speedup(speedup, measured, runs, row.devices),
                           environment=environment, settings=dict(row.settings),
                           source=source, op_profile=op_profile,
                           figures=entry_figures(row) if judged else None)
    if isinstance(row, TimeToTrainRow):
        entry.update(baseline_figures(row))
    return entry
