"""An A/B session's report: both sides per case in the terminal and in report.md, and the two
sides as two series of the scaling plot."""
from __future__ import annotations

from ..detectable import detects_text
from ..differences import NO_CHANGE, environment_changes
from ..mode_constants import CANDIDATE, REFERENCE
from ..stats import summarize
from ..text import aligned, formatted, markdown_lines
from .tables import ordered, skip_lines

# The A/B table's columns, the terminal's and report.md's alike; the speedups only where a case
# has them (several devices, its 1n1g case in the session).
AB_COLUMNS = (
    ("case", None),
    ("pairs", lambda row: str(row.get("pairs", "-"))),
    ("reference img/s", lambda row: formatted(row.get(REFERENCE, {}).get("median_ips"),
                                              "{:.2f}")),
    ("candidate img/s", lambda row: formatted(row.get(CANDIDATE, {}).get("median_ips"),
                                              "{:.2f}")),
    ("median pair ratio", lambda row: formatted(row.get("ratio"), "{:.3f}")),
    ("95% CI", lambda row: "-" if not row.get("ratio_ci")
     else "{:.3f}-{:.3f}".format(*row["ratio_ci"])),
    ("detects", detects_text),
    ("reference speedup", lambda row: formatted(row.get(REFERENCE, {}).get("speedup"), "{:.2f}")),
    ("candidate speedup", lambda row: formatted(row.get(CANDIDATE, {}).get("speedup"), "{:.2f}")),
    ("what differs", lambda row: differs_cell(row)),
    ("verdict", lambda row: str(row.get("verdict") or "-")),
)
# Columns left out where no case has a figure in them; columns of words, flush left.
OPTIONAL_COLUMNS = {"reference speedup", "candidate speedup", "what differs"}
TEXT_COLUMNS = {"case", "what differs", "verdict"}
# A diff up to this long shows in full in the "what differs" column; a longer one (two image
# paths with their digests run past 200 characters) by the names of what differs, in full on a
# line under the table.
DIFFERS_WIDTH = 48


def what_differs(row: dict) -> str:
    """The candidate's environment against the reference's, as their workers recorded it
    (`DNNL_MAX_CPU_ISA unset -> SSE41`, `torch 2.11.0 -> 2.12.0`); '-' where nothing does."""
    change = row.get("environment_diff")
    return "-" if not change or change.startswith(NO_CHANGE) else str(change)


def differs_cell(row: dict) -> str:
    """The "what differs" cell: the diff where it is short, else the names of what differs
    (`image, ATEN_CPU_CAPABILITY, +1`), as many as fit in DIFFERS_WIDTH."""
    full = what_differs(row)
    if len(full) <= DIFFERS_WIDTH:
        return full
    before, after = (row.get(side, {}).get("environment") or {} for side in (REFERENCE,
                                                                             CANDIDATE))
    changes = environment_changes(before, after) if before and after else full.split(", ")
    names = [change.split(" ", 1)[0] for change in changes]
    for shown in range(len(names), 0, -1):
        cell = ", ".join(names[:shown]) + (f", +{len(names) - shown}" if shown < len(names)
                                           else "")
        if len(cell) <= DIFFERS_WIDTH or shown == 1:
            return cell
    return full


def differs_lines(cases: dict[str, dict]) -> list[str]:
    """For under the A/B table: each diff its column shortened, in full, with its cases."""
    shortened: dict[str, list[str]] = {}
    for case_id, row in ordered(cases):
        if differs_cell(row) != what_differs(row):
            shortened.setdefault(what_differs(row), []).append(case_id)
    return [f"what differs in {', '.join(ids)}: {change}" for change, ids in shortened.items()]


def ab_cells(cases: dict[str, dict]) -> list[tuple[str, ...]]:
    """The header and a row per case of the A/B table; the optional columns left out where no
    case has a figure in them."""
    rows = [(case_id,) + tuple(render(row) for _, render in AB_COLUMNS[1:])
            for case_id, row in ordered(cases)]
    shown = [i for i, (name, _) in enumerate(AB_COLUMNS)
             if name not in OPTIONAL_COLUMNS or any(row[i] != "-" for row in rows)]
    return [tuple(AB_COLUMNS[i][0] for i in shown)] + [tuple(row[i] for i in shown)
                                                       for row in rows]


def terminal_table(cases: dict[str, dict]) -> list[str]:
    """Both sides per case, the median pair ratio and its interval: the answer, pass or not."""
    header, *rows = ab_cells(cases)
    return aligned([header] + rows, text_columns(header)) + differs_lines(cases) + \
        skip_lines(cases)


def text_columns(header: tuple[str, ...]) -> set[int]:
    return {i for i, name in enumerate(header) if name in TEXT_COLUMNS}


def ab_table(cases: dict[str, dict]) -> list[str]:
    """An A/B session's both sides per case, in report.md (the cases measured on both)."""
    measured = {case_id: row for case_id, row in cases.items() if row.get(CANDIDATE)}
    header, *rows = ab_cells(measured)
    if not rows:
        return []
    notes = [f"- {line}" for line in differs_lines(measured)]
    return ["", "## A/B: candidate against reference", ""] + markdown_lines(
        header, rows, set(range(len(header))) - text_columns(header)) + \
        ([""] + notes if notes else []) + [""]


def plot_sources(cases: dict[str, dict]) -> dict[str, dict[str, dict]] | None:
    """The two sides of an A/B session as two series of the scaling plot, each with its own
    runs, their summary and its speedup (the plot takes a one-device case's as 1), no
    baseline: the case's top-level figures are the candidate's."""
    if not any(row.get(CANDIDATE) for row in cases.values()):
        return None

    def side_row(row: dict, side: str) -> dict:
        runs = row[side].get("runs_ips") or []
        return {**row, **(summarize(runs).to_dict() if runs else {"median_ips": None}),
                "runs_ips": runs, "speedup": row[side].get("speedup"), "baseline_ips": None,
                "baseline_speedup": None}

    return {side: {case_id: side_row(row, side) for case_id, row in cases.items()
                   if row.get(side)}
            for side in (REFERENCE, CANDIDATE)}
