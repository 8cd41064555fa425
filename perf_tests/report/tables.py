"""Tables of results: the terminal table and the DLPerf-style Markdown tables, from the rows of a
results.json's `cases` typed by kind (perf_tests/core/rows.py; a dict row is typed on the way
in), so the end-of-session report (perf_tests/session/report.py) and `rn50-perf report` (which
also turns extracted logs and published figures into rows) render alike. Figures: plots.py."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from perf_tests.core.rows import ABRow, Row
from perf_tests.core.row_values import (busbw_of, delta_of, judged_of, median_ips, peak_memory_of,
                                        row_of, rows_of, speed_of)
from perf_tests.core.text import aligned, formatted, is_number, markdown_lines, memory_text
from perf_tests.environment.differences import explained
from perf_tests.judging.detectable import detects_text
from perf_tests.judging.tolerance_band import Band
from perf_tests.judging.verdicts import PASS

# The terminal's columns: short enough for a row within 110 characters, the median img/s and the
# scaling efficiency included (the markdown table names them in full, DLPerf's way).
TABLE_COLUMNS = ("case", "runs", "img/s", "spread", "speedup", "eff.", "busbw", "baseline",
                 "delta", "detects", "verdict")


@dataclass
class Source:
    """One series of a report: a session's results, extracted logs, or published figures."""
    label: str
    cases: dict[str, dict]
    notes: list[str] = field(default_factory=list)  # Markdown lines on where the numbers come from
    reference: bool = False                          # published figures: drawn dashed, never judged
    hardware: str | None = None
    environment: dict = field(default_factory=dict)  # what it was measured with, where known


AnyRow = TypeVar("AnyRow", Row, Mapping[str, Any])


def typed(row: Row | Mapping[str, Any]) -> Row:
    """A row as its kind's type, for the helpers here that take one row without its case id: a
    module that still reads dicts (issue 65) passes a dict, whose `kind` names its type (an old
    time-to-train row, which would need its case id, reads as a throughput row: the same img/s
    and verdict)."""
    return row_of("", row)


def devices(row: Row | Mapping[str, Any]) -> int:
    return typed(row).devices


def shape(row: Row | Mapping[str, Any]) -> tuple[int, int]:
    """(nodes, devices per node): the configuration, whatever the precision and batch."""
    row = typed(row)
    return row.nodes, row.gpus_per_node


def by_devices(configuration: tuple[int, int]) -> tuple[int, int]:
    """Sort key for configurations: 1n1g 1n2g 2n1g 1n4g ..."""
    return configuration[0] * configuration[1], configuration[0]


def group_label(row: Row | Mapping[str, Any]) -> str:
    """'fp32 b128': cases of one precision and batch form one scaling series."""
    row = typed(row)
    batch = f"b{row.batch_per_device}"
    return f"{row.precision} {batch}" if row.precision else batch


def is_measured(row: Row | Mapping[str, Any]) -> bool:
    ips = median_ips(typed(row))
    return is_number(ips) and ips > 0


def ordered(cases: Mapping[str, AnyRow]) -> list[tuple[str, AnyRow]]:
    """The rows by precision, batch, devices and nodes, each as it was given (typed, or a dict
    from a module that still reads dicts)."""
    def key(item):
        row = row_of(*item)
        return row.precision, row.batch_per_device, row.devices, row.nodes, item[0]
    return sorted(cases.items(), key=key)


def ips_or_verdict(row: Row | Mapping[str, Any]) -> str:
    """The median img/s of a measured case, else why there is none (skipped, oom, error)."""
    row = typed(row)
    return f"{median_ips(row):.2f}" if is_measured(row) else row.verdict or "-"


def table_rows(cases: Mapping[str, Row | dict]) -> list[tuple[str, ...]]:
    rows = []
    for case_id, row in ordered(rows_of(cases)):
        rows.append((
            case_id,
            str(len(row.runs_ips)) if row.runs_ips else "-",
            formatted(median_ips(row), "{:.1f}"),
            spread_text(row),
            formatted(speed_of(row).speedup, "{:.2f}"),
            formatted(speed_of(row).efficiency, "{:.0%}"),
            busbw_text(row),
            formatted(judged_of(row).baseline_ips, "{:.1f}"),
            formatted(delta_of(row), "{:+.1%}"),
            detects_cell(row),
            verdict_text(row),
        ))
    return rows


def detects_cell(row: Row) -> str:
    """The `detects` cell: judging/detectable.py's, which reads a row as results.json holds it."""
    return detects_text(row)


def busbw_text(row: Row | Mapping[str, Any]) -> str:
    """The interconnect probe's bus bandwidth in GB/s (rn50_model/interconnect.py), in four
    characters ('0.48', '12.5', '389'); '-' for one device or no probe."""
    value = busbw_of(typed(row))
    if not is_number(value):
        return "-"
    return f"{value:.2f}" if value < 10 else f"{value:.1f}" if value < 100 else f"{value:.0f}"


def throughput_table(cases: Mapping[str, Row | dict]) -> list[str]:
    """The throughput table (its busbw column only where a case has one: a session of one
    device has no interconnect), and under it why cases skipped."""
    cases = rows_of(cases)
    rows = [TABLE_COLUMNS] + table_rows(cases)
    busbw = TABLE_COLUMNS.index("busbw")
    if all(row[busbw] == "-" for row in rows[1:]):
        rows = [row[:busbw] + row[busbw + 1:] for row in rows]
    return aligned(rows, {0, len(rows[0]) - 1}) + band_lines(cases) + skip_lines(cases)


def is_judged(row: Row) -> bool:
    return is_number(judged_of(row).baseline_ips) and is_number(row.tolerance)


def band_lines(cases: Mapping[str, Row | dict]) -> list[str]:
    """Each judged case's band and where it came from, for under the table (a cell would
    stretch every row): `1n1g_fp32_b8 judged with tolerance 22% (auto: ...)`, so that a pass,
    too, says what it could have seen (its `detects` column: the slowdown that band lets it
    catch); cases judged with the same band share a line (`1n1g_fp32_b128, 1n2g_fp32_b128
    judged with tolerance 5%`). Not `case: `, which begins a case's own line (its failure)."""
    bands: dict[str, list[str]] = {}
    for case_id, row in ordered(rows_of(cases)):
        if is_judged(row):
            text = Band(row.tolerance, judged_of(row).tolerance_reason or "").text
            bands.setdefault(text, []).append(case_id)
    return [f"{', '.join(case_ids)} judged with {text}" for text, case_ids in bands.items()]


def skip_lines(cases: Mapping[str, Row | dict]) -> list[str]:
    """Each skipped case's reason on a line of its own, for under a table: a long reason in a
    cell would stretch every row."""
    return [f"{case_id} skipped: {row.skip_reason}" for case_id, row in ordered(rows_of(cases))
            if row.skip_reason]


def spread_text(row: Row | Mapping[str, Any]) -> str:
    """The runs' coefficient of variation; '-' for one run, which has no spread to show."""
    row = typed(row)
    return formatted(speed_of(row).cv, "{:.1%}") if len(row.runs_ips) > 1 else "-"


def verdict_cell(row: Row | Mapping[str, Any]) -> str:
    """The verdict, with the reason where a case skipped: it is what the reader needs next."""
    row = typed(row)
    verdict = row.verdict or "-"
    return f"{verdict}: {row.skip_reason}" if row.skip_reason else verdict


def decided_by(row: Row) -> str:
    """What decided the verdict where the delta column (the throughput's) did not: ' (speedup
    -12.0%)', ' (memory +24%)' for a peak memory grown beyond its tolerance, both where both
    did; else ''."""
    reasons = []
    speedup_delta, speed = judged_of(row).speedup_delta, speed_of(row)
    if is_number(speedup_delta):
        reasons.append(f"speedup {speedup_delta:+.1%}")
    if speed.memory_regression and is_number(speed.memory_delta):
        reasons.append(f"memory {speed.memory_delta:+.0%}")
    return f" ({', '.join(reasons)})" if reasons else ""


def verdict_text(row: Row | Mapping[str, Any]) -> str:
    """The verdict column: the verdict, what decided it, how its ranks shared devices
    (--perf-set share-devices=on: ' (2 ranks on 1 CUDA device)'), and ', recorded' where the
    session wrote the case's runs into the baseline file (the verdict is against the entry
    before)."""
    row = typed(row)
    if not row.verdict:
        return "-"
    recorded = ", recorded" if row.baseline_update else ""
    shared_devices = judged_of(row).shared_devices
    shared = f" ({shared_devices})" if shared_devices else ""
    return f"{row.verdict}{decided_by(row)}{shared}{recorded}"


def memory_cell(row: Row | Mapping[str, Any]) -> str:
    """The case's median peak memory, with its growth over the baseline's where judged
    ('788 MiB +3%'); '-' where no run recorded one."""
    row = typed(row)
    delta, peak = speed_of(row).memory_delta, peak_memory_of(row)
    if not is_number(peak):
        return "-"
    return memory_text(peak) + (f" {delta:+.0%}" if is_number(delta) else "")


# DLPerf's columns plus precision, spread and the verdict against the baseline. The optional ones
# are left out of a table where no row has a value for them (extracted logs have no verdict).
MARKDOWN_COLUMNS = (
    ("node_num", lambda row: str(row.nodes)),
    ("gpu_num_per_node", lambda row: str(row.gpus_per_node)),
    ("batch_size_per_device", lambda row: str(row.batch_per_device)),
    ("precision", lambda row: row.precision or "-"),
    ("samples/s", lambda row: formatted(median_ips(row), "{:.2f}")),
    ("spread", spread_text),
    ("speedup", lambda row: formatted(speed_of(row).speedup, "{:.2f}")),
    ("busbw GB/s", busbw_text),
    ("baseline samples/s", lambda row: formatted(judged_of(row).baseline_ips, "{:.2f}")),
    ("delta", lambda row: formatted(delta_of(row), "{:+.1%}")),
    ("detects", detects_cell),
    ("peak memory", memory_cell),
    ("J/image", lambda row: formatted(judged_of(row).joules_per_image, "{:.3g}")),
    ("verdict", verdict_text),
)
OPTIONAL_COLUMNS = {"precision", "spread", "busbw GB/s", "baseline samples/s", "delta",
                    "detects", "peak memory", "J/image", "verdict"}
TEXT_COLUMNS = {"precision", "verdict"}


def markdown_table(cases: Mapping[str, Row | dict], title: str | None = None) -> str:
    """DLPerf's table: one row per node x GPU configuration, plus spread, baseline and delta."""
    cells = [tuple(render(row) for _, render in MARKDOWN_COLUMNS)
             for _, row in ordered(rows_of(cases))]
    shown = [i for i, (name, _) in enumerate(MARKDOWN_COLUMNS)
             if name not in OPTIONAL_COLUMNS or any(row[i] != "-" for row in cells)]
    header = tuple(MARKDOWN_COLUMNS[i][0] for i in shown)
    lines = [f"## {title}", ""] if title else []
    lines += markdown_lines(header, [tuple(row[i] for i in shown) for row in cells],
                            {n for n, name in enumerate(header) if name not in TEXT_COLUMNS})
    return "\n".join(lines) + "\n"


def environment_facts(environment: dict) -> str:
    """`image ..., device ..., torch 2.13.0, ...`: what a side was measured with, briefly."""
    return ", ".join(f"{key} {environment[key]}" for key in
                     ("image", "device", "driver", "cuda", "torch", "dali", "python", "os")
                     if key in environment)


def document_notes(document: dict) -> list[str]:
    """What a results.json was measured with, as Markdown paragraphs; an A/B session's both
    sides, as their first runs saw them."""
    notes = [f"Profile `{document.get('profile', '?')}`, launcher "
             f"`{document.get('launcher', '?')}`, {judged_against(document)}."]
    sides = [("Environment", document.get("environment") or {})]
    if document.get("candidate"):
        row = next((row for row in rows_of(document.get("cases") or {}).values()
                    if isinstance(row, ABRow) and row.reference.environment), None)
        if row:
            sides = [("Reference environment", row.reference.environment),
                     ("Candidate environment", row.candidate.environment)]
    notes += [f"{name}: {environment_facts(environment)}." for name, environment in sides
              if environment_facts(environment)]
    return notes


def judged_against(document: dict) -> str:
    """What a session's figures were judged against: its baseline file, or in an A/B session
    (no baseline file) the two stacks; files written before the header named the reference
    stack say it was the session's own."""
    if document.get("candidate"):
        reference = document.get("reference") or "this session's own"
        return f"reference stack `{reference}`, candidate stack `{document['candidate']}`"
    baseline = document.get("baseline_file")
    return f"baseline `{baseline}`" if baseline else "baseline none"


def verdict_messages(cases: Mapping[str, Row | dict]) -> list[str]:
    """Every case that did not pass with the line that explains it (what changed since the
    baseline included) and a failed rank's last lines: what a reviewer of CI artifacts reads."""
    lines = []
    for _, row in ordered(rows_of(cases)):
        if row.verdict in ("", PASS) or not row.message:
            continue
        message = explained(str(row.message), row.environment_diff, row.settings_diff)
        repro = f"; repro: `{row.repro}`" if row.repro else ""
        lines.append(f"- **{row.verdict}** {message}{repro}")
        if row.failure_tail:
            lines += ["", "  ```"] + [f"  {line}" for line in row.failure_tail] + ["  ```", ""]
    if not lines:
        return []
    return ["## Cases that did not pass", ""] + lines + ([""] if lines[-1] else [])


def per_batch_tables(cases: Mapping[str, Row | dict]) -> list[str]:
    """DLPerf's sweep layout, for a precision measured at more than one batch: one table per
    batch size (node_num, gpu_num, samples/s, speedup), `OOM` where it ran out of memory."""
    groups: dict[tuple[str, int], list[Row]] = defaultdict(list)
    for _, row in ordered(rows_of(cases)):
        groups[(row.precision, row.batch_per_device)].append(row)
    swept = {precision for precision, _ in groups
             if sum(1 for other, _ in groups if other == precision) > 1}
    if not swept:
        return []
    lines = ["", "## Per batch size", ""]
    for (precision, batch), rows in groups.items():
        if precision not in swept:
            continue
        rows.sort(key=lambda row: by_devices(shape(row)))
        cells = [(str(row.nodes), str(row.devices),
                  "OOM" if row.verdict == "oom" else ips_or_verdict(row),
                  formatted(speed_of(row).speedup, "{:.2f}")) for row in rows]
        lines += [f"### {precision}, batch_size_per_device {batch}", ""]
        lines += markdown_lines(("node_num", "gpu_num", "samples/s", "speedup"), cells,
                                {0, 1, 2, 3}) + [""]
    return lines


def markdown_sources_report(title: str, sources: list[Source]) -> str:
    """One DLPerf table per source and, for several sources, their numbers side by side."""
    lines = [f"# {title}"]
    for source in sources:
        lines += ["", f"## {source.label}"]
        for note in source.notes:
            lines += ["", note]
        lines += ["", markdown_table(source.cases).rstrip("\n")]
    if len(sources) > 1:
        lines += ["", "## Side by side", "",
                  "samples/s (speedup) per configuration; `-` where a source has no figure.", ""]
        lines += side_by_side_table(sources)
    return "\n".join(lines) + "\n"


def side_by_side_table(sources: list[Source]) -> list[str]:
    """Rows: node x GPU configurations; columns: each source's series (precision and batch)."""
    columns: dict[tuple[str, str], dict[tuple[int, int], Row]] = {}
    for source in sources:
        for _, row in ordered(rows_of(source.cases)):
            column = columns.setdefault((source.label, group_label(row)), {})
            column[shape(row)] = row
    configurations = sorted({each for column in columns.values() for each in column},
                            key=by_devices)
    header = ("node_num", "gpu_num_per_node") + tuple(f"{label} {group}".strip()
                                                      for label, group in columns)
    rows = []
    for configuration in configurations:
        cells = [str(configuration[0]), str(configuration[1])]
        for column in columns.values():
            row = column.get(configuration)
            if row is None:
                cells.append("-")
            elif is_measured(row) and is_number(speed_of(row).speedup):
                cells.append(f"{ips_or_verdict(row)} ({speed_of(row).speedup:.2f})")
            else:
                cells.append(ips_or_verdict(row))
        rows.append(tuple(cells))
    return markdown_lines(header, rows, set(range(len(header))))
