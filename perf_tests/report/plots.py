"""The figures of a report: throughput and speedup against devices (the scaling plot), and
img/s against batch size. They read results.json's `cases` as typed rows, as tables.py does;
their styles and colours are plot_style.py's, time-to-train's top-1 curve time_to_train.py's."""
from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from perf_tests.baselines.checks import unmarked_runs
from perf_tests.core.rows import MaxBatchRow, Row
from perf_tests.core.row_values import judged_of, marked_runs_of, median_ips, rows_of, speed_of
from perf_tests.core.text import is_number
from perf_tests.report.plot_style import (BASELINE_STYLE, LOG_SCALE_RATIO, LONG_LABEL, MARKED_LABEL,
                                          MARKED_STYLE, SHAPE_DODGE_POINTS, WHISKER_LABEL,
                                          WHISKER_LEGEND_STYLE, WHISKER_STYLE, NoPlot)
from perf_tests.report.tables import by_devices, group_label, is_measured, ordered, shape

Rows = Mapping[str, Row | dict]   # results.json's `cases`, typed or as read

# -- the scaling plot ---------------------------------------------------------------------------

@dataclass
class _Series:
    name: str
    rows: list[tuple[str, Row]]  # ordered by devices, then nodes
    reference: bool


def _plot_series(sources: dict[str, Rows], references) -> list[_Series]:
    series = []
    for source, cases in sources.items():
        groups: dict[str, list] = defaultdict(list)
        for case_id, row in ordered(rows_of(cases)):
            groups[group_label(row)].append((case_id, row))
        for group, rows in groups.items():
            rows.sort(key=lambda item: by_devices(shape(item[1])))
            series.append(_Series(f"{source}: {group}" if source else group, rows,
                                  source in references))
    return series


def _ips_text(value: float) -> str:
    return f"{value:.0f}" if value >= 100 else f"{value:.3g}"


def scaling_plot(sources: dict[str, Rows], path: Path, title: str,
                 references=frozenset(), first_panel=None) -> Path:
    """The scaling figure (see `scaling_figure`) written as a PNG to `path`. Raises NoPlot,
    saying why, where no case was measured or matplotlib is not installed."""
    figure = scaling_figure(sources, title, references, first_panel)
    import matplotlib.pyplot as plt
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        figure.savefig(path, dpi=100)
    finally:
        plt.close(figure)
    return path


def scaling_figure(sources: dict[str, Rows], title: str, references=frozenset(),
                   first_panel=None):
    """Two panels: speedup over 1n1g against devices (log2 axes, with the ideal line and the
    baseline's speedup), and median img/s bars per node x device configuration (whiskers from
    the slowest to the fastest run the host did not mark, a cross for each run it marked,
    baseline markers; a log axis where the figures span orders of magnitude). Where no measured
    case ran on more than one device there is no speedup to draw: the throughput panel alone,
    its title saying why. One colour per source and precision/batch; sources named in
    `references` (published figures) are dashed and hatched. `first_panel(axis)`, where given,
    draws a panel before them (A/B's pair ratios) and returns its legend handles. Raises NoPlot
    where no case was measured or matplotlib is not installed."""
    series = _plot_series(sources, references)
    if not any(is_measured(row) for one in series for _, row in one.rows):
        raise NoPlot("no case was measured (every case skipped or failed)")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.lines import Line2D
        from matplotlib.patches import Patch
    except ImportError:
        raise NoPlot("matplotlib is not installed (pip install matplotlib)") from None
    colours = [plt.get_cmap("tab10").colors[index % 10] for index in range(len(series))]
    scaling = _has_scaling(series)
    panels = (2 if scaling else 1) + (1 if first_panel else 0)
    figure, axes = plt.subplots(1, panels, figsize=(7 * panels if panels > 1 else 8, 6),
                                squeeze=False)
    axes = list(axes[0])
    handles = first_panel(axes.pop(0)) if first_panel else []
    if scaling:
        scaling_handles, speed_baseline = _draw_scaling(axes.pop(0), series, colours)
        handles += scaling_handles
    else:
        handles += [Patch(color=colour, label=one.name) for one, colour in zip(series, colours)]
        speed_baseline = False
    bar_axis = axes.pop(0)
    bar_baseline, whiskers, marked = _draw_throughput(bar_axis, series, colours)
    if not scaling:
        bar_axis.set_title("Throughput\n(no scaling panel: speedup needs cases measured on "
                           "several devices)", fontsize=10)
    if speed_baseline or bar_baseline:
        handles.append(Line2D([], [], label="baseline", **BASELINE_STYLE))
    if whiskers:
        handles.append(Line2D([], [], label=WHISKER_LABEL, **WHISKER_LEGEND_STYLE))
    if marked:
        handles.append(Line2D([], [], label=MARKED_LABEL, **MARKED_STYLE))
    if any(one.reference for one in series):
        handles.append(Patch(facecolor="white", edgecolor="grey", hatch="//",
                             label="published reference (hatched / dashed)"))
    columns = min(len(handles), 2 + 2 * (panels - 1))
    if columns > 2 and max(len(handle.get_label()) for handle in handles) > LONG_LABEL:
        columns -= 1   # long labels (a stack's image) would run past the figure's edges
    legend_rows = math.ceil(len(handles) / columns)
    figure.legend(handles=handles, loc="lower center", ncol=columns, fontsize=9, frameon=False)
    figure.suptitle(title, fontsize=13)
    figure.tight_layout(rect=(0, 0.035 * legend_rows + 0.02, 1, 1))
    return figure


def _speedup(row: Row) -> float | None:
    """The row's speedup over 1n1g; a one-device case's is 1 where the row does not say (an A/B
    side records none)."""
    value = speed_of(row).speedup
    if is_number(value) and value > 0:
        return value
    return 1.0 if row.devices == 1 else None


def _has_scaling(series: list[_Series]) -> bool:
    """Whether any measured case on more than one device has a speedup to draw."""
    return any(is_measured(row) and row.devices > 1 and _speedup(row) is not None
               for one in series for _, row in one.rows)


def _run_spread(row: Row) -> tuple[float, float] | None:
    """The slowest and the fastest of the row's runs (`runs_ips`) that the host did not mark
    (`marked_runs`), None with fewer than two."""
    runs = [value for value in unmarked_runs(row.runs_ips, marked_runs_of(row))
            if is_number(value) and value > 0]
    return (min(runs), max(runs)) if len(runs) > 1 else None


def _marked_runs(row: Row) -> list[float]:
    """The row's runs the host marked."""
    numbers = {int(number) for number in marked_runs_of(row)}
    return [value for number, value in enumerate(row.runs_ips, 1)
            if number in numbers and is_number(value) and value > 0]


def _draw_scaling(axis, series: list[_Series], colours: list) -> tuple[list, bool]:
    """Speedup against devices; returns the legend handles and whether a baseline speedup was
    drawn. One line point per device count (the fewest nodes); other node x device shapes of
    that count are diamonds set a little to the right, and where a count has several shapes
    the first is labelled on its left, the others on their right, so 1n2g and 2n1g stay apart.
    Baseline speedups are black ticks at their case's point, as in the legend."""
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator
    from matplotlib.transforms import offset_copy

    handles = []
    device_counts = {1}
    speedups = [1.0]
    baseline_drawn = other_shapes_drawn = False
    for one, colour in zip(series, colours):
        style = dict(color=colour, linestyle="--" if one.reference else "-",
                     marker="s" if one.reference else "o",
                     markerfacecolor="none" if one.reference else colour)
        handles.append(Line2D([], [], label=one.name, **style))
        points = [(row.devices, _speedup(row), case_id, row) for case_id, row in one.rows
                  if is_measured(row) and _speedup(row) is not None]
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
            base = judged_of(row).baseline_speedup
            if is_number(base) and base > 0 and count > 1:
                axis.plot([count], [base], transform=shifted, **BASELINE_STYLE)
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
    return handles, baseline_drawn


def _draw_throughput(axis, series: list[_Series], colours: list) -> tuple[bool, bool, bool]:
    """Median img/s per node x device configuration: one bar per series that has it, centred
    on the configuration's tick, a whisker from its slowest to its fastest run the host did not
    mark and a cross for each it marked, the baseline as a black bar across it, and the verdict
    written where a case has no measurement. Returns whether a baseline, a whisker and a marked
    run were drawn."""
    configurations = sorted({shape(row) for one in series for _, row in one.rows},
                            key=by_devices)
    present = {configuration: [index for index, one in enumerate(series)
                               if any(shape(row) == configuration for _, row in one.rows)]
               for configuration in configurations}
    width = 0.8 / max([len(indices) for indices in present.values()] + [1])
    label_bars = sum(len(one.rows) for one in series) <= 36
    values = [value for one in series for _, row in one.rows if is_measured(row)
              for value in (median_ips(row), judged_of(row).baseline_ips, *(_run_spread(row) or ()),
                            *_marked_runs(row))
              if is_number(value) and value > 0]
    log_scale = max(values) / min(values) > LOG_SCALE_RATIO
    if log_scale:
        axis.set_yscale("log")
    floor = min(values) / 3 if log_scale else 0.0
    top = max(values) * (4 if log_scale else 1.18)
    axis_points = axis.get_position().height * axis.figure.get_figheight() * 72

    def height(value: float) -> float:
        """The bar's height up to `value`, in points (about: the layout is not final)."""
        share = math.log(value / floor) / math.log(top / floor) if log_scale else value / top
        return share * axis_points

    baseline_drawn = whisker_drawn = marked_drawn = False
    for index, (one, colour) in enumerate(zip(series, colours)):
        for _, row in one.rows:
            indices = present[shape(row)]
            x = configurations.index(shape(row)) \
                + (indices.index(index) - (len(indices) - 1) / 2) * width
            if not is_measured(row):
                axis.text(x, floor, f" {row.verdict or 'no result'}", rotation=90,
                          ha="center", va="bottom", fontsize=7, color=colour)
                continue
            value = median_ips(row)
            axis.bar(x, value - floor, width * 0.92, bottom=floor, color=colour,
                     alpha=0.45 if one.reference else 0.9,
                     hatch="//" if one.reference else None, edgecolor=colour)
            spread = _run_spread(row)
            if spread:
                low, high = min(spread[0], value), max(spread[1], value)
                axis.errorbar([x], [value], yerr=[[value - low], [high - value]], **WHISKER_STYLE)
                whisker_drawn = True
            marked = _marked_runs(row)
            if marked:
                axis.plot([x] * len(marked), marked, **MARKED_STYLE)
                marked_drawn = True
            base = judged_of(row).baseline_ips
            has_base = is_number(base) and base > 0
            if has_base:
                axis.hlines(base, x - width / 2, x + width / 2, colors="black", linewidth=2.5,
                            zorder=4)
                baseline_drawn = True
            if label_bars:
                _label_bar(axis, x, value, spread is not None,
                           room=height(value) if has_base and base > value else 0.0)
    axis.set_xticks(range(len(configurations)))
    axis.set_xticklabels([f"{n}n{g}g\n{n * g} dev" for n, g in configurations], fontsize=8)
    axis.set_xlim(-0.6, len(configurations) - 0.4)
    axis.set_ylim(floor or 0, top)
    axis.set_xlabel("configuration (nodes x devices per node)")
    axis.set_ylabel("median images/s over all devices" + (", log scale" if log_scale else ""))
    axis.set_title("Throughput")
    axis.grid(True, axis="y", alpha=0.3)
    return baseline_drawn, whisker_drawn, marked_drawn


def _label_bar(axis, x: float, value: float, whisker: bool, room: float) -> None:
    """The median written at the bar's top, beside the whisker where there is one: above the
    bar, or inside it where the baseline mark sits above the bar and the bar has `room` (its
    height in points) for the text, so that no mark strikes it through. Where a short bar's
    baseline mark crosses the text, the text's white box breaks the mark there."""
    text = _ips_text(value)
    inside = room > 4.5 * len(text) + 10   # 7 pt digits, the offset and the box around them
    axis.annotate(text, (x, value), textcoords="offset points",
                  xytext=(4 if whisker else 0, -4 if inside else 4),
                  ha="left" if whisker else "center", va="top" if inside else "bottom",
                  rotation=90, fontsize=7, zorder=5,
                  bbox=dict(boxstyle="square,pad=0.1", facecolor="white", edgecolor="none",
                            alpha=0.8))


# -- the batch plot -----------------------------------------------------------------------------

def batch_series(cases: Rows) -> dict[str, list[tuple[int, float | None]]]:
    """Per topology and precision, (batch, img/s) in batch order, img/s None where the batch ran
    out of memory: from a batch sweep's cases and from the probes of max batch searches."""
    series: dict[str, dict[int, float | None]] = defaultdict(dict)
    for _, row in ordered(rows_of(cases)):
        name = f"{row.nodes}n{row.gpus_per_node}g {row.precision}"
        if isinstance(row, MaxBatchRow):
            for probe in row.probes:
                if probe.get("outcome") in ("ok", "oom"):
                    series[name][probe["batch"]] = probe.get("ips") if probe["outcome"] == "ok" \
                        else None
        elif is_measured(row) or row.verdict == "oom":
            series[name][row.batch_per_device] = median_ips(row) if is_measured(row) else None
    return {name: sorted(points.items()) for name, points in series.items()}


def batch_plot(cases: Rows, path: Path, title: str) -> Path | None:
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


def throughput_figures(rows: Rows, folder: Path, hardware: str,
                       sources: dict[str, Rows] | None = None, first_panel=None
                       ) -> tuple[list[Path], list[str]]:
    """The throughput section's figures (an A/B session's too, its `sources` a series per
    stack, its pair ratios the `first_panel`): scaling.png and batch.png, and a line for each
    that could not be drawn."""
    title = f"ResNet50 v1.5 on {hardware}"
    written, notes = [], []
    # Ranks that shared devices (--perf-set share-devices=on) drew no point of a real topology.
    rows = {case_id: row for case_id, row in rows_of(rows).items()
            if not judged_of(row).shared_devices}
    try:
        written.append(scaling_plot(sources or {"": rows}, folder / "scaling.png", title,
                                    first_panel=first_panel))
    except NoPlot as why:
        notes.append(f"no scaling plot: {why}")
    batches = batch_plot(rows, folder / "batch.png", f"{title}: img/s by batch")
    return written + ([batches] if batches else []), notes
