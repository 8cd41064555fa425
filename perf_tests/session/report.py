"""The report of one session, from its results.json: the terminal summary's tables, report.md
and the figures, each mode writing its own section (perf_tests/modes/), in the registry's
order. The rows of results.json's `cases` are typed here (perf_tests/core/rows.py), once, and
each mode's section gets its own. `tools/report/command.py` writes a session's report with the
same functions."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perf_tests.core.rows import Row
from perf_tests.core.row_values import rows_of
from perf_tests.judging.verdicts import SKIPPED
from perf_tests.modes import MODES
from perf_tests.modes.base import THROUGHPUT_TITLE, Mode
from perf_tests.report.run_cost import run_cost_table
from perf_tests.report.tables import document_notes

REPORT_FILE = "report.md"
# A session stopped before its first case ended has no row for a mode to draw from: the line
# that every mode's figures give when nothing was measured, given here.
NOTHING_MEASURED = ("no scaling plot: no case was measured (the session was stopped in its "
                    "first case)")


Cases = Mapping[str, Any]   # results.json's `cases`: its rows by case id, as read or typed


def sections(cases: Cases) -> list[tuple[type[Mode], Mapping[str, Row]]]:
    """Each mode with rows in `cases`, and its rows, typed (older files' rows get their kinds
    by their old marks)."""
    typed = rows_of(cases)
    found = []
    for mode in MODES:
        rows = {case_id: row for case_id, row in typed.items() if row.kind == mode.kind}
        if rows:
            found.append((mode, rows))
    return found


def terminal_sections(found: list[tuple[type[Mode], Mapping[str, Row]]]
                      ) -> dict[str, list[str]]:
    """The terminal summary's sections: per title, its modes' tables one after the other."""
    titles: dict[str, list[str]] = {}
    for mode, rows in found:
        lines = titles.setdefault(mode.title, [])
        lines += ([""] if lines else []) + mode.terminal_lines(rows)
    return titles


def terminal_table(cases: Cases) -> list[str]:
    """Every section's tables, one after the other."""
    lines: list[str] = []
    for section in terminal_sections(sections(cases)).values():
        lines += ([""] if lines else []) + section
    return lines


def markdown_report(document: dict) -> str:
    """report.md: a heading and where the figures come from, then each mode's section."""
    hardware = document.get("hardware", "unknown")
    found = sections(document.get("cases", {}))
    if any(mode.title == THROUGHPUT_TITLE for mode, _ in found):
        lines = [f"# ResNet50 v1.5 training throughput: {hardware}"]
        for note in document_notes(document):
            lines += ["", note]
    else:
        lines = [f"# ResNet50 v1.5 training: {hardware}"]
    stopped = interruption_line(document)
    if stopped:
        lines += ["", f"**{stopped}**"]
    for mode, rows in found:
        lines += mode.markdown(rows)
    return "\n".join(lines + run_cost_table(document.get("cases", {})))


def interruption_line(document: dict) -> str | None:
    """'The session was interrupted at ... in 1n2g_fp32_b8 (its finished runs are kept in its
    folder); never ran: 2n1g_fp32_b8.', or None for a session that ended."""
    stopped = document.get("interrupted")
    if not stopped:
        return None
    line = f"The session was interrupted at {stopped.get('at', '?')}"
    if stopped.get("in_case"):
        line += (f" in {stopped['in_case']} (its finished runs are kept in its folder, "
                 "not judged)")
    never = stopped.get("not_run") or []
    return line + (f"; never ran: {', '.join(never)}." if never else ".")


def every_case_skipped(cases: Cases) -> bool:
    return bool(cases) and all(row.verdict == SKIPPED for row in rows_of(cases).values())


@dataclass
class Written:
    files: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)   # a figure that could not be drawn
    markdown: str = ""


def write_report(document: dict, folder: Path, section: Callable[[str, list[str]], None],
                 plots: bool = True) -> Written:
    """The terminal tables through `section(title, lines)` (one section per title), report.md
    and, with `plots` (--perf-set plots), every mode's figures into `folder`."""
    found = sections(document.get("cases", {}))
    for title, lines in terminal_sections(found).items():
        section(title, lines)
    written = Written(markdown=markdown_report(document))
    report = folder / REPORT_FILE
    report.write_text(written.markdown)
    written.files.append(report)
    for mode, rows in found if plots else ():
        files, notes = mode.figures(rows, folder, document.get("hardware", "unknown"))
        written.files += files
        written.notes += notes
    if not found:
        written.notes.append(NOTHING_MEASURED)
    return written
