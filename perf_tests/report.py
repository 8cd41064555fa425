"""Rendering results: the terminal table, the DLPerf-style Markdown tables and the scaling plot.

Everything here reads rows shaped like the `cases` of a results.json, keyed by case id, so the
suite's end-of-session report and `tools/report.py` (which also turns extracted logs and
published figures into such rows) render the same thing from the same code.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from .explain import markdown_section
from .verdicts import PASS, explained

TABLE_COLUMNS = ("case", "runs", "median img/s", "spread", "speedup", "efficiency", "baseline",
                 "delta", "verdict")
MAX_BATCH_KIND = "max-batch"  # rows of --perf-find-max-batch (perf_tests/max_batch.py)
MAX_BATCH_COLUMNS = ("case", "max batch", "oom batch", "probes", "img/s at max", "peak memory",
                     "baseline", "search", "verdict")


@dataclass
class Source:
    """One series of a report: a session's results, extracted logs, or published figures."""
    label: str
    cases: dict[str, dict]
    notes: list[str] = field(default_factory=list)  # Markdown lines on where the numbers come from
    reference: bool = False                          # published figures: drawn dashed, never judged
    hardware: str | None = None
    environment: dict = field(default_factory=dict)  # what it was measured with, where known


def devices(row: dict) -> int:
    return row.get("nodes", 0) * row.get("gpus_per_node", 0)


def shape(row: dict) -> tuple[int, int]:
    """(nodes, devices per node): the configuration, whatever the precision and batch."""
    return row.get("nodes", 0), row.get("gpus_per_node", 0)


def by_devices(configuration: tuple[int, int]) -> tuple[int, int]:
    """Sort key for configurations: 1n1g 1n2g 2n1g 1n4g ..."""
    return configuration[0] * configuration[1], configuration[0]


def group_label(row: dict) -> str:
    """'fp32 b128': cases of one precision and batch form one scaling series."""
    precision = row.get("precision")
    return f"{precision} b{row.get('batch_per_device', '?')}" if precision else \
        f"b{row.get('batch_per_device', '?')}"


def is_measured(row: dict) -> bool:
    return _is_number(row.get("median_ips")) and row["median_ips"] > 0


def ordered(cases: dict[str, dict]) -> list[tuple[str, dict]]:
    def key(item):
        row = item[1]
        return (row.get("precision") or "", row.get("batch_per_device", 0), devices(row),
                row.get("nodes", 0), item[0])
    return sorted(cases.items(), key=key)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def counted(number: int, singular: str, plural: str) -> str:
    """'1 entry', '3 entries'."""
    return f"{number} {singular if number == 1 else plural}"


def formatted(value, pattern: str) -> str:
    """`value` in `pattern`, or '-' where there is no number."""
    return pattern.format(value) if _is_number(value) else "-"


def ips_or_verdict(row: dict) -> str:
    """The median img/s of a measured case, else why there is none (skipped, oom, error)."""
    return f"{row['median_ips']:.2f}" if is_measured(row) else str(row.get("verdict") or "-")


def table_rows(cases: dict[str, dict]) -> list[tuple[str, ...]]:
    rows = []
    for case_id, row in ordered(cases):
        runs = row.get("runs_ips") or []
        rows.append((
            case_id,
            str(len(runs)) if runs else "-",
            formatted(row.get("median_ips"), "{:.1f}"),
            formatted(row.get("cv"), "{:.1%}"),
            formatted(row.get("speedup"), "{:.2f}"),
            formatted(row.get("efficiency"), "{:.0%}"),
            formatted(row.get("baseline_ips"), "{:.1f}"),
            formatted(row.get("delta"), "{:+.1%}"),
            verdict_cell(row),
        ))
    return rows


def verdict_cell(row: dict) -> str:
    """The verdict, with the reason where a case skipped: it is what the reader needs next."""
    verdict = str(row.get("verdict", "-"))
    return f"{verdict}: {row['skip_reason']}" if row.get("skip_reason") else verdict


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


def is_max_batch(row: dict) -> bool:
    return row.get("kind") == MAX_BATCH_KIND


def split_kinds(cases: dict[str, dict]) -> tuple[dict[str, dict], dict[str, dict]]:
    """(throughput cases, max batch searches)."""
    return ({case_id: row for case_id, row in cases.items() if not is_max_batch(row)},
            {case_id: row for case_id, row in cases.items() if is_max_batch(row)})


def memory_text(size) -> str:
    if not _is_number(size):
        return "-"
    return f"{size / 2**30:.1f} GiB" if size >= 2**30 else f"{size / 2**20:.0f} MiB"


def probes_text(row: dict) -> str:
    """'16 32 64 128:OOM 96 112:OOM': the batches in the order they ran, failures marked."""
    marks = {"ok": "", "oom": ":OOM"}
    return " ".join(f"{probe.get('batch')}{marks.get(probe.get('outcome'), ':error')}"
                    for probe in row.get("probes") or [])


def max_batch_rows(cases: dict[str, dict]) -> list[tuple[str, ...]]:
    rows = []
    for case_id, row in ordered(cases):
        limit = " (limit)" if row.get("limit_reached") else ""
        rows.append((
            case_id,
            f"{row['max_batch']}{limit}" if row.get("max_batch") else "-",
            str(row.get("oom_batch") or "-"),
            str(len(row.get("probes") or [])) if row.get("probes") else "-",
            formatted(row.get("max_batch_ips"), "{:.1f}"),
            memory_text(row.get("peak_memory_bytes")),
            str(row.get("baseline_max_batch") or "-"),
            formatted(row.get("search_seconds"), "{:.0f} s"),
            verdict_cell(row),
        ))
    return rows


def terminal_table(cases: dict[str, dict]) -> list[str]:
    throughput, searches = split_kinds(cases)
    lines = aligned([TABLE_COLUMNS] + table_rows(throughput), {0, len(TABLE_COLUMNS) - 1}) \
        if throughput else []
    if searches:
        lines += [""] if lines else []
        lines += aligned([MAX_BATCH_COLUMNS] + max_batch_rows(searches),
                         {0, len(MAX_BATCH_COLUMNS) - 1})
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


# DLPerf's columns plus precision, spread and the verdict against the baseline. The optional ones
# are left out of a table where no row has a value for them (extracted logs have no verdict).
MARKDOWN_COLUMNS = (
    ("node_num", lambda row: str(row.get("nodes", "-"))),
    ("gpu_num_per_node", lambda row: str(row.get("gpus_per_node", "-"))),
    ("batch_size_per_device", lambda row: str(row.get("batch_per_device", "-"))),
    ("precision", lambda row: str(row.get("precision") or "-")),
    ("samples/s", lambda row: formatted(row.get("median_ips"), "{:.2f}")),
    ("cv", lambda row: formatted(row.get("cv"), "{:.1%}")),
    ("speedup", lambda row: formatted(row.get("speedup"), "{:.2f}")),
    ("baseline samples/s", lambda row: formatted(row.get("baseline_ips"), "{:.2f}")),
    ("delta", lambda row: formatted(row.get("delta"), "{:+.1%}")),
    ("verdict", lambda row: str(row.get("verdict") or "-")),
)
OPTIONAL_COLUMNS = {"precision", "cv", "baseline samples/s", "delta", "verdict"}
TEXT_COLUMNS = {"precision", "verdict"}


def markdown_table(cases: dict[str, dict], title: str | None = None) -> str:
    """DLPerf's table: one row per node x GPU configuration, plus spread, baseline and delta."""
    cells = [tuple(render(row) for _, render in MARKDOWN_COLUMNS) for _, row in ordered(cases)]
    shown = [i for i, (name, _) in enumerate(MARKDOWN_COLUMNS)
             if name not in OPTIONAL_COLUMNS or any(row[i] != "-" for row in cells)]
    header = tuple(MARKDOWN_COLUMNS[i][0] for i in shown)
    lines = [f"## {title}", ""] if title else []
    lines += markdown_lines(header, [tuple(row[i] for i in shown) for row in cells],
                            {n for n, name in enumerate(header) if name not in TEXT_COLUMNS})
    return "\n".join(lines) + "\n"


def document_notes(document: dict) -> list[str]:
    """What a results.json was measured with, as Markdown paragraphs."""
    environment = document.get("environment") or {}
    facts = ", ".join(f"{key} {environment[key]}" for key in
                      ("device", "driver", "cuda", "torch", "dali") if key in environment)
    notes = [f"Profile `{document.get('profile', '?')}`, launcher "
             f"`{document.get('launcher', '?')}`, baseline `{document.get('baseline_file', '-')}`."]
    if facts:
        notes.append(f"Environment: {facts}.")
    return notes


def markdown_report(document: dict) -> str:
    """The report of one session, written beside its results.json: the DLPerf table, one table
    per batch size where the session swept batches, and the largest batches found."""
    lines = [f"# ResNet50 v1.5 training throughput: {document.get('hardware', 'unknown')}"]
    for note in document_notes(document):
        lines += ["", note]
    cases = document.get("cases", {})
    throughput, searches = split_kinds(cases)
    if throughput:
        lines += ["", markdown_table(throughput)]
    lines += ab_table(throughput)
    lines += per_batch_tables(throughput)
    if searches:
        lines += ["", max_batch_table(searches)]
    lines += verdict_messages(cases)
    lines += markdown_section(throughput)
    return "\n".join(lines)


def ab_table(cases: dict[str, dict]) -> list[str]:
    """An A/B session's both sides per case; nothing for a session without a candidate."""
    rows = [(case_id, str(row.get("pairs", "-")),
             formatted(row["reference"].get("median_ips"), "{:.2f}"),
             formatted(row["candidate"].get("median_ips"), "{:.2f}"),
             formatted(row.get("ratio"), "{:.3f}"),
             "-" if not row.get("ratio_ci") else "{:.3f}-{:.3f}".format(*row["ratio_ci"]),
             formatted(row["reference"].get("speedup"), "{:.2f}"),
             formatted(row["candidate"].get("speedup"), "{:.2f}"),
             str(row.get("verdict") or "-"))
            for case_id, row in ordered(cases) if row.get("candidate")]
    if not rows:
        return []
    header = ("case", "pairs", "reference img/s", "candidate img/s", "median pair ratio", "95% CI",
              "reference speedup", "candidate speedup", "verdict")
    return ["", "## A/B: candidate against reference", ""] + markdown_lines(
        header, rows, set(range(1, 8))) + [""]


def ab_plot_sources(cases: dict[str, dict]) -> dict[str, dict[str, dict]] | None:
    """The two sides of an A/B session as two series of the scaling plot; None without one."""
    if not any(row.get("candidate") for row in cases.values()):
        return None
    return {side: {case_id: {**row, "median_ips": row[side]["median_ips"],
                             "speedup": row[side].get("speedup"), "baseline_ips": None}
                   for case_id, row in cases.items() if row.get(side)}
            for side in ("reference", "candidate")}


def verdict_messages(cases: dict[str, dict]) -> list[str]:
    """Every case that did not pass with the line that explains it (what changed since the
    baseline included) and a failed rank's last lines: what a reviewer of CI artifacts reads."""
    lines = []
    for case_id, row in ordered(cases):
        if row.get("verdict") in (None, PASS) or not row.get("message"):
            continue
        message = explained(str(row["message"]), row.get("environment_diff"),
                            row.get("settings_diff"))
        lines.append(f"- **{row['verdict']}** {message}")
        if row.get("failure_tail"):
            lines += ["", "  ```"] + [f"  {line}" for line in row["failure_tail"]] + ["  ```", ""]
    if not lines:
        return []
    return ["## Cases that did not pass", ""] + lines + ([""] if lines[-1] else [])


def per_batch_tables(cases: dict[str, dict]) -> list[str]:
    """DLPerf's sweep layout, for a precision measured at more than one batch: one table per
    batch size (node_num, gpu_num, samples/s, speedup), `OOM` where it ran out of memory."""
    groups: dict[tuple[str, int], list[dict]] = defaultdict(list)
    for _, row in ordered(cases):
        groups[(row.get("precision") or "", row.get("batch_per_device", 0))].append(row)
    swept = {precision for precision, _ in groups
             if sum(1 for other, _ in groups if other == precision) > 1}
    if not swept:
        return []
    lines = ["", "## Per batch size", ""]
    for (precision, batch), rows in groups.items():
        if precision not in swept:
            continue
        rows.sort(key=lambda row: by_devices(shape(row)))
        cells = [(str(row.get("nodes", "-")), str(devices(row)),
                  "OOM" if row.get("verdict") == "oom" else ips_or_verdict(row),
                  formatted(row.get("speedup"), "{:.2f}")) for row in rows]
        lines += [f"### {precision}, batch_size_per_device {batch}", ""]
        lines += markdown_lines(("node_num", "gpu_num", "samples/s", "speedup"), cells,
                                {0, 1, 2, 3}) + [""]
    return lines


def max_batch_table(cases: dict[str, dict]) -> str:
    """The largest batch per device that trained, per topology and precision, with its probes."""
    header = ("node_num", "gpu_num_per_node", "precision", "max batch_size_per_device",
              "OOM at", "samples/s at max", "peak memory at max", "baseline max", "probes",
              "verdict")
    cells = [(str(row.get("nodes", "-")), str(row.get("gpus_per_node", "-")),
              str(row.get("precision") or "-"), cell[1], cell[2], cell[4], cell[5], cell[6],
              probes_text(row) or "-", cell[8])
             for (_, row), cell in zip(ordered(cases), max_batch_rows(cases))]
    steps = sorted({row.get("batch_step") for row in cases.values() if row.get("batch_step")})
    unit = f" in units of {', '.join(map(str, steps))}" if steps else ""
    lines = ["## Largest batch per device", "",
             f"Found by short real runs{unit}: doubling from the case's batch until one ran "
             "out of memory, then bisecting; `probes` lists the batches in the order they "
             "ran.", ""]
    lines += markdown_lines(header, cells, {0, 1, 3, 4, 5, 7})
    return "\n".join(lines) + "\n"


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
    columns: dict[tuple[str, str], dict[tuple[int, int], dict]] = {}
    for source in sources:
        for _, row in ordered(source.cases):
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
            elif is_measured(row) and _is_number(row.get("speedup")):
                cells.append(f"{ips_or_verdict(row)} ({row['speedup']:.2f})")
            else:
                cells.append(ips_or_verdict(row))
        rows.append(tuple(cells))
    return markdown_lines(header, rows, set(range(len(header))))


# -- the scaling plot ---------------------------------------------------------------------------

@dataclass
class _Series:
    name: str
    rows: list[tuple[str, dict]]  # ordered by devices, then nodes
    reference: bool


def _plot_series(sources: dict[str, dict[str, dict]], references) -> list[_Series]:
    series = []
    for source, cases in sources.items():
        groups: dict[str, list] = defaultdict(list)
        for case_id, row in ordered(cases):
            groups[group_label(row)].append((case_id, row))
        for group, rows in groups.items():
            rows.sort(key=lambda item: by_devices(shape(item[1])))
            series.append(_Series(f"{source}: {group}" if source else group, rows,
                                  source in references))
    return series


def _ips_text(value: float) -> str:
    return f"{value:.0f}" if value >= 100 else f"{value:.3g}"


class NoPlot(Exception):
    """Why no scaling plot was drawn: nothing was measured, or matplotlib is not installed."""


# Throughputs spanning more than this factor (CPU figures beside published V100 ones) get a log
# axis: on a linear one the small bars are invisible.
LOG_SCALE_RATIO = 30
# Other node x device shapes of one device count (2n1g beside 1n2g) are drawn to the right of
# the line's point, each this many points further.
SHAPE_DODGE_POINTS = 14


def scaling_plot(sources: dict[str, dict[str, dict]], path: Path, title: str,
                 references=frozenset()) -> Path:
    """The scaling figure (see `scaling_figure`) written as a PNG to `path`. Raises NoPlot,
    saying why, where no case was measured or matplotlib is not installed."""
    figure = scaling_figure(sources, title, references)
    import matplotlib.pyplot as plt
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        figure.savefig(path, dpi=100)
    finally:
        plt.close(figure)
    return path


def scaling_figure(sources: dict[str, dict[str, dict]], title: str, references=frozenset()):
    """Two panels: speedup over 1n1g against devices (log2 axes, with the ideal line and the
    baseline's speedup), and median img/s bars per node x device configuration (with baseline
    markers; a log axis where the figures span orders of magnitude). One colour per source and
    precision/batch; sources named in `references` (published figures) are dashed and hatched.
    Raises NoPlot where no case was measured or matplotlib is not installed."""
    series = _plot_series(sources, references)
    if not any(is_measured(row) for one in series for _, row in one.rows):
        raise NoPlot("no case was measured (every case skipped or failed)")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
    except ImportError:
        raise NoPlot("matplotlib is not installed (pip install matplotlib)") from None
    colours = [plt.get_cmap("tab10").colors[index % 10] for index in range(len(series))]
    figure, (speed_axis, bar_axis) = plt.subplots(1, 2, figsize=(14, 6))
    handles = _draw_scaling(speed_axis, series, colours)
    _draw_throughput(bar_axis, series, colours)
    if any(one.reference for one in series):
        handles.append(Patch(facecolor="white", edgecolor="grey", hatch="//",
                             label="published reference (hatched / dashed)"))
    columns = min(len(handles), 4)
    legend_rows = math.ceil(len(handles) / columns)
    figure.legend(handles=handles, loc="lower center", ncol=columns, fontsize=9, frameon=False)
    figure.suptitle(title, fontsize=13)
    figure.tight_layout(rect=(0, 0.035 * legend_rows + 0.02, 1, 1))
    return figure


def _draw_scaling(axis, series: list[_Series], colours: list) -> list:
    """Speedup against devices; returns the legend handles. One line point per device count
    (the fewest nodes); other node x device shapes of that count are diamonds set a little to
    the right, and where a count has several shapes the first is labelled on its left, the
    others on their right, so 1n2g and 2n1g stay apart. Baseline speedups are black ticks at
    their case's point, as in the legend."""
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator
    from matplotlib.transforms import offset_copy

    handles = []
    device_counts = {1}
    speedups = [1.0]
    baseline_drawn = other_shapes_drawn = False
    baseline_style = dict(color="black", marker="_", markersize=11, markeredgewidth=2.5,
                          linestyle="none", zorder=4)
    for one, colour in zip(series, colours):
        style = dict(color=colour, linestyle="--" if one.reference else "-",
                     marker="s" if one.reference else "o",
                     markerfacecolor="none" if one.reference else colour)
        handles.append(Line2D([], [], label=one.name, **style))
        points = [(devices(row), row["speedup"], case_id, row) for case_id, row in one.rows
                  if is_measured(row) and _is_number(row.get("speedup")) and row["speedup"] > 0]
        line: dict[int, tuple] = {}
        for point in points:
            line.setdefault(point[0], point)
        axis.plot([p[0] for p in line.values()], [p[1] for p in line.values()], **style)
        for count, speedup, case_id, row in points:
            same_count = [p[2] for p in points if p[0] == count]
            place = same_count.index(case_id)
            shifted = offset_copy(axis.transData, fig=axis.figure,
                                  x=SHAPE_DODGE_POINTS * place, y=0, units="points")
            if place:
                axis.plot([count], [speedup], color=colour, marker="D", linestyle="none",
                          transform=shifted)
                other_shapes_drawn = True
            if len(same_count) > 1:
                axis.annotate(case_id.split("_")[0], (count, speedup), xycoords=shifted,
                              fontsize=8, color=colour, textcoords="offset points",
                              xytext=(8, -3 - 10 * (place - 1)) if place else (-6, 3),
                              ha="left" if place else "right")
            base = row.get("baseline_speedup")
            if _is_number(base) and base > 0 and count > 1:
                axis.plot([count], [base], transform=shifted, **baseline_style)
                speedups.append(base)
                baseline_drawn = True
        device_counts.update(p[0] for p in points)
        speedups += [p[1] for p in points]
    largest = max(device_counts)
    axis.plot([1, largest], [1, largest], linestyle=":", color="grey")
    handles.append(Line2D([], [], linestyle=":", color="grey", label="ideal (linear) speedup"))
    if other_shapes_drawn:
        handles.append(Line2D([], [], color="grey", marker="D", linestyle="none",
                              label="another nodes x devices shape of that device count"))
    if baseline_drawn:
        handles.append(Line2D([], [], label="baseline (speedup / img/s)", **baseline_style))
    # Log2 axes make ideal scaling the diagonal and space 1, 2, 4 ... 32 devices evenly; the
    # speedup axis also gets the 1.5x2^k midpoints so that small ranges still read.
    powers = [2.0 ** k for k in range(-3, int(math.log2(largest)) + 2)]
    axis.set_xscale("log", base=2)
    axis.set_yscale("log", base=2)
    axis.xaxis.set_major_locator(FixedLocator(sorted(device_counts)))
    axis.yaxis.set_major_locator(FixedLocator(sorted(powers + [1.5 * p for p in powers])))
    for scale in (axis.xaxis, axis.yaxis):
        scale.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        scale.set_minor_locator(NullLocator())
    axis.set_xlim(0.8, largest * 1.35)
    axis.set_ylim(min(speedups) * 0.8, max(speedups + [largest]) * 1.25)
    axis.set_xlabel("devices (nodes x devices per node), log2 scale")
    axis.set_ylabel("speedup over 1n1g (median img/s / 1n1g median), log2 scale")
    axis.set_title("Scaling")
    axis.grid(True, alpha=0.3)
    return handles


def _draw_throughput(axis, series: list[_Series], colours: list) -> None:
    """Median img/s per node x device configuration: one bar per series that has it, centred
    on the configuration's tick, the baseline as a black bar across it, each value written
    above both, and the verdict written where a case has no measurement."""
    configurations = sorted({shape(row) for one in series for _, row in one.rows},
                            key=by_devices)
    present = {configuration: [index for index, one in enumerate(series)
                               if any(shape(row) == configuration for _, row in one.rows)]
               for configuration in configurations}
    width = 0.8 / max([len(indices) for indices in present.values()] + [1])
    label_bars = sum(len(one.rows) for one in series) <= 36
    values = [value for one in series for _, row in one.rows for value in
              (row.get("median_ips"), row.get("baseline_ips")) if _is_number(value) and value > 0]
    log_scale = max(values) / min(values) > LOG_SCALE_RATIO
    if log_scale:
        axis.set_yscale("log")
    floor = min(values) / 3 if log_scale else 0.0
    top = max(values) * (4 if log_scale else 1.18)
    for index, (one, colour) in enumerate(zip(series, colours)):
        for case_id, row in one.rows:
            indices = present[shape(row)]
            x = configurations.index(shape(row)) \
                + (indices.index(index) - (len(indices) - 1) / 2) * width
            if not is_measured(row):
                axis.text(x, floor, f" {row.get('verdict') or 'no result'}", rotation=90,
                          ha="center", va="bottom", fontsize=7, color=colour)
                continue
            value = row["median_ips"]
            axis.bar(x, value - floor, width * 0.92, bottom=floor, color=colour,
                     alpha=0.45 if one.reference else 0.9,
                     hatch="//" if one.reference else None, edgecolor=colour)
            base = row.get("baseline_ips")
            has_base = _is_number(base) and base > 0
            if has_base:
                axis.hlines(base, x - width / 2, x + width / 2, colors="black", linewidth=2.5,
                            zorder=3)
            if label_bars:
                # Above the bar and its baseline mark, whichever is higher: never struck through.
                axis.annotate(_ips_text(value), (x, max(value, base) if has_base else value),
                              textcoords="offset points", xytext=(0, 4), ha="center",
                              va="bottom", rotation=90, fontsize=7)
    axis.set_xticks(range(len(configurations)))
    axis.set_xticklabels([f"{n}n{g}g\n{n * g} dev" for n, g in configurations], fontsize=8)
    axis.set_xlim(-0.6, len(configurations) - 0.4)
    axis.set_ylim(floor or 0, top)
    axis.set_xlabel("configuration (nodes x devices per node)")
    axis.set_ylabel("median images/s over all devices" + (", log scale" if log_scale else ""))
    axis.set_title("Throughput")
    axis.grid(True, axis="y", alpha=0.3)


# -- the batch plot -----------------------------------------------------------------------------

def batch_series(cases: dict[str, dict]) -> dict[str, list[tuple[int, float | None]]]:
    """Per topology and precision, (batch, img/s) in batch order, img/s None where the batch ran
    out of memory: from a batch sweep's cases and from the probes of max batch searches."""
    series: dict[str, dict[int, float | None]] = defaultdict(dict)
    for _, row in ordered(cases):
        name = f"{row.get('nodes', 0)}n{row.get('gpus_per_node', 0)}g {row.get('precision', '')}"
        if is_max_batch(row):
            for probe in row.get("probes") or []:
                if probe.get("outcome") in ("ok", "oom"):
                    series[name][probe["batch"]] = probe.get("ips") if probe["outcome"] == "ok" \
                        else None
        elif is_measured(row) or row.get("verdict") == "oom":
            series[name][row.get("batch_per_device", 0)] = row.get("median_ips") \
                if is_measured(row) else None
    return {name: sorted(points.items()) for name, points in series.items()}


def batch_plot(cases: dict[str, dict], path: Path, title: str) -> Path | None:
    """img/s against batch per device, one line per topology and precision, an `OOM` cross
    where a batch ran out of memory. None where no topology has two batches (or no
    matplotlib)."""
    series = {name: points for name, points in batch_series(cases).items() if len(points) > 1}
    if not series:
        return None
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    figure, axis = plt.subplots(figsize=(9, 5.5))
    for index, (name, points) in enumerate(series.items()):
        colour = plt.get_cmap("tab10").colors[index % 10]
        ran = [(batch, value) for batch, value in points if value is not None]
        axis.plot([b for b, _ in ran], [v for _, v in ran], marker="o", color=colour, label=name)
        for batch, value in points:
            if value is None:
                axis.plot([batch], [0], marker="x", markersize=10, markeredgewidth=2.5,
                          color=colour, linestyle="none", clip_on=False)
                axis.annotate("OOM", (batch, 0), textcoords="offset points", xytext=(0, 8),
                              ha="center", fontsize=8, color=colour)
    batches = sorted({batch for points in series.values() for batch, _ in points})
    axis.set_xscale("log", base=2)
    axis.set_xticks(batches)
    axis.set_xticklabels([str(batch) for batch in batches], fontsize=8)
    axis.minorticks_off()
    axis.set_ylim(bottom=0)
    axis.set_xlabel("batch size per device (log2 scale)")
    axis.set_ylabel("images/s over all devices")
    axis.set_title(title)
    axis.grid(True, alpha=0.3)
    axis.legend(fontsize=9)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
