"""The interconnect probe's report (--perf-collectives): bus bandwidth per case against its
entry, in the terminal and in report.md."""
from __future__ import annotations

from collections.abc import Mapping

from perf_tests.core.rows import CollectivesRow
from perf_tests.core.row_values import rows_of
from perf_tests.core.text import aligned, formatted, markdown_lines
from perf_tests.report.tables import ordered, skip_lines

TITLE = "Interconnect (all-reduce probe, no training)"

Rows = Mapping[str, CollectivesRow | dict]   # the collectives mode's rows


def table(rows: Rows) -> list[tuple[str, ...]]:
    header = ("case", "ranks", "runs", "busbw GB/s", "gradient all-reduce s",
              "baseline busbw", "delta", "verdict")
    cells = [(case_id, "-" if row.ranks is None else str(row.ranks),
              str(len(row.runs_busbw_gbps)) if row.runs_busbw_gbps else "-",
              formatted(row.busbw_gbps, "{:.3g}"),
              formatted(row.gradient_allreduce_s, "{:.3g}"),
              formatted(row.baseline_busbw_gbps, "{:.3g}"),
              formatted(row.busbw_delta, "{:+.1%}"),
              row.verdict or "-")
             for case_id, row in ordered(rows_of(rows))]
    return [header, *cells]


def terminal_table(rows: Rows) -> list[str]:
    return aligned(table(rows), {0, 7}) + skip_lines(rows)


def markdown_section(rows: Rows) -> list[str]:
    header, *cells = table(rows)
    lines = ["", f"## {TITLE}", "", *markdown_lines(header, cells, set(range(1, 7)))]
    messages = [f"- {row.message}" for _, row in ordered(rows_of(rows)) if row.message]
    return lines + ([""] + messages if messages else [])
