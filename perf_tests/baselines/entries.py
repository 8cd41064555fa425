"""A baseline entry made from a case's row in results.json: the one function that both
`--perf-update-baselines` (each mode's `baseline_update`) and `rn50-perf promote` (rows of
a finished session) make entries with, so an entry is the same whichever way it was written; and
what an entry keeps of a row beside its speed (memory, energy, bus bandwidth; a time to train).
"""
from __future__ import annotations

from statistics import median

from perf_tests.baselines.checks import recordable_runs, recordable_speedup
from perf_tests.baselines.file import AUTO, measured_entry
from perf_tests.core.cases import TIME_TO_TRAIN, row_kind

# The figures beside the speed an entry keeps (perf_tests/judging/footprint.py measures them):
# a results row's per-run lists, and the medians an entry stores.
MEMORY, ENERGY = "peak_memory_bytes", "joules_per_image"
BUSBW, GRADIENT_ALLREDUCE = "busbw_gbps", "gradient_allreduce_s"
RUN_LISTS = {MEMORY: "runs_peak_memory_bytes", ENERGY: "runs_joules_per_image",
             BUSBW: "runs_busbw_gbps", GRADIENT_ALLREDUCE: "runs_gradient_allreduce_s"}
COVERS = "peak_memory_covers"
# A time-to-train entry's figures (perf_tests/modes/time_to_train/verdict.py judges them).
TIME_TO_TRAIN_KEYS = ("time_to_train_s", "runs_time_to_train_s", "top1", "runs_top1",
                      "reached_target", "target_top1", "epochs")


def median_of(values: list) -> float | int | None:
    """The median of the runs that have a figure (an int stays an int: bytes); None if none."""
    present = [value for value in values if value is not None]
    if not present:
        return None
    middle = median(present)
    return int(middle) if all(isinstance(value, int) for value in present) else middle


def entry_figures(row: dict) -> dict:
    """The figures a baseline entry stores from a results row: the medians of its memory and
    energy over the runs its img/s is recorded from (the unmarked ones), and what the memory
    spans."""
    entry = {}
    for name, runs_key in RUN_LISTS.items():
        middle = median_of(recordable_runs(row.get(runs_key) or [], row.get("marked_runs")))
        if middle is not None:
            # Four significant digits: a fast fabric's all-reduce takes a fraction of a ms.
            entry[name] = float(f"{middle:.4g}") if isinstance(middle, float) else middle
    if row.get(COVERS):
        entry[COVERS] = row[COVERS]
    return entry


def baseline_figures(row: dict) -> dict:
    """The time-to-train figures of a case's results (or details) that its baseline keeps."""
    return {key: row[key] for key in TIME_TO_TRAIN_KEYS if key in row}


def baseline_times(entry: dict) -> list[float]:
    """The recorded runs' times to train of a baseline entry (the converged ones)."""
    return [value for value in entry.get("runs_time_to_train_s") or [] if value]


def stored_tolerance(given: float | str | None) -> float | str:
    """What a recorded entry stores as its tolerance: the number given, else `auto`."""
    return round(float(given), 4) if isinstance(given, (int, float)) else AUTO


def entry_from_row(case_id: str, row: dict, *, environment: dict, source: str,
                   tolerance: float | str | None = None) -> dict:
    """The entry for `case_id`'s `row`: the runs the host did not mark, their speedup over the same
    1n1g reference, `tolerance` where it is a number and else `auto` (a band from the noise,
    perf_tests/judging/tolerance_band.py), the figures beside the speed (peak memory, energy, bus
    bandwidth) and the operator profile, `environment` and `source` as its provenance. A
    time-to-train case keeps its time and top-1 figures instead, and no auto band: a band from its
    img/s would judge its time (its profile's band applies, or the number given)."""
    measured = [float(value) for value in row["runs_ips"]]
    runs = recordable_runs(measured, row.get("marked_runs"))
    ttt = row_kind(case_id, row) == TIME_TO_TRAIN
    if ttt:
        tolerance = tolerance if isinstance(tolerance, (int, float)) else None
    else:
        tolerance = stored_tolerance(tolerance)
    entry = measured_entry(runs, tolerance=tolerance,
                           speedup=recordable_speedup(
                               row.get("speedup"), measured, runs,
                               row.get("nodes", 1) * row.get("gpus_per_node", 1)),
                           environment=environment, settings=row.get("settings") or {},
                           source=source, op_profile=row.get("op_profile"),
                           figures=None if ttt else entry_figures(row))
    if ttt:
        entry.update(baseline_figures(row))
    return entry
