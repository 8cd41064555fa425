"""The max batch section of the reports: the terminal table and report.md's table of the
largest batch per device, with each search's probes (rows of kind `max_batch` from results.json).
"""
from __future__ import annotations

from perf_tests.core.rows import MaxBatchRow, Row
from perf_tests.core.row_values import row_of, rows_of
from perf_tests.core.text import aligned, formatted, markdown_lines, memory_text
from perf_tests.report.tables import ordered, verdict_cell

TABLE_COLUMNS = ("case", "max batch", "oom batch", "probes", "img/s at max", "peak memory",
                 "baseline", "search", "verdict")


def probes_text(row: MaxBatchRow) -> str:
    """'16 32 64 128:OOM 96 112:OOM': the batches in the order they ran, failures marked."""
    marks = {"ok": "", "oom": ":OOM"}
    return " ".join(f"{probe.get('batch')}{marks.get(probe.get('outcome'), ':error')}"
                    for probe in row.probes)


def table_rows(cases: dict[str, dict] | dict[str, Row]) -> list[tuple[str, ...]]:
    rows = []
    for case_id, given in ordered(cases):
        row = row_of(case_id, given)
        limit = " (limit)" if row.limit_reached else ""
        rows.append((
            case_id,
            f"{row.max_batch}{limit}" if row.max_batch else "-",
            str(row.oom_batch or "-"),
            str(len(row.probes)) if row.probes else "-",
            formatted(row.max_batch_ips, "{:.1f}"),
            memory_text(row.peak_memory_bytes),
            str(row.baseline_max_batch or "-"),
            formatted(row.search_seconds, "{:.0f} s"),
            verdict_cell(given),
        ))
    return rows


def markdown_table(cases: dict[str, dict] | dict[str, Row]) -> str:
    """The largest batch per device that trained, per topology and precision, with its probes."""
    header = ("node_num", "gpu_num_per_node", "precision", "max batch_size_per_device",
              "OOM at", "samples/s at max", "peak memory at max", "baseline max", "probes",
              "verdict")
    rows = rows_of(cases)
    in_order = [rows[case_id] for case_id, _ in ordered(cases)]
    cells = [(str(row.nodes), str(row.gpus_per_node), row.precision or "-", cell[1], cell[2],
              cell[4], cell[5], cell[6], probes_text(row) or "-", cell[8])
             for row, cell in zip(in_order, table_rows(cases))]
    steps = sorted({row.batch_step for row in rows.values() if row.batch_step})
    unit = f" in units of {', '.join(map(str, steps))}" if steps else ""
    lines = ["## Largest batch per device", "",
             f"Found by short real runs{unit}: doubling from the case's batch until one ran "
             "out of memory, then bisecting; `probes` lists the batches in the order they "
             "ran.", ""]
    lines += markdown_lines(header, cells, {0, 1, 3, 4, 5, 7})
    return "\n".join(lines) + "\n"


def terminal_table(cases: dict[str, dict] | dict[str, Row]) -> list[str]:
    """The terminal's table: a row per search."""
    return aligned([TABLE_COLUMNS] + table_rows(cases), {0, len(TABLE_COLUMNS) - 1})
