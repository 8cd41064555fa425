"""The time-to-train section of the reports: NVIDIA's time-to-train table (time2train, throughput,
accuracy) with the gate's columns, in the terminal and in report.md with each run's top-1 per epoch
(rows of kind `time_to_train`, from results.json or tools/report/command.py's inputs), and its
figure: top-1 against wall-clock time."""
from __future__ import annotations

from pathlib import Path

from perf_tests.core.rows import Row
from perf_tests.core.row_values import rows_of
from perf_tests.core.text import aligned, formatted, markdown_lines, seconds_text
from perf_tests.judging.detectable import detects_text

TABLE_COLUMNS = ("case", "GPUs", "batch/GPU", "precision", "epochs", "time2train",
                 "throughput img/s", "top-1", "target", "baseline time2train",
                 "baseline top-1", "detects", "verdict")


def table_rows(cases: dict[str, dict] | dict[str, Row]) -> list[tuple[str, ...]]:
    """NVIDIA's time-to-train table (time2train, throughput, accuracy), plus the gate."""
    rows = []
    for case_id, row in sorted(rows_of(cases).items()):
        time_s = row.time_to_train_s
        time_text = (seconds_text(time_s) if isinstance(time_s, (int, float))
                     else "not reached" if row.reached_target is False else "-")
        rows.append((
            case_id, str(row.devices or "-"), str(row.batch_per_device),
            row.precision or "-", formatted(row.epochs, "{:g}"), time_text,
            formatted(row.median_ips, "{:.2f}"),
            formatted(row.top1, "{:.2%}"), formatted(row.target_top1, "{:.2%}"),
            formatted(row.baseline_time_to_train_s, "{:,.1f} s"),
            formatted(row.baseline_top1, "{:.2%}"), detects_text(row),
            row.verdict or "-"))
    return rows


def terminal_table(cases: dict[str, dict] | dict[str, Row]) -> list[str]:
    return aligned([TABLE_COLUMNS] + table_rows(cases), {0, 3, len(TABLE_COLUMNS) - 1})


def markdown_section(cases: dict[str, dict] | dict[str, Row],
                     title: str = "Time to train") -> str:
    rows = table_rows(cases)
    shown = [i for i, name in enumerate(TABLE_COLUMNS)
             if not (name.startswith("baseline") or name == "detects")
             or any(row[i] != "-" for row in rows)]
    header = tuple(TABLE_COLUMNS[i] for i in shown)
    lines = [f"## {title}", ""] + markdown_lines(
        header, [tuple(row[i] for i in shown) for row in rows],
        {n for n, name in enumerate(header) if name not in ("case", "precision", "verdict")})
    curves = [(case_id, row) for case_id, row in sorted(rows_of(cases).items()) if row.curve]
    for case_id, row in curves:
        lines += ["", f"### {case_id}: top-1 per epoch", "",
                  *markdown_lines(("run", "epoch", "seconds", "train loss", "top-1", "top-5",
                                   "img/s"),
                                  [(str(run), str(point["epoch"]), f"{point['seconds']:.1f}",
                                    f"{point['train_loss']:.3f}", f"{point['top1']:.2%}",
                                    f"{point['top5']:.2%}", f"{point['train_ips']:.1f}")
                                   for run, curve in enumerate(row.curve, 1)
                                   for point in curve], set(range(7)))]
    return "\n".join(lines) + "\n"


def top1_plot(cases: dict[str, dict] | dict[str, Row], path: Path, title: str) -> Path | None:
    """Top-1 against wall-clock time, one line per run, the target dashed; a published or
    baseline figure without a curve is a single marker. None where matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    figure, axis = plt.subplots(figsize=(9, 5.5))
    colours = plt.get_cmap("tab10").colors
    targets = set()
    for number, (case_id, row) in enumerate(sorted(rows_of(cases).items())):
        colour = colours[number % 10]
        for run, curve in enumerate(row.curve, 1):
            axis.plot([point["seconds"] for point in curve], [point["top1"] for point in curve],
                      marker="osD^v"[(run - 1) % 5], color=colour, alpha=0.85,
                      label=f"{case_id} run {run}")
        if not row.curve and isinstance(row.time_to_train_s, (int, float)):
            axis.plot([row.time_to_train_s], [row.top1 or 0], marker="s",
                      color=colour, linestyle="none", label=f"{case_id}")
        if isinstance(row.target_top1, (int, float)):
            targets.add(row.target_top1)
    for target in sorted(targets):
        axis.axhline(target, linestyle="--", color="grey")
        axis.annotate(f"target {target:.1%}", (0, target), textcoords="offset points",
                      xytext=(4, 4), fontsize=8, color="grey")
    axis.set_xlabel("wall-clock seconds from the first training step (evaluation included)")
    axis.set_ylabel("validation top-1")
    axis.set_ylim(0, 1.02)
    axis.grid(True, alpha=0.3)
    axis.set_title(title)
    if axis.get_legend_handles_labels()[0]:
        axis.legend(fontsize=8, loc="lower right")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
