"""A baseline entry made from a case's row in results.json: the one function that both
`--perf-update-baselines` (each mode's `baseline_update`) and `tools.promote_baseline` (rows of
a finished session) make entries with, so an entry is the same whichever way it was written.
"""
from __future__ import annotations

from ..case_result import TIME_TO_TRAIN, row_kind
from ..footprint import entry_figures
from ..time_to_train_verdict import baseline_figures
from .checks import recordable_runs, recordable_speedup
from ..tolerance_band import stored_tolerance
from .file import measured_entry


def entry_from_row(case_id: str, row: dict, *, environment: dict, source: str,
                   tolerance: float | str | None = None) -> dict:
    """The entry for `case_id`'s `row`: the runs the host did not mark, their speedup over the
    same 1n1g reference, `tolerance` where it is a number and else `auto` (a band from the
    noise, perf_tests/tolerance_band.py), the figures beside the speed (peak memory, energy, bus
    bandwidth) and the operator profile, `environment` and `source` as its provenance. A
    time-to-train case keeps its time and top-1 figures instead, and no auto band: a band from
    its img/s would judge its time (its profile's band applies, or the number given)."""
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
