"""Reports from results files: DLPerf-style Markdown tables and the scaling plot, or a comparison.

Each input is a session's `results.json`, an extracted-logs JSON from tools/extract_logs/
(`{"rn50": {"1n8g": {"median_speed": ...}}}`) or a baseline file; each becomes one series,
labelled by its `--label` (in input order) or its file name. Extracted logs do not say their
precision: a label that names one (`--label ngc-fp32`) gives it. `--published NAME[,NAME]` adds
the published reference figures of tools/published/NAME.json beside them (they ship with the
package: an installed suite has them too). Time-to-train
rows (`..._ttt` cases, e.g. `--published ngc-pytorch-time-to-train`) go to a table of their own,
`time_to_train.md`, and a plot of top-1 against time, `time_to_train.png`.

    rn50-perf report perf_results/20261122-023119/results.json
    rn50-perf report results.json result/pytorch_result.json --label mine \\
        --label ngc-fp32 --published dlperf-ngc-pytorch,dlperf-mindspore
    rn50-perf report --compare old/results.json new/results.json
    rn50-perf report --history perf_results/    # step changes, as tools.history.command

Written to `--output-dir` (default: the first input's folder): for one results.json `report.md`
and `scaling.png` (what the suite writes); for one other input `<name>_report.md` and
`<name>_scaling.png`; for several inputs or published figures `combined_report.md` and
`combined_scaling.png`; for `--compare` `comparison.md` and `comparison.png`, by default in the
current folder (never into a results folder). A comparison lists every case id present in both
files: A img/s, B img/s, delta = B / A - 1, both speedups and whether B's runs differ from A's
(the gate's one-sided Mann-Whitney U test at 1%, each way; on the runs the host did not mark,
where it marked some, and not at all where it marked every run of a side), with a column naming
the runs the host marked where it marked any, under the environment and settings diff of B
against A. A bad input is one line on stderr and exit status 2.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from perf_tests.core.cases import AB, TIME_TO_TRAIN
from perf_tests.report import time_to_train
from perf_tests.report.ab import pair_ratio_panel, plot_sources
from perf_tests.report.plot_style import NoPlot
from perf_tests.report.plots import scaling_plot
from perf_tests.report.tables import Source, markdown_sources_report
from perf_tests.report.time_to_train import top1_plot
from perf_tests.session.report import markdown_report, terminal_table
from tools.cli import OneLineParser
from tools.command import verb_command
from tools.history import command as history
from tools.inputs import InputError, checked_results, read_json, refused
from tools.report.compare import compare
from tools.report.sources import (PUBLISHED_DIR, labelled, load_source, published_names,
                                  published_sources)

PROG = verb_command("report")




















# -- the comparison --------------------------------------------------------------------------















# -- command line ----------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("inputs", nargs="*", type=Path, metavar="INPUT",
                        help="results.json, extracted-logs JSON or baseline file; one series each")
    parser.add_argument("--label", action="append", default=[],
                        help="series label, once per input in order (default: the file name; "
                             "a results.json is named by its folder)")
    parser.add_argument("--published", metavar="NAME[,NAME]",
                        help="add published reference figures from tools/published/ "
                             f"(available: {', '.join(published_names()) or 'none'})")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("A", "B"),
                        help="compare two inputs case by case: B img/s against A img/s")
    parser.add_argument("--output-dir", type=Path,
                        help="folder for the Markdown and the PNG (default: the first input's "
                             "folder; the current folder with --compare or only --published)")
    parser.add_argument("--title", help="title of the report and plot (default: ResNet50 v1.5 "
                                        "training throughput, with the hardware when it is one)")
    parser.add_argument("--history", action="store_true",
                        help="the inputs are sessions (results.json files, session folders or "
                             "folders of them), oldest first: write history.md and history.png "
                             "and name the step changes, as rn50-perf history "
                             "(default: off)")
    return parser


def default_title(sources: list[Source]) -> str:
    """Named after the hardware of every source: one name where they all share it, else each
    in input order ('hardware not stated' for extracted logs, which do not say)."""
    title = "ResNet50 v1.5 training throughput"
    if not any(source.hardware for source in sources):
        return title
    hardware = dict.fromkeys(source.hardware or "hardware not stated" for source in sources)
    return f"{title}: {' vs '.join(hardware)}"


def write_outputs(output_dir: Path, markdown_name: str, markdown: str, plot_name: str,
                  sources: list[Source], title: str, first_panel=None) -> list[Path]:
    try:
        output_dir.mkdir(parents=True, exist_ok=True)
        markdown_path = output_dir / markdown_name
        markdown_path.write_text(markdown)
        written = [markdown_path]
        written.append(scaling_plot(
            {source.label: source.cases for source in sources}, output_dir / plot_name, title,
            references={source.label for source in sources if source.reference},
            first_panel=first_panel))
    except OSError as error:
        raise InputError(f"cannot write to {output_dir} ({error.strerror or error}); pass a "
                         "writable --output-dir") from None
    except NoPlot as why:
        print(f"{PROG}: no plot written: {why}", file=sys.stderr)
    return written


def run_history(args: argparse.Namespace) -> list[Path]:
    """--history: the case histories of tools/history/command.py, written to --output-dir (default:
    the current folder), the step-change lines printed."""
    given = [flag for flag, value in (("--compare", args.compare), ("--label", args.label),
                                      ("--published", args.published), ("--title", args.title))
             if value]
    if given:
        raise InputError(f"--history takes results and --output-dir only, not {given[0]}; "
                         "drop it")
    if not args.inputs:
        raise InputError("--history needs sessions: results.json files, session folders or "
                         "folders of them, oldest first")
    lines, written = history.run(argparse.Namespace(inputs=args.inputs, baseline_file=None,
                                                    output_dir=args.output_dir or Path(".")))
    print("\n".join(lines))
    return written


def run(args: argparse.Namespace) -> list[Path]:
    if args.history:
        return run_history(args)
    if args.compare and args.inputs:
        raise InputError("give either inputs to report or --compare A B, not both")
    if args.compare and args.published:
        raise InputError("--published goes with a report, not --compare; to compare against "
                         f"published figures pass their file, e.g. --compare "
                         f"{PUBLISHED_DIR / 'dlperf-ngc-pytorch.json'} B")
    paths = list(args.compare or args.inputs)
    if not paths and not args.published:
        raise InputError("nothing to report; pass results.json or extracted-logs files, "
                         "--published NAME, or --compare A B")
    sources = [load_source(path, label) for path, label in labelled(paths, args.label)]
    published = published_sources(args.published) if args.published else []
    # A comparison belongs to neither input: results folders are never reused.
    output_dir = args.output_dir or (paths[0].parent if paths and not args.compare
                                     else Path("."))

    if args.compare:
        for path, source in zip(paths, sources):
            if any(row.kind == AB for row in source.cases.values()):
                raise InputError(f"{path} is an A/B session: its own report compares its two "
                                 f"stacks (rn50-perf report {path}); --compare takes "
                                 "sessions of one stack each")
        (first_path, first), (second_path, second) = zip(paths, sources)
        printed, markdown = compare(first, second, first_path, second_path)
        print("\n".join(printed))
        return write_outputs(output_dir, "comparison.md", markdown, "comparison.png",
                             sources, args.title or f"{second.label} against {first.label}")

    everything = sources + published
    written = write_time_to_train(everything, output_dir)
    everything = [source for source in everything if source.cases]
    if not everything:
        return written
    for source in everything:
        print(f"{source.label}:")
        print("\n".join("  " + line for line in terminal_table(source.cases)))
    title = args.title or default_title(everything)
    return written + write_throughput(args, paths, sources, everything, output_dir, title)


def write_time_to_train(sources: list[Source], output_dir: Path) -> list[Path]:
    """Takes the `_ttt` rows out of `sources` and writes their table and top-1 plot."""
    rows = {}
    for source in sources:
        ttt_cases = {case_id: row for case_id, row in source.cases.items()
                     if row.kind == TIME_TO_TRAIN}
        source.cases = {key: row for key, row in source.cases.items() if key not in ttt_cases}
        rows.update({f"{source.label}: {case_id}" if len(sources) > 1 else case_id: row
                     for case_id, row in ttt_cases.items()})
    if not rows:
        return []
    print("time to train:")
    print("\n".join("  " + line for line in time_to_train.terminal_table(rows)))
    notes = [note for source in sources for note in source.notes]
    markdown = "\n\n".join(["# ResNet50 v1.5 time to train", *notes,
                            time_to_train.markdown_section(rows, "Time to train")])
    try:
        output_dir.mkdir(parents=True, exist_ok=True)
        (output_dir / "time_to_train.md").write_text(markdown)
        plot = top1_plot(rows, output_dir / "time_to_train.png",
                         "ResNet50 v1.5 top-1 against time")
    except OSError as error:
        raise InputError(f"cannot write to {output_dir} ({error.strerror or error}); pass a "
                         "writable --output-dir") from None
    return [output_dir / "time_to_train.md"] + ([plot] if plot else [])


def write_throughput(args: argparse.Namespace, paths: list[Path], sources: list[Source],
                     everything: list[Source], output_dir: Path, title: str) -> list[Path]:
    if len(everything) > 1 or not paths or everything[0] is not sources[0]:
        return write_outputs(output_dir, "combined_report.md",
                             markdown_sources_report(title, everything), "combined_scaling.png",
                             everything, title)
    document = read_json(paths[0])
    if "cases" in document:
        # Exactly what the suite writes at the end of a session, re-rendered.
        throughput_only = {**checked_results(paths[0], document), "cases": sources[0].cases}
        # An A/B session's figure has a series per stack and its pair ratios, as the suite
        # draws it.
        sides = plot_sources(sources[0].cases) or {"": sources[0].cases}
        return write_outputs(output_dir, "report.md", markdown_report(throughput_only),
                             "scaling.png", [Source(side, rows) for side, rows in sides.items()],
                             args.title or
                             f"ResNet50 v1.5 on {document.get('hardware', 'unknown')}",
                             first_panel=pair_ratio_panel(sources[0].cases))
    return write_outputs(output_dir, f"{paths[0].stem}_report.md",
                         markdown_sources_report(title, sources),
                         f"{paths[0].stem}_scaling.png", sources, title)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        written = run(args)
    except InputError as error:
        return refused(PROG, error)
    print("wrote " + ", ".join(str(path) for path in written))
    return 0
