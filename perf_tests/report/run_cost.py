"""report.md's run-cost section, after every mode's: where each case's runs spent their wall
time, phase by phase (the median over its runs that ended well, perf_tests/runs/phases.py), and
the share of it that the protocol measures (warm-up and the timed window)."""
from __future__ import annotations

from collections.abc import Mapping

from perf_tests.core.rows import Row, ThroughputRow
from perf_tests.core.row_values import rows_of
from perf_tests.core.text import markdown_lines
from perf_tests.report.tables import ordered
from perf_tests.runs.phases import NAMES, PHASES, WALL, measured_share

HEADER = ("case", WALL, *NAMES, "measured")


def run_cost_table(rows: Mapping[str, Row | dict]) -> list[str]:
    """The section: one line per case whose runs have phases (the throughput gate's); empty
    where none has."""
    cells = []
    for case_id, row in ordered(rows_of(rows)):
        phases = row.run_phases if isinstance(row, ThroughputRow) else {}
        if WALL not in phases:
            continue
        share = measured_share(phases)
        cells.append((case_id, *(seconds(phases.get(name)) for name in (WALL, *NAMES)),
                      "-" if share is None else f"{share:.0%}"))
    if not cells:
        return []
    legend = "; ".join(f"{name}: {what}" for name, _, what in PHASES)
    return ["", "### Where a run's time went", "",
            "Seconds of a run's wall time (from the suite starting its launcher to the launcher's "
            "end), the median over the case's runs that ended well; measured is the share of "
            f"warm-up and the timed window. {legend}.", "",
            *markdown_lines(HEADER, cells, set(range(1, len(HEADER)))), ""]


def seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"
