"""Text for lines and tables: how a figure reads (img/s, memory, a time, a share), a case's runs
and the host's marks on them, and the plain-text and Markdown table layouts. It imports nothing of
the project, so the verdicts, the baseline checks and the reports all use it without depending on
one another.
"""
from __future__ import annotations

import math
import re
from datetime import datetime, timezone


def ips(value: float) -> str:
    """Throughput in a message: one decimal, or three significant digits below 10 img/s."""
    return f"{value:.1f}" if value >= 10 else f"{value:.3g}"


def is_number(value) -> bool:
    """A finite int or float (not a bool): a figure a message or a table can show."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def memory_text(size, digits: int = 1) -> str:
    """Memory in a message or a table: '1.3 GiB', '788 MiB' (`digits`: the GiB's decimals)."""
    if not is_number(size):
        return "-"
    return f"{size / 2**30:.{digits}f} GiB" if size >= 2**30 else f"{size / 2**20:.0f} MiB"


def seconds_text(value: float) -> str:
    """A time to train in a message or an export: one decimal, thousands separated from 1000 s."""
    return f"{value:.1f} s" if value < 1000 else f"{value:,.0f} s"


def duration_text(seconds: float) -> str:
    """A wait or a run's length in a line: '45 s', '4 min 12 s', '1 h 3 min'."""
    seconds = round(max(seconds, 0))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


def percent(value: float) -> str:
    """A top-1 in a message: '75.9%'."""
    return f"{100 * value:.1f}%"


def runs_text(values: list[float]) -> str:
    if len(values) == 1:
        return f"1 run, {ips(values[0])}"
    return f"{len(values)} runs {ips(min(values))}-{ips(max(values))}"


def counted(number: int, singular: str, plural: str) -> str:
    """'1 entry', '3 entries'."""
    return f"{number} {singular if number == 1 else plural}"


def formatted(value, pattern: str) -> str:
    """`value` in `pattern`, or '-' where there is no number."""
    return pattern.format(value) if is_number(value) else "-"


def run_numbers(indices: list[int]) -> str:
    """'2-4, 7': run numbers, consecutive ones as a range."""
    spans: list[list[int]] = []
    for index in sorted(indices):
        if spans and index == spans[-1][1] + 1:
            spans[-1][1] = index
        else:
            spans.append([index, index])
    return ", ".join(f"{low}-{high}" if high > low else str(low) for low, high in spans)


NUMBER = re.compile(r"\d+(?:\.\d+)?")
PIDS = re.compile(r"\(pid [^)]*\)")


def figure_template(reason: str) -> str:
    """`reason` with its measured figures as '#': what it is about (the host, node, GPU and
    rank before its last ': ', the pids in '(pid ...)') stays as it is."""
    about, separator, said = reason.rpartition(": ")
    kept = PIDS.findall(said)
    template = NUMBER.sub("#", PIDS.sub("\0", said))
    for pids in kept:
        template = template.replace("\0", pids, 1)
    return about + separator + template


def marked_runs_text(marked: dict[int, list[str]]) -> str:
    """'runs 2-4: other processes used 1.3-1.4 of 2 cores; run 7: CPU quota throttled 40
    times (1.2 s)': each reason with the runs it marked, where the same reason differs only in
    its measured figures, their range."""
    groups: dict[str, list[tuple[int, str]]] = {}
    for index, reasons in sorted(marked.items()):
        for reason in reasons:
            groups.setdefault(figure_template(reason), []).append((index, reason))
    parts = []
    for template, members in groups.items():
        figures = [NUMBER.findall(PIDS.sub("", reason.rpartition(": ")[2]))
                   for _, reason in members]
        about, separator, text = template.rpartition(": ")
        for position in range(text.count("#")):
            values = sorted({float(found[position]) for found in figures})
            low, high = (next(found[position] for found in figures if float(found[position])
                              == value) for value in (values[0], values[-1]))
            text = text.replace("#", low if low == high else f"{low}-{high}", 1)
        indices = sorted({index for index, _ in members})
        parts.append(f"run{'s' if len(indices) > 1 else ''} {run_numbers(indices)}: "
                     f"{about}{separator}{text}")
    return "; ".join(parts)


def aligned(rows: list[tuple[str, ...]], left: set[int]) -> list[str]:
    """A plain-text table: the header row, a rule, then the rows; columns in `left` flush left."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for number, row in enumerate(rows):
        cells = [cell.ljust(width) if i in left else cell.rjust(width)
                 for i, (cell, width) in enumerate(zip(row, widths))]
        lines.append("  ".join(cells).rstrip())
        if number == 0:
            lines.append("  ".join("-" * width for width in widths))
    return lines


def markdown_lines(header: tuple[str, ...], rows: list[tuple[str, ...]],
                   right: set[int]) -> list[str]:
    """A Markdown table; columns in `right` (the numbers) aligned right."""
    def escape(cell: str) -> str:
        return cell.replace("|", "\\|")
    lines = ["| " + " | ".join(escape(cell) for cell in header) + " |",
             "|" + "|".join("---:" if i in right else "---" for i in range(len(header))) + "|"]
    lines += ["| " + " | ".join(escape(cell) for cell in row) + " |" for row in rows]
    return lines


def utc_now() -> str:
    """Now, as results, records and entries write their times: 2026-11-28T10:00:00Z."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
