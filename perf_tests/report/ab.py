"""An A/B session's report: both sides per case in the terminal and in report.md, the two
sides as two series of the scaling plot (each named by its stack), and before them the panel of
what the verdict judges: each pair's ratio, their median and its interval."""
from __future__ import annotations

import re
from functools import partial
from pathlib import Path

from perf_tests.core.cases import AB, CANDIDATE, REFERENCE
from perf_tests.core.rows import ABRow, Row, Side
from perf_tests.core.row_values import row_of
from perf_tests.core.stats import summarize
from perf_tests.core.text import aligned, formatted, markdown_lines
from perf_tests.environment.differences import NO_CHANGE, environment_changes
from perf_tests.judging.detectable import detects_text
from perf_tests.report.plot_style import MARKED_STYLE, verdict_colour
from perf_tests.report.plots import throughput_figures
from perf_tests.report.tables import ordered, skip_lines, verdict_text

# The A/B table's columns, the terminal's and report.md's alike; the speedups only where a case
# has them (several devices, its 1n1g case in the session).
AB_COLUMNS = (
    ("case", None),
    ("pairs", lambda row: "-" if row.pairs is None else str(row.pairs)),
    ("reference img/s", lambda row: formatted(row.reference.median_ips, "{:.2f}")),
    ("candidate img/s", lambda row: formatted(row.candidate.median_ips, "{:.2f}")),
    ("median pair ratio", lambda row: formatted(row.ratio, "{:.3f}")),
    ("95% CI", lambda row: "-" if not row.ratio_ci else "{:.3f}-{:.3f}".format(*row.ratio_ci)),
    ("detects", detects_text),
    ("reference speedup", lambda row: formatted(row.reference.speedup, "{:.2f}")),
    ("candidate speedup", lambda row: formatted(row.candidate.speedup, "{:.2f}")),
    ("what differs", lambda row: differs_cell(row)),
    # 'regression (memory +41%)', as the gate's table says it
    ("verdict", verdict_text),
)
# Columns left out where no case has a figure in them; columns of words, flush left.
OPTIONAL_COLUMNS = {"reference speedup", "candidate speedup", "what differs"}
TEXT_COLUMNS = {"case", "what differs", "verdict"}
# A diff up to this long shows in full in the "what differs" column; a longer one (two image
# paths with their digests run past 200 characters) by the names of what differs, in full on a
# line under the table.
DIFFERS_WIDTH = 48
PAIR_STYLE = dict(color="black", marker=".", markersize=7, alpha=0.5, linestyle="none")


def sides_of(case_id: str, row: dict | Row) -> ABRow:
    """`row` as an A/B row: a case that ran neither side (skipped before the kind was recorded)
    has two empty sides."""
    row = row_of(case_id, row)
    return row if isinstance(row, ABRow) else row_of(case_id, {**row.to_dict(), "kind": AB})


def side_of(row: ABRow, side: str) -> Side:
    return row.reference if side == REFERENCE else row.candidate


def in_order(cases: dict[str, dict] | dict[str, Row]) -> dict[str, ABRow]:
    """The cases as A/B rows, in the tables' order."""
    return {case_id: sides_of(case_id, row) for case_id, row in ordered(cases)}


def what_differs(row: ABRow) -> str:
    """The candidate's environment against the reference's, as their workers recorded it
    (`DNNL_MAX_CPU_ISA unset -> SSE41`, `torch 2.11.0 -> 2.12.0`); '-' where nothing does."""
    change = row.environment_diff
    return "-" if not change or change.startswith(NO_CHANGE) else str(change)


def differs_cell(row: ABRow) -> str:
    """The "what differs" cell: the diff where it is short, else the names of what differs
    (`image, ATEN_CPU_CAPABILITY, +1`), as many as fit in DIFFERS_WIDTH."""
    full = what_differs(row)
    if len(full) <= DIFFERS_WIDTH:
        return full
    before, after = dict(row.reference.environment), dict(row.candidate.environment)
    changes = environment_changes(before, after) if before and after else full.split(", ")
    names = [change.split(" ", 1)[0] for change in changes]
    for shown in range(len(names), 0, -1):
        cell = ", ".join(names[:shown]) + (f", +{len(names) - shown}" if shown < len(names)
                                           else "")
        if len(cell) <= DIFFERS_WIDTH or shown == 1:
            return cell
    return full


def differs_lines(cases: dict[str, dict] | dict[str, Row]) -> list[str]:
    """For under the A/B table: each diff its column shortened, in full, with its cases."""
    shortened: dict[str, list[str]] = {}
    for case_id, row in in_order(cases).items():
        if differs_cell(row) != what_differs(row):
            shortened.setdefault(what_differs(row), []).append(case_id)
    return [f"what differs in {', '.join(ids)}: {change}" for change, ids in shortened.items()]


def ab_cells(cases: dict[str, dict] | dict[str, Row]) -> list[tuple[str, ...]]:
    """The header and a row per case of the A/B table; the optional columns left out where no
    case has a figure in them."""
    rows = [(case_id,) + tuple(render(row) for _, render in AB_COLUMNS[1:])
            for case_id, row in in_order(cases).items()]
    shown = [i for i, (name, _) in enumerate(AB_COLUMNS)
             if name not in OPTIONAL_COLUMNS or any(row[i] != "-" for row in rows)]
    return [tuple(AB_COLUMNS[i][0] for i in shown)] + [tuple(row[i] for i in shown)
                                                       for row in rows]


def terminal_table(cases: dict[str, dict] | dict[str, Row]) -> list[str]:
    """Both sides per case, the median pair ratio and its interval: the answer, pass or not."""
    header, *rows = ab_cells(cases)
    return aligned([header] + rows, text_columns(header)) + differs_lines(cases) + \
        skip_lines(cases)


def text_columns(header: tuple[str, ...]) -> set[int]:
    return {i for i, name in enumerate(header) if name in TEXT_COLUMNS}


def ab_table(cases: dict[str, dict] | dict[str, Row]) -> list[str]:
    """An A/B session's both sides per case, in report.md (the cases measured on both)."""
    measured = {case_id: row for case_id, row in cases.items()
                if sides_of(case_id, row).candidate != Side()}
    header, *rows = ab_cells(measured)
    if not rows:
        return []
    notes = [f"- {line}" for line in differs_lines(measured)]
    return ["", "## A/B: candidate against reference", ""] + markdown_lines(
        header, rows, set(range(len(header))) - text_columns(header)) + \
        ([""] + notes if notes else []) + [""]


def side_name(rows: dict[str, ABRow], side: str) -> str:
    """'candidate: image .../502d38ed34cc/b (bwrap)': a side of the plot named by its stack, as
    the rows record it, a long path by its last two parts (older rows name none: the side
    alone)."""
    stacks = (row.reference_stack if side == REFERENCE else row.candidate_stack
              for row in rows.values())
    stack = next((stack for stack in stacks if stack), None)
    if not stack:
        return side
    return f"{side}: " + re.sub(r"/(?:[^/\s]+/){2,}([^/\s]+/[^/\s]+)", r".../\1", stack)


def plot_sources(cases: dict[str, dict] | dict[str, Row]
                 ) -> dict[str, dict[str, dict]] | None:
    """The two sides of an A/B session as two series of the scaling plot, each named by its
    stack, with its own runs (the runs the host marked out of the whisker), their summary and
    its speedup (the plot takes a one-device case's as 1), no baseline: the case's top-level
    figures are the candidate's. Each series' rows are as results.json holds them."""
    rows = {case_id: sides_of(case_id, row) for case_id, row in cases.items()}
    if not any(row.candidate != Side() for row in rows.values()):
        return None

    def side_row(row: ABRow, side: str) -> dict:
        runs = list(side_of(row, side).runs_ips)
        return {**row.to_dict(), **(summarize(runs).to_dict() if runs else {"median_ips": None}),
                "runs_ips": runs, "marked_runs": dict(side_of(row, side).marked_runs),
                "speedup": side_of(row, side).speedup, "baseline_ips": None,
                "baseline_speedup": None}

    return {side_name(rows, side): {case_id: side_row(row, side) for case_id, row in rows.items()
                                    if side_of(row, side) != Side()}
            for side in (REFERENCE, CANDIDATE)}


def pair_ratio_panel(cases: dict[str, dict] | dict[str, Row]):
    """The panel that draws each case's pair ratios (`draw_pair_ratios`), or None where no
    case has pairs."""
    paired = {case_id: row for case_id, row in in_order(cases).items()
              if row.reference.runs_ips and row.candidate.runs_ips}
    return partial(draw_pair_ratios, paired) if paired else None


def ab_figures(cases: dict[str, dict] | dict[str, Row], folder: Path, hardware: str
               ) -> tuple[list[Path], list[str]]:
    """The throughput section's figures of an A/B session: both sides as series, the pair
    ratios as the first panel."""
    return throughput_figures(cases, folder, hardware, sources=plot_sources(cases),
                              first_panel=pair_ratio_panel(cases))


def draw_pair_ratios(cases: dict[str, ABRow], axis) -> list:
    """What an A/B verdict judges, a case a column: each pair's ratio (candidate / reference;
    a cross where the host marked either run), the median pair ratio with its 95% interval in
    the verdict's colour, and the tolerance band around 1. Returns the legend's handles."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    every_ratio, marked_drawn = [], False
    for x, row in enumerate(cases.values()):
        marked = {int(number) for side in (row.reference, row.candidate)
                  for number in side.marked_runs}
        ratios = [candidate / reference for reference, candidate
                  in zip(row.reference.runs_ips, row.candidate.runs_ips) if reference]
        for number, ratio in enumerate(ratios, 1):
            style = MARKED_STYLE if number in marked else PAIR_STYLE
            axis.plot([x - 0.12], [ratio], **style)
            marked_drawn |= number in marked
        every_ratio += ratios
        tolerance = row.tolerance
        if tolerance:
            axis.fill_between([x - 0.4, x + 0.4], 1 - tolerance, 1 + tolerance,
                              color="tab:green", alpha=0.12, linewidth=0)
        if row.ratio:
            low, high = row.ratio_ci or (row.ratio, row.ratio)
            axis.errorbar([x + 0.12], [row.ratio], yerr=[[row.ratio - low], [high - row.ratio]],
                          fmt="D", markersize=8, capsize=4, elinewidth=1.5,
                          color=verdict_colour(row.verdict))
    axis.axhline(1.0, color="0.3", linestyle=":", linewidth=1)
    if every_ratio and max(every_ratio) / min(every_ratio) > 3:
        axis.set_yscale("log")
    axis.set_xticks(range(len(cases)))
    axis.set_xticklabels(list(cases), fontsize=8)
    axis.set_xlim(-0.6, len(cases) - 0.4)
    axis.set_ylabel("candidate / reference img/s, each pair" + (
        ", log scale" if axis.get_yscale() == "log" else ""))
    axis.set_title("Pair ratios: what the verdict judges")
    axis.grid(True, axis="y", alpha=0.3)
    verdicts = dict.fromkeys(row.verdict for row in cases.values() if row.ratio)
    handles = [Line2D([], [], label="one pair's ratio", **PAIR_STYLE)]
    handles += [Line2D([], [], label="a pair the host marked", **MARKED_STYLE)] \
        if marked_drawn else []
    handles += [Line2D([], [], marker="D", linestyle="none", color=verdict_colour(verdict),
                       markersize=8, label=f"median pair ratio, 95% CI: {verdict}")
                for verdict in verdicts]
    return handles + [Patch(facecolor="tab:green", alpha=0.12, label="1 +- tolerance")]
