"""report.md's scaling-loss section: for each measured multi-device case with a 1n1g case of its
precision and batch in the session, the ideal and measured img/s, the time a step lost per device,
and how much of it one step's gradient all-reduce (the interconnect probe's) could explain."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from perf_tests.core.rows import ThroughputRow
from perf_tests.core.row_values import rows_of
from perf_tests.core.text import formatted, is_number, markdown_lines
from perf_tests.report.tables import ordered


def single_device_row(rows: Mapping[str, ThroughputRow],
                      row: ThroughputRow) -> ThroughputRow | None:
    """The 1n1g row of `row`'s precision and batch in the same session, where it measured one."""
    for other in rows.values():
        if (other.devices == 1 and other.precision == row.precision
                and other.batch_per_device == row.batch_per_device
                and is_number(other.median_ips)):
            return other
    return None


@dataclass(frozen=True)
class ScalingLoss:
    """One multi-device case's scaling loss against its 1n1g case."""
    ideal_ips: float
    measured_ips: float
    step_s: float
    single_step_s: float
    lost_s: float                       # the time each step lost per device
    allreduce_s: float | None           # one step's gradient all-reduced alone (the probe's)
    explained: float | None             # the share of the lost time that all-reduce explains
    communication_share: float | None   # the operator profile's, where explain ran

    @property
    def efficiency(self) -> float:
        return self.measured_ips / self.ideal_ips


def gap_explained(row: ThroughputRow, single: ThroughputRow) -> ScalingLoss:
    """One multi-device row's scaling loss against its 1n1g row: ideal and measured img/s, the
    time each step lost per device, and the share of it one step's gradient all-reduce could
    explain."""
    count, batch = row.devices, row.batch_per_device
    measured = row.median_ips
    step, single_step = batch * count / measured, batch / single.median_ips
    lost = step - single_step
    allreduce = row.gradient_allreduce_s
    explained = (min(allreduce, lost) / lost if is_number(allreduce) and lost > 0 else None)
    return ScalingLoss(count * single.median_ips, measured, step, single_step, lost, allreduce,
                       explained, row.op_profile.get("communication_share"))


BREAKDOWN_HEADER = ("case", "devices", "ideal img/s", "measured img/s", "efficiency",
                    "step s", "1n1g step s", "lost s/step", "gradient all-reduce s",
                    "comm. explains", "profile comm. share")


def breakdown(rows: Mapping[str, ThroughputRow | dict]) -> list[str]:
    """report.md's scaling-loss section: one line per measured multi-device case with a 1n1g
    case of its precision and batch in the session; empty where there is none (the throughput
    mode's rows)."""
    rows = rows_of(rows)
    cells = []
    for case_id, row in ordered(rows):
        if row.devices < 2 or not is_number(row.median_ips):
            continue
        single = single_device_row(rows, row)
        if single is None:
            continue
        loss = gap_explained(row, single)
        explained = loss.explained
        cells.append((case_id, str(row.devices), f"{loss.ideal_ips:.1f}",
                      f"{loss.measured_ips:.1f}", f"{loss.efficiency:.0%}",
                      f"{loss.step_s:.3g}", f"{loss.single_step_s:.3g}",
                      f"{loss.lost_s:.3g}", formatted(loss.allreduce_s, "{:.3g}"),
                      f"~{explained:.0%}" if explained is not None else "-",
                      formatted(loss.communication_share, "{:.0%}")))
    if not cells:
        return []
    return ["", "### Scaling loss", "",
            "Ideal is the devices times this session's 1n1g img/s; a step's lost time is its "
            "time per device beyond the 1n1g step's. What communication explains of it is an "
            "estimate: one step's gradient all-reduced alone on the fabric (the interconnect "
            "probe's), against the lost time, at most all of it. DDP overlaps its buckets with "
            "the backward pass, which hides some of that time; its several buckets, each paying "
            "the link's latency beside the backward's kernels, add some. The profile's "
            "communication share is from explain (--perf-explain) where it ran.", "",
            *markdown_lines(BREAKDOWN_HEADER, cells, set(range(1, len(BREAKDOWN_HEADER)))), ""]
