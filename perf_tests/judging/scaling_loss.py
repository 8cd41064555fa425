"""Where a multi-device case's loss went: the interconnect, or the devices' own compute.

When a 2n8g case gets slower or scales worse, the first question is "the network or the GPUs?".
Two figures of the same session answer it, each against its own baseline:

- the interconnect: the case's bus bandwidth (`busbw_gbps`, the all-reduce probe its workers
  make after the timed window, rn50_model/interconnect.py) against its entry's;
- the compute: the same session's 1n1g case of the same precision and batch, whose img/s is one
  device's, against the 1n1g entry.

`loss_causes` is the clause a regression line of a multi-device case ends with
('interconnect busbw 1.55 -> 0.11 GB/s (-93%); 1n1g compute unchanged (-1%)'); a change within
the case's tolerance reads as unchanged. `breakdown` is report.md's table: for each
multi-device case, the ideal img/s (devices x the 1n1g's), the measured, and an estimate of how
much of the gap communication explains (one step's gradient all-reduced alone on the fabric,
against the step's lost time: DDP overlaps its buckets with the backward pass, which hides some
of that time, while its several buckets and the backward's kernels beside them add some), with
the operator profile's communication share where explain ran.
"""
from __future__ import annotations

from perf_tests.baselines.entries import BUSBW, entry_figures
from perf_tests.baselines.file import BaselineEntry
from perf_tests.core.text import is_number


def change_text(name: str, before: float | None, after: float | None, tolerance: float,
                unit: str, figure: str = "{:.3g}") -> str:
    """'interconnect busbw 1.55 -> 0.11 GB/s (-93%)', or 'interconnect busbw unchanged (-1%)'
    within the tolerance."""
    delta = after / before - 1
    if abs(delta) <= tolerance:
        return f"{name} unchanged ({delta:+.0%})"
    return (f"{name} {figure.format(before)} -> {figure.format(after)} {unit} "
            f"({delta:+.0%})")


def interconnect_clause(row: dict, entry: BaselineEntry, tolerance: float) -> str:
    """The case's bus bandwidth (its unmarked runs' median, as an entry is made of) against the
    entry's."""
    now = entry_figures(row).get(BUSBW)
    if not is_number(now):
        probe = row.get("interconnect_skipped")
        return f"interconnect not probed ({probe})" if probe else "interconnect not probed"
    if not is_number(entry.busbw_gbps):
        return (f"interconnect busbw {now:.3g} GB/s, the baseline has none (recorded before "
                "the probe: refresh it with --perf-update-baselines)")
    return change_text("interconnect busbw", entry.busbw_gbps, now, tolerance, "GB/s")


def compute_clause(single_id: str, single_ips: float | None, single_entry: BaselineEntry | None,
                   tolerance: float) -> str:
    """One device's img/s in this session (its 1n1g case) against the 1n1g entry."""
    if single_ips is None:
        return f"1n1g compute not measured in this session (add -k {single_id})"
    if single_entry is None:
        return f"1n1g compute {single_ips:.3g} img/s, {single_id} has no baseline entry"
    return change_text("1n1g compute", single_entry.median_ips, single_ips, tolerance, "img/s")


def loss_causes(row: dict, entry: BaselineEntry, single_id: str, single_ips: float | None,
                single_entry: BaselineEntry | None, tolerance: float) -> str:
    """The clause a multi-device case's regression line ends with: its interconnect, then one
    device's compute, each against its baseline."""
    return "; ".join((interconnect_clause(row, entry, tolerance),
                      compute_clause(single_id, single_ips, single_entry, tolerance)))


def probe_skipped(records: list[dict]) -> dict:
    """`interconnect_skipped`: why a multi-device case's runs made no probe, where they made
    none."""
    reasons = {(record.get("interconnect") or {}).get("skipped") for record in records} - {None}
    return {"interconnect_skipped": sorted(reasons)[0]} if reasons else {}
