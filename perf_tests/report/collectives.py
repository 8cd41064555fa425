"""The interconnect probe's report (--perf-collectives): bus bandwidth per case against its
entry, in the terminal and in report.md."""
from __future__ import annotations

from perf_tests.baselines.entries import BUSBW, GRADIENT_ALLREDUCE
from perf_tests.core.text import aligned, formatted, markdown_lines
from perf_tests.report.tables import ordered, skip_lines

TITLE = "Interconnect (all-reduce probe, no training)"


def table(rows: dict[str, dict]) -> list[tuple[str, ...]]:
    header = ("case", "ranks", "runs", "busbw GB/s", "gradient all-reduce s",
              "baseline busbw", "delta", "verdict")
    cells = [(case_id, str(row.get("ranks", "-")),
              str(len(row.get("runs_busbw_gbps") or [])) if row.get("runs_busbw_gbps")
              else "-",
              formatted(row.get(BUSBW), "{:.3g}"),
              formatted(row.get(GRADIENT_ALLREDUCE), "{:.3g}"),
              formatted(row.get("baseline_busbw_gbps"), "{:.3g}"),
              formatted(row.get("busbw_delta"), "{:+.1%}"),
              str(row.get("verdict", "-")))
             for case_id, row in ordered(rows)]
    return [header, *cells]


def terminal_table(rows: dict[str, dict]) -> list[str]:
    return aligned(table(rows), {0, 7}) + skip_lines(rows)


def markdown_section(rows: dict[str, dict]) -> list[str]:
    header, *cells = table(rows)
    lines = ["", f"## {TITLE}", "", *markdown_lines(header, cells, set(range(1, 7)))]
    messages = [f"- {row['message']}" for _, row in ordered(rows) if row.get("message")]
    return lines + ([""] + messages if messages else [])
