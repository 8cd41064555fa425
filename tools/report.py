"""Reports from results files: DLPerf-style Markdown tables and the scaling plot, or a comparison.

Each input is a session's `results.json`, an extracted-logs JSON from tools/extract_logs.py
(`{"rn50": {"1n8g": {"median_speed": ...}}}`) or a baseline file; each becomes one series,
labelled by its `--label` (in input order) or its file name. Extracted logs do not say their
precision: a label that names one (`--label ngc-fp32`) gives it. `--published NAME[,NAME]` adds
the published reference figures of tools/published/NAME.json beside them (they ship with the
package: an installed suite has them too). Time-to-train
rows (`..._ttt` cases, e.g. `--published ngc-pytorch-time-to-train`) go to a table of their own,
`time_to_train.md`, and a plot of top-1 against time, `time_to_train.png`.

    python3 -m tools.report perf_results/20261122-023119/results.json
    python3 -m tools.report results.json result/pytorch_result.json --label mine \\
        --label ngc-fp32 --published dlperf-ngc-pytorch,dlperf-mindspore
    python3 -m tools.report --compare old/results.json new/results.json
    python3 -m tools.report --history perf_results/    # step changes, as tools.history

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
import json
import re
import sys
from pathlib import Path

from perf_tests.baselines.file import COMPARABLE_SETTINGS, BaselineError, load_baseline_file
from perf_tests.case_result import AB, TIME_TO_TRAIN, rows_of
from perf_tests.cases import TOPOLOGY, Case
from perf_tests.differences import WORKLOAD_SETTINGS, environment_diff, settings_diff
from perf_tests.host_marks import marked_text, unmarked_runs
from perf_tests.report import time_to_train
from perf_tests.report.ab import pair_ratio_panel, plot_sources
from perf_tests.report.plots import NoPlot, scaling_plot, top1_plot
from perf_tests.report.session import markdown_report, terminal_table
from perf_tests.report.tables import (Source, document_notes, ips_or_verdict, is_measured,
                                      markdown_sources_report, ordered)
from perf_tests.stats import mann_whitney_less
from perf_tests.text import aligned, formatted, markdown_lines
from perf_tests.verdicts import ALPHA, mann_whitney_decides
from rn50_model.config import PRECISIONS
from tools import history
from tools.cli import OneLineParser, tool_command
from tools.inputs import InputError, check_rows, read_json, refused

PROG = tool_command(__file__)
TIME_TO_TRAIN_FIELDS = ("time_to_train_s", "top1", "epochs", "reached_target", "target_top1",
                        "curve")
PUBLISHED_DIR = Path(__file__).resolve().parent / "published"   # package data (pyproject.toml)
# What a comparison names when B's cases ran otherwise than A's: what is measured (a baseline's
# comparable settings) and how it runs (the workload settings a failure line names).
COMPARED_SETTINGS = COMPARABLE_SETTINGS + WORKLOAD_SETTINGS
EXTRACTED_MODEL_KEY = "rn50"
SHAPES = ("a results.json (with 'cases'), an extracted-logs JSON (with 'rn50') or a baseline "
          "file (with 'entries')")


def precision_in(label: str) -> str | None:
    """The one precision a label names as a word ('ngc-fp32' -> 'fp32'), else None."""
    named = {word for word in re.split(r"[^a-z0-9]+", label.lower()) if word in PRECISIONS}
    return named.pop() if len(named) == 1 else None


def results_source(path: Path, document: dict, label: str) -> Source:
    environment = document.get("environment")
    return Source(label, check_rows(path, document["cases"]),
                  [f"From `{path}` ({document.get('hardware', 'unknown hardware')})."]
                  + document_notes(document), hardware=document.get("hardware"),
                  environment=environment if isinstance(environment, dict) else {})


def extracted_source(path: Path, document: dict, label: str) -> Source:
    """tools/extract_logs.py's `{"rn50": {"1n8g": {...}}}` as results rows."""
    configs = document[EXTRACTED_MODEL_KEY]
    if not isinstance(configs, dict):
        raise InputError(f"input {path} has '{EXTRACTED_MODEL_KEY}' that is not an object of "
                         "<N>n<G>g configurations; regenerate it with python3 -m "
                         "tools.extract_logs")
    precision = precision_in(label)
    cases = {}
    for config, numbers in configs.items():
        match = TOPOLOGY.fullmatch(config)
        if not match or not isinstance(numbers, dict):
            raise InputError(f"input {path} has configuration {config!r}, not <N>n<G>g with an "
                             "object of speeds; regenerate it with python3 -m "
                             "tools.extract_logs")
        batch = numbers.get("batch_size_per_device")
        row = {"nodes": int(match["nodes"]), "gpus_per_node": int(match["gpus_per_node"]),
               "batch_per_device": batch, "precision": precision,
               "median_ips": numbers.get("median_speed"), "mean_ips": numbers.get("average_speed"),
               "speedup": numbers.get("speedup")}
        suffix = f"{precision}_b{batch}" if precision else f"b{batch}"
        cases[f"{config}_{suffix}"] = row
    notes = [f"Extracted from logs: `{path}`"
             + (f"; precision {precision} from the label." if precision
                else "; precision not stated (name it in --label, e.g. ngc-fp32).")]
    return Source(label, check_rows(path, cases), notes)


def baseline_source(path: Path, label: str, reference: bool = False) -> Source:
    """A baseline file (or published figures, which share its schema) as results rows."""
    try:
        baseline = load_baseline_file(path)
    except BaselineError as error:
        raise InputError(str(error)) from None
    cases = {}
    for case_id in baseline.entries:
        case, entry = Case.parse(case_id), baseline.entry(case_id)
        cases[case_id] = {"nodes": case.nodes, "gpus_per_node": case.gpus_per_node,
                          "batch_per_device": case.batch_per_device, "precision": case.precision,
                          "median_ips": entry.median_ips, "runs_ips": entry.runs_ips,
                          "speedup": baseline.speedup_of(case),
                          "settings": baseline.entries[case_id].get("settings") or {}}
        if case.time_to_train:
            raw = baseline.entries[case_id]
            cases[case_id].update({key: raw[key] for key in TIME_TO_TRAIN_FIELDS if key in raw})
    sources = sorted({entry.get("source") for entry in baseline.entries.values()} - {None})
    notes = [f"From `{path}` ({baseline.hardware or 'unknown hardware'})."]
    notes += [f"Source: {source}" for source in sources]
    # Entries recorded at different times may each have their own; only a shared one is the
    # file's.
    environments = {json.dumps(entry.get("environment") or {}, sort_keys=True)
                    for entry in baseline.entries.values()}
    environment = json.loads(environments.pop()) if len(environments) == 1 else {}
    return Source(label, cases, notes, reference=reference, hardware=baseline.hardware,
                  environment=environment)


def load_source(path: Path, label: str) -> Source:
    document = read_json(path, expected=SHAPES)
    if "cases" in document:
        return results_source(path, document, label)
    if "entries" in document:
        return baseline_source(path, label)
    if EXTRACTED_MODEL_KEY in document:
        return extracted_source(path, document, label)
    raise InputError(f"input {path} is none of {SHAPES}; pass one of those")


def published_names() -> list[str]:
    return sorted(path.stem for path in PUBLISHED_DIR.glob("*.json"))


def published_sources(names: str) -> list[Source]:
    sources = []
    for name in filter(None, (part.strip() for part in names.split(","))):
        path = PUBLISHED_DIR / f"{name}.json"
        if not path.is_file():
            raise InputError(f"--published {name}: no {path}; choose from "
                             f"{', '.join(published_names()) or 'none (the folder is empty)'}")
        sources.append(baseline_source(path, f"{name} (published)", reference=True))
    if not sources:
        raise InputError(f"--published {names!r} names nothing; choose from "
                         f"{', '.join(published_names())}")
    return sources


def default_label(path: Path) -> str:
    """The file name without `.json` (and extract_logs' `_result`); a results.json is named by
    its folder, the session's timestamp."""
    if path.name == "results.json" and path.parent.name:
        return path.parent.resolve().name
    return re.sub(r"_result$", "", path.stem)


def labelled(paths: list[Path], labels: list[str]) -> list[tuple[Path, str]]:
    if len(labels) > len(paths):
        raise InputError(f"{len(labels)} --label given for {len(paths)} input(s); give at most "
                         "one per input, in input order")
    chosen, seen = [], set()
    for number, path in enumerate(paths):
        label = labels[number] if number < len(labels) else default_label(path)
        base, copy = label, 1
        while label in seen:
            copy += 1
            label = f"{base} ({copy})"
        seen.add(label)
        chosen.append((path, label))
    return chosen


# -- the comparison --------------------------------------------------------------------------

def significance(first_runs, second_runs) -> str:
    """Whether B's runs differ from A's: the gate's own one-sided Mann-Whitney U test at its
    level, in each direction; '-' where either side has no runs."""
    first_runs, second_runs = list(first_runs or []), list(second_runs or [])
    if not first_runs or not second_runs:
        return "-"
    counts = f"{len(first_runs)}+{len(second_runs)} runs"
    if not mann_whitney_decides(second_runs, first_runs):
        return f"too few runs ({counts} cannot reach {ALPHA:.0%})"
    slower = mann_whitney_less(second_runs, first_runs)
    faster = mann_whitney_less(first_runs, second_runs)
    if slower <= ALPHA:
        return f"B slower (p {slower:.2g})"
    if faster <= ALPHA:
        return f"B faster (p {faster:.2g})"
    return f"not significant (p {min(slower, faster):.2g})"


def runs_differ(row: dict, other: dict) -> str:
    """Whether B's runs differ from A's (`significance`), on the runs the host did not mark where
    it marked some: a busy host's runs are not the stack's speed."""
    if not (row.get("marked_runs") or other.get("marked_runs")):
        return significance(row.get("runs_ips"), other.get("runs_ips"))
    clean = {name: unmarked_runs(one.get("runs_ips") or [], one.get("marked_runs"))
             for name, one in (("A", row), ("B", other))}
    unjudged = [name for name, runs in clean.items() if not runs]
    if unjudged:
        return f"not judged: the host marked every run of {' and '.join(unjudged)}"
    return f"{significance(clean['A'], clean['B'])}, unmarked runs"


def host_marked(row: dict, other: dict) -> str:
    """'B runs 1-3 of 3 (host-unfit)': the runs the host marked on either side; '-' for none."""
    sides = [f"{name} {text}" for name, one in (("A", row), ("B", other))
             if (text := marked_text(one))]
    return "; ".join(sides) or "-"


def comparison_rows(first: Source, second: Source) -> list[tuple[str, ...]]:
    """case, A img/s, B img/s, delta (B / A - 1), A speedup, B speedup, whether the runs
    differ and which runs the host marked, for ids in both."""
    rows = []
    for case_id, row in ordered(first.cases):
        other = second.cases.get(case_id)
        if other is None:
            continue
        delta, different = "-", "-"
        if is_measured(row) and is_measured(other):
            delta = f"{other['median_ips'] / row['median_ips'] - 1:+.2%}"
            different = runs_differ(row, other)
        rows.append((case_id, ips_or_verdict(row), ips_or_verdict(other), delta,
                     formatted(row.get("speedup"), "{:.2f}"),
                     formatted(other.get("speedup"), "{:.2f}"), different,
                     host_marked(row, other)))
    return rows


def settings_change(first: Source, second: Source) -> str:
    """'threads 2 -> 1' where every case in both changed alike; else each change with its cases
    ('threads 2 -> 1 (1n1g_fp32_b8); ...'); '' where none changed or no row records settings."""
    cases: dict[str, list[str]] = {}
    common = [case_id for case_id, _ in ordered(first.cases) if case_id in second.cases]
    for case_id in common:
        change = settings_diff(first.cases[case_id].get("settings") or {},
                               second.cases[case_id].get("settings") or {}, COMPARED_SETTINGS)
        if change:
            cases.setdefault(change, []).append(case_id)
    if len(cases) == 1 and len(next(iter(cases.values()))) == len(common):
        return next(iter(cases))
    return "; ".join(f"{change} ({', '.join(ids)})" for change, ids in cases.items())


def environment_line(first: Source, second: Source) -> str:
    """'environment: driver 580.159 -> 590.10; settings: threads 2 -> 1' (B against A), as the
    gate's failure line names them; or which side records no environment."""
    missing = [name for name, source in (("A", first), ("B", second)) if not source.environment]
    if missing:
        line = f"environment: {' and '.join(missing)} record{'s' if len(missing) == 1 else ''} none"
    else:
        line = f"environment: {environment_diff(first.environment, second.environment)}"
    settings = settings_change(first, second)
    return f"{line}; settings: {settings}" if settings else line


def compare(first: Source, second: Source, first_path: Path, second_path: Path,
            ) -> tuple[list[str], str]:
    """The printed table and the Markdown of B against A."""
    rows = comparison_rows(first, second)
    if not rows:
        raise InputError(f"no case id is in both {first_path} ({', '.join(first.cases) or 'none'})"
                         f" and {second_path} ({', '.join(second.cases) or 'none'}); compare "
                         "results of the same cases (for extracted logs, name the precision in "
                         "--label)")
    header = ("case", "A img/s", "B img/s", "delta (B/A-1)", "A speedup", "B speedup",
              f"runs differ (Mann-Whitney, {ALPHA:.0%})", "host-marked runs")
    if all(row[-1] == "-" for row in rows):   # the column only where the host marked a run
        header, rows = header[:-1], [row[:-1] for row in rows]
    only = [f"only in {name}: {', '.join(sorted(set(one.cases) - set(other.cases)))}"
            for name, one, other in (("A", first, second), ("B", second, first))
            if set(one.cases) - set(other.cases)]
    legend = [f"A = {first.label} (`{first_path}`)", f"B = {second.label} (`{second_path}`)",
              environment_line(first, second)]
    printed = legend + [""] + aligned([header] + rows, {0}) + ([""] + only if only else [])
    markdown = ([f"# ResNet50 v1.5 training throughput: {second.label} against {first.label}",
                 ""] + [f"- {line}" for line in legend] + [""]
                + markdown_lines(header, rows, set(range(1, len(header))))
                + ([""] + [f"{line}." for line in only] if only else []))
    return printed, "\n".join(markdown) + "\n"


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
                             "and name the step changes, as python3 -m tools.history "
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
    """--history: the case histories of tools/history.py, written to --output-dir (default:
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
            if rows_of(source.cases, AB):
                raise InputError(f"{path} is an A/B session: its own report compares its two "
                                 f"stacks (python3 -m tools.report {path}); --compare takes "
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
        ttt_cases = rows_of(source.cases, TIME_TO_TRAIN)
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
        throughput_only = {**document, "cases": sources[0].cases}
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


if __name__ == "__main__":
    sys.exit(main())
