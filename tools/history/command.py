"""A case's throughput across sessions: where it stepped up or down, and what changed there.

    rn50-perf history perf_results/                 # every session folder in it
    rn50-perf history old/results.json mid/ new/    # these sessions, in this order

Each input is a session's results.json, a session folder holding one, or a folder of session
folders (taken in the order of their `started_at`); the inputs are read in the order given,
oldest first. Written to `--output-dir` (default: the current folder): `history.png` (per case,
the median img/s of each session with its runs, a series per stack: the host or each container
image, the baseline's tolerance band, every verdict in the legend, the step changes drawn) and
`history.md` (a table per case and the step changes), and the step changes are printed, e.g.

    1n8g_amp_b256: step down of 8.1% at session 2026-11-20T10:02 (torch 2.11.0 -> 2.12.0)

A step is claimed once three sessions from it on hold the new level, and stays at its session as
sessions are added (tools/history/steps.py); before that it is printed `unconfirmed: 1 of the 3
sessions that confirm a step` and drawn dotted, and a confirmed step that the sessions since no
longer hold is printed withdrawn, with the level they hold, and not drawn.

A run the host marked (busy, throttled: `marked_runs`) measured the host, not the stack: the step
search takes each session's median of its unmarked runs and leaves out a session whose every run
was marked, so a few sessions on a busy host make no step of the stack; the sessions with marked
runs are named on a line of their own, and in the tables.

With `--baseline-file FILE`, each case's baseline lineage too (the entries refreshes replaced,
perf_tests/baselines/lineage.py), e.g.

    lineage of 1n8g_amp_b256: 6200.0 (2026-11-20) -> 6128.0 (2026-11-25) -> 6000.0 (2026-11-28)
    img/s, -3.2% across 2 refreshes: torch 2.11.0 -> 2.13.0

Step changes are found with ruptures' PELT, the exact search for the segmentation of a series
that minimises its within-segment squared error plus a penalty per change. The series is the
sessions' medians over the median of all of them; the penalty is BIC's, 2 sigma^2 ln(n), with
sigma the standard error of one session's median estimated from the runs' spread (1.2533 x the
robust cv / sqrt(runs), pooled over the sessions), so a change has to stand out from the noise
the runs themselves show. ruptures needs only NumPy and SciPy; MongoDB's e-divisive
(signal-processing-algorithms 2.1.6) pins numpy<2 and an old setuptools, which a GPU host's
stack cannot take. A/B cases (`--perf-candidate-*`) are left out, with one line saying how many
and from which sessions: their runs are a candidate stack's, paired with this stack's, not a
point of one stack's history. A bad input is one line on stderr and exit status 2.
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path

from perf_tests.baselines.file import BaselineError, load_baseline_file
from perf_tests.baselines.lineage import lineage_summary
from perf_tests.core.row_values import judged_of
from perf_tests.core.text import formatted, markdown_lines
from perf_tests.judging.host_marks import marked_text
from perf_tests.report.plot_style import MARKED_STYLE, verdict_colour
from tools.cli import OneLineParser
from tools.command import verb_command
from tools.history.series import (HOST_STACK, Point, case_histories, left_out_line, marked_lines,
                                  sessions_in)
from tools.history.steps import UNCONFIRMED, WITHDRAWN, Step, find_steps, step_search_problem
from tools.inputs import InputError, refused

PROG = verb_command("history")
# A series per stack (the host, each container image): its marker and line.
STACK_MARKERS = "osD^vPX*"
STACK_LINES = ("-", "--", ":", "-.")








# -- reading the sessions ---------------------------------------------------------------------















# -- step changes -----------------------------------------------------------------------------











# -- the report -------------------------------------------------------------------------------

def history_markdown(histories: dict[str, list[Point]], steps: dict[str, list[Step]],
                     unsearched: str | None = None, left_out: str | None = None) -> str:
    lines = ["# ResNet50 v1.5 training throughput: history", ""]
    if left_out:
        lines += [left_out[0].upper() + left_out[1:] + ".", ""]
    all_steps = [step for case_steps in steps.values() for step in case_steps]
    lines += ["## Step changes", ""]
    lines += [f"- {step.line}" for step in all_steps] or [unsearched or "None found."]
    marked = marked_lines(histories)
    lines += ([""] + [f"- {line}" for line in marked]) if marked else []
    header = ("session", "stack", "runs", "median img/s", "spread", "baseline", "delta",
              "verdict", "host-marked runs")
    for case_id, points in histories.items():
        rows = [(point.session.label, stack_label(point.stack),
                 str(len(point.runs)) if point.runs else "-",
                 formatted(point.median, "{:.2f}"), formatted(judged_of(point.row).cv, "{:.1%}"),
                 formatted(point.baseline, "{:.2f}"),
                 formatted(judged_of(point.row).delta, "{:+.1%}"), point.verdict,
                 marked_text(point.row) or "-")
                for point in points]
        lines += ["", f"## {case_id}", ""] + markdown_lines(header, rows, {2, 3, 4, 5, 6})
    return "\n".join(lines) + "\n"


def stack_label(stack: str) -> str:
    """How a series is named: `image a [bwrap: content sha256:61ff508ef14e]` for an image at
    /root/.cache/.../a (the last part of its path, and what tells it apart), the host's as it
    is."""
    if stack == HOST_STACK:
        return stack
    name, bracket, rest = stack.partition(" [")
    return f"image {name.rstrip('/').rsplit('/', 1)[-1]}{bracket}{rest}"


def legend_handles(points: list[Point], styles: dict[str, tuple[str, str]],
                   unconfirmed: bool = False) -> list:
    """A legend entry for every verdict and every series the panels show, and for each kind
    of mark they draw (an unconfirmed step where one is drawn)."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    verdicts = dict.fromkeys(point.verdict for point in points)
    handles = [Line2D([], [], marker="o", linestyle="none", color=verdict_colour(verdict),
                      markersize=8, label=f"verdict: {verdict}") for verdict in verdicts]
    handles += [Line2D([], [], marker=marker, linestyle=line, color="0.35", markersize=8,
                       markerfacecolor="white", label=stack_label(stack))
                for stack, (marker, line) in styles.items()]
    handles.append(Line2D([], [], marker=".", linestyle="none", color="black", alpha=0.4,
                          label="one run"))
    if any(point.marked_runs for point in points):
        handles.append(Line2D([], [], label="a run the host marked (left out of the steps)",
                              **MARKED_STYLE))
    if any(point.runs and not point.unmarked for point in points):
        handles.append(Line2D([], [], marker="o", linestyle="none", color="0.35",
                              markerfacecolor="none", markersize=8,
                              label="median of runs the host all marked"))
    handles += [Patch(facecolor="tab:green", alpha=0.12, label="baseline +- tolerance"),
                Line2D([], [], color="black", linewidth=1.5, label="baseline median"),
                Line2D([], [], color="tab:purple", linestyle="--", label="step change")]
    if unconfirmed:
        handles.append(Line2D([], [], color="tab:purple", linestyle=":",
                              label="step change, unconfirmed"))
    return handles


def history_plot(histories: dict[str, list[Point]], steps: dict[str, list[Step]],
                 path: Path) -> Path | None:
    """One panel per case: session on x, img/s on y; each run a small dot (a cross where the
    host marked it), the median a marker coloured by the verdict and shaped by the series (a
    stack: the host, or a container image), each series' medians of unmarked runs joined by its
    line, the baseline's band shaded, a step change a dashed line labelled with its size (an
    unconfirmed one dotted, a withdrawn one not drawn)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    every_point = [point for points in histories.values() for point in points]
    stacks = dict.fromkeys(point.stack for point in every_point)
    styles = {stack: (STACK_MARKERS[index % len(STACK_MARKERS)],
                      STACK_LINES[index % len(STACK_LINES)])
              for index, stack in enumerate(stacks)}
    handles = legend_handles(every_point, styles, any(
        step.state == UNCONFIRMED for case_steps in steps.values() for step in case_steps))
    count = len(histories)
    columns = min(count, 2)
    rows = math.ceil(count / columns)
    legend_columns = 2 if columns == 1 else 4
    legend_height = 0.3 * math.ceil(len(handles) / legend_columns) + 0.2  # inches
    height = 4.2 * rows + legend_height
    figure, axes = plt.subplots(rows, columns, figsize=(7.5 * columns, height), squeeze=False)
    for axis, (case_id, points) in zip(axes.flat, histories.items()):
        _draw_case(axis, case_id, points, steps.get(case_id, []), styles)
    for axis in list(axes.flat)[count:]:
        axis.set_visible(False)
    figure.legend(handles=handles, loc="lower center", ncol=legend_columns, fontsize=9,
                  frameon=False)
    figure.suptitle("ResNet50 v1.5 training throughput across sessions", fontsize=13)
    figure.tight_layout(rect=(0, legend_height / height, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def _draw_point(axis, x: int, point: Point, marker: str) -> None:
    """One session's band, baseline, runs (the marked ones crossed) and median."""
    baseline, tolerance = point.baseline, point.row.tolerance
    if baseline and tolerance:
        axis.fill_between([x - 0.4, x + 0.4], baseline * (1 - tolerance),
                          baseline * (1 + tolerance), color="tab:green", alpha=0.12, linewidth=0)
    if baseline:
        axis.hlines(baseline, x - 0.4, x + 0.4, colors="black", linewidth=1.5)
    marked = {int(number) for number in point.marked_runs}
    for number, value in enumerate(point.runs, 1):
        if number in marked:
            axis.plot([x], [value], **MARKED_STYLE)
        else:
            axis.plot([x], [value], ".", color="black", alpha=0.4)
    verdict = point.verdict
    colour = verdict_colour(verdict)
    if point.median:
        axis.plot([x], [point.median], marker=marker, markersize=9, linestyle="none",
                  color=colour, markeredgewidth=2,
                  markerfacecolor=colour if point.unmarked else "none")
    else:   # no runs: the series' marker on the axis, the verdict written above it
        axis.plot([x], [0], marker=marker, markersize=7, color=colour, markerfacecolor="none",
                  clip_on=False, transform=axis.get_xaxis_transform())
        axis.annotate(verdict, (x, 0), rotation=90, ha="center", va="bottom", fontsize=8,
                      color=colour, xycoords=("data", "axes fraction"), xytext=(0, 8),
                      textcoords="offset points")


def _draw_case(axis, case_id: str, points: list[Point], steps: list[Step],
               styles: dict[str, tuple[str, str]]) -> None:
    positions = range(len(points))
    for x, point in zip(positions, points):
        _draw_point(axis, x, point, styles[point.stack][0])
    for stack, (_, line) in styles.items():
        series = [(x, point.stack_median) for x, point in zip(positions, points)
                  if point.stack == stack and point.stack_median]
        axis.plot([x for x, _ in series], [value for _, value in series], linestyle=line,
                  color="0.35", linewidth=1, zorder=0)
    measured_positions = [x for x, point in zip(positions, points) if point.stack_median]
    for step in steps:
        if step.state == WITHDRAWN:   # listed with why; the level it claimed did not hold
            continue
        x = measured_positions[step.index] - 0.5
        unconfirmed = step.state == UNCONFIRMED
        axis.axvline(x, color="tab:purple", linestyle=":" if unconfirmed else "--")
        # An unconfirmed step is among the last sessions: its label goes left of its line,
        # below those of the confirmed steps.
        axis.annotate(f"{step.change:+.1%}" + " unconfirmed" * unconfirmed, (x, 1),
                      xycoords=("data", "axes fraction"),
                      xytext=(-4, -28) if unconfirmed else (4, -14),
                      textcoords="offset points", ha="right" if unconfirmed else "left",
                      color="tab:purple", fontsize=10, fontweight="bold")
    axis.set_xticks(list(positions))
    axis.set_xticklabels([point.session.label.replace("T", "\n") for point in points],
                         fontsize=8)
    axis.set_xlim(-0.6, len(points) - 0.4)
    # Headroom above the highest run or band for the step labels.
    highest = [value for point in points for value in point.runs]
    highest += [point.baseline * (1 + (point.row.tolerance or 0))
                for point in points if point.baseline]
    axis.set_ylim(0, max(highest + [1.0]) * 1.18)
    axis.set_title(case_id)
    axis.set_xlabel("session (start time, UTC)")
    axis.set_ylabel("img/s")
    axis.grid(True, axis="y", alpha=0.3)


# -- command line -----------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("inputs", nargs="+", type=Path, metavar="RESULTS",
                        help="results.json files, session folders or folders of them, oldest "
                             "first")
    parser.add_argument("--baseline-file", type=Path,
                        help="also show the lineage of its entries for these cases: the entries "
                             "refreshes replaced, and what changed across them (default: none)")
    parser.add_argument("--output-dir", type=Path, default=Path("."),
                        help="where history.md and history.png go (default: this folder)")
    return parser


def run(args: argparse.Namespace) -> tuple[list[str], list[Path]]:
    sessions = [session for argument in args.inputs for session in sessions_in(argument)]
    histories = case_histories(sessions)
    left_out = left_out_line(sessions)
    if not histories:
        why = (f"{left_out}; pass sessions measured without --perf-candidate-*" if left_out
               else "their sessions hold no case; pass sessions that measured some")
        raise InputError(f"no case of {', '.join(map(str, args.inputs))} has a history: {why}")
    unsearched = step_search_problem()
    steps = {} if unsearched else {case_id: find_steps(case_id, points)
                                   for case_id, points in histories.items()}
    lineages = baseline_lineages(args.baseline_file, histories) if args.baseline_file else []
    args.output_dir.mkdir(parents=True, exist_ok=True)
    markdown = args.output_dir / "history.md"
    markdown.write_text(history_markdown(histories, steps, unsearched, left_out)
                        + lineage_markdown(args.baseline_file, lineages))
    plot = history_plot(histories, steps, args.output_dir / "history.png")
    lines = [step.line for case_steps in steps.values() for step in case_steps]
    counted_sessions = len({point.session.path for points in histories.values()
                            for point in points})
    lines = lines or [unsearched or f"no step change in {counted_sessions} sessions"]
    lines += marked_lines(histories) + ([left_out] if left_out else []) + lineages
    return lines, [markdown] + ([plot] if plot else [])


def baseline_lineages(path: Path, histories: dict[str, list[Point]]) -> list[str]:
    """Each case's baseline lineage line (perf_tests/baselines/lineage.py), for the cases with a
    history and an entry that replaced others in `path`."""
    if not path.exists():
        raise InputError(f"baseline file {path} does not exist; check the path")
    try:
        entries = load_baseline_file(path).entries
    except BaselineError as error:
        raise InputError(str(error)) from None
    found = [lineage_summary(case_id, entries[case_id]) for case_id in histories
             if case_id in entries]
    return [f"lineage of {line}" for line in found if line]


def lineage_markdown(path: Path | None, lineages: list[str]) -> str:
    if path is None:
        return ""
    body = [f"- {line.removeprefix('lineage of ')}" for line in lineages] or [
        "No entry of these cases has replaced another yet."]
    return "\n".join(["", f"## Baseline lineage ({path})", "", *body]) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        lines, written = run(args)
    except InputError as error:
        return refused(PROG, error)
    for line in lines:
        print(line)
    print("wrote " + ", ".join(str(path) for path in written))
    return 0
