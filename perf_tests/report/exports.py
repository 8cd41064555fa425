"""A session's results in the formats CI systems and dashboards already read.

Every exporter reads a results.json document (or one case row of it), so what Jenkins, GitHub,
`pytest-benchmark compare`, github-action-benchmark and Bencher show is what the suite judged,
and each carries every measure its row's kind has (results/measures.py `measures_of`: img/s,
speedup, peak memory, energy, bus bandwidth, time to train, top-1...) with that measure's own
verdict, so a measure added to a kind's table reaches every format without a change here:

- JUnit properties per case (report/junit.py), for `--junitxml`;
- the Markdown report appended to GitHub's job summary (`append_step_summary`);
- the formats of `--perf-export FORMAT=PATH` (`EXPORT_FORMATS`): pytest-benchmark's JSON, built
  with pytest-benchmark's own `Metadata` and `Stats` from the timed measure's runs (seconds per
  image, so its `ops` is img/s; a time-to-train case's trainings), every measure in `extra_info`
  (`pytest_benchmark_document`); github-action-benchmark's `customBiggerIsBetter` and
  `customSmallerIsBetter` lists, an entry per measure of that direction; Bencher's metric
  format, a measure per slug.
"""
from __future__ import annotations

import contextlib
import json
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from perf_tests.core.rows import ABRow, Row, TimeToTrainRow
from perf_tests.core.row_values import rows_of
from perf_tests.core.text import seconds_text
from perf_tests.results.measures import MeasureValue, measures_of

TEST_NODE_ID = "perf_tests/test_resnet50_training.py::test_training_throughput"
GITHUB_STEP_SUMMARY = "GITHUB_STEP_SUMMARY"
# What a pytest-benchmark entry's extra_info carries from a case row beside its measures (the
# environment is the case's own: the session's header, the baseline's difference from it).
EXTRA_INFO_KEYS = ("verdict", "message", "cv", "efficiency", "environment_diff", "settings",
                   "nodes", "gpus_per_node", "precision", "batch_per_device", "image_size",
                   "data_backend", "reached_target", "runs_reached_target", "target_top1",
                   "ratio_ci", "pairs", "ratio_of_medians", "gradient_allreduce_s",
                   "baseline_update", "baseline_forced")


class ExportError(Exception):
    """An export that could not be written; one line naming the file and what to do."""


def measured_cases(document: dict) -> dict[str, Row]:
    """The cases with a figure of any measure (not skipped, oom or failed before a run ended),
    typed."""
    return {case_id: row for case_id, row in rows_of(document.get("cases") or {}).items()
            if measures_of(case_id, row)}


def converged_seconds(row: TimeToTrainRow) -> list[float]:
    """A time-to-train case's trainings that reached the target, in seconds each."""
    return [seconds for seconds in row.runs_time_to_train_s if seconds is not None]


def measured_runs(measured: MeasureValue) -> list[float]:
    """A measure's runs that have a figure (a training short of its target has no time)."""
    return [value for value in measured.runs if value is not None]


def measure_figures(measured: MeasureValue) -> dict:
    """A measure in a case, as pytest-benchmark's extra_info carries it."""
    return {"value": measured.value, "unit": measured.measure.unit,
            "runs": list(measured.runs), "baseline": measured.baseline,
            "delta": measured.delta, "tolerance": measured.tolerance,
            "verdict": measured.verdict, "gated": measured.measure.gated,
            "bigger_is_better": measured.measure.bigger_is_better,
            "band_is_absolute": measured.measure.band_is_absolute}


def write_text(path: Path, text: str, what: str, append: bool = False) -> Path:
    path = Path(path)
    try:
        if not path.parent.exists():
            path.parent.mkdir(parents=True)
        with open(path, "a" if append else "w") as handle:
            handle.write(text)
    except OSError as error:
        raise ExportError(f"{what} {path} could not be written ({error.strerror or error}); "
                          "pass a writable path") from None
    return path


def write_json(path: Path, document, what: str) -> Path:
    return write_text(path, json.dumps(document, indent=2) + "\n", what)


# -- GitHub job summary ---------------------------------------------------------------------------

def append_step_summary(path: str | Path, markdown: str) -> Path:
    """Append the session's report to the file GitHub Actions names in GITHUB_STEP_SUMMARY
    (other steps' summaries in it stay)."""
    return write_text(Path(path), markdown.rstrip("\n") + "\n\n", f"{GITHUB_STEP_SUMMARY} file",
                      append=True)


# -- pytest-benchmark -----------------------------------------------------------------------------

@dataclass
class BenchmarkedCase:
    """What pytest-benchmark's `Metadata` reads from its benchmark fixture, filled from a case."""
    name: str
    fullname: str
    group: str | None
    param: str
    params: dict
    extra_info: dict
    cprofile_stats: None = None
    has_error: bool = False


def images_per_run(row: Row) -> int:
    """Images one timed window processes on all devices: pytest-benchmark's iterations."""
    timed_iters = row.settings.get("timed_iters") or 1
    return timed_iters * row.batch_per_device * row.devices


def benchmark_rounds(row: Row) -> tuple[int, list[float], str]:
    """pytest-benchmark's iterations per round, the rounds in seconds, and what was timed: for
    a throughput case a round per run, each run's timed window divided into its images (so the
    stats are seconds per image and `ops` is img/s); for a time-to-train case a round per
    training that reached the target, its whole time (stats in seconds per training). A row
    with no timed runs (a max-batch search) has no rounds."""
    if isinstance(row, TimeToTrainRow):
        return 1, converged_seconds(row), "wall clock from the first step to the target top-1"
    iterations = images_per_run(row)
    return (iterations, [iterations / images_per_second for images_per_second in row.runs_ips],
            "wall clock between device synchronizes")


def benchmark_metadata(case_id: str, row: Row, environment: dict):
    """One case as a pytest-benchmark `Metadata`, a round per run (`benchmark_rounds`); its
    extra_info carries every measure (`measures`: slug -> value, unit, runs, baseline, delta,
    tolerance, verdict), as pytest-benchmark's tables time one figure only."""
    from pytest_benchmark.stats import Metadata

    settings = row.settings
    written = row.to_dict()   # as results.json holds it
    extra_info = {key: written[key] for key in EXTRA_INFO_KEYS if key in written}
    extra_info["measures"] = {measured.measure.slug: measure_figures(measured)
                              for measured in measures_of(case_id, row)}
    extra_info["environment"] = environment
    case = BenchmarkedCase(
        name=case_id, fullname=f"{TEST_NODE_ID}[{case_id}]", group=case_id, param=case_id,
        params={"perf_case": case_id}, extra_info=extra_info)
    iterations, rounds, timer = benchmark_rounds(row)
    metadata = Metadata(case, iterations=iterations, options={
        "runs": len(row.runs_ips), "warmup_iters": settings.get("warmup_iters"),
        "timed_iters": settings.get("timed_iters"), "timer": timer, "disable_gc": False})
    for seconds in rounds:
        metadata.update(seconds)
    return metadata


def pytest_benchmark_document(document: dict, repository: Path) -> dict:
    """The session as pytest-benchmark writes `--benchmark-json`: machine and commit info from
    pytest-benchmark's own functions, one benchmark per case with timed rounds. Each benchmark's
    group is its case id, so `pytest-benchmark compare A.json B.json` puts the sessions' figures
    for a case in one table."""
    import pytest_benchmark
    from pytest_benchmark.plugin import pytest_benchmark_generate_machine_info
    from pytest_benchmark.utils import get_commit_info

    machine_info = pytest_benchmark_generate_machine_info()
    machine_info["hardware"] = document.get("hardware", "unknown")
    with contextlib.chdir(repository):  # get_commit_info asks git about the working directory
        commit_info = get_commit_info()
    environment = document.get("environment") or {}
    benchmarks = [benchmark_metadata(case_id, row, environment).as_dict(include_data=True)
                  for case_id, row in sorted(measured_cases(document).items())
                  if benchmark_rounds(row)[1]]   # no training converged: none
    return {"machine_info": machine_info, "commit_info": commit_info, "benchmarks": benchmarks,
            "datetime": datetime.now(timezone.utc).isoformat(),
            "version": pytest_benchmark.__version__}


# -- dashboards -----------------------------------------------------------------------------------

def _case_text(row: Row) -> str:
    """What a dashboard entry's note says of its case: verdict, runs, an A/B interval, a
    training's convergence."""
    runs = row.runs_ips
    parts = [f"verdict {row.verdict or '-'}"] + ([f"{len(runs)} runs"] if runs else [])
    if isinstance(row, ABRow) and row.ratio is not None:
        interval = row.ratio_ci
        parts.append(f"candidate/reference {row.ratio:.3f}"
                     + (f" (95% CI {interval[0]:.3f}-{interval[1]:.3f})" if interval else "")
                     + f" over {row.pairs} pairs")
    if isinstance(row, TimeToTrainRow) and row.runs_time_to_train_s:
        converged = converged_seconds(row)
        parts.append(f"time to train {seconds_text(row.time_to_train_s)} "
                     f"({len(converged)} of {len(row.runs_time_to_train_s)} reached "
                     f"the target)" if row.time_to_train_s is not None
                     else "no run reached the target")
        if row.top1 is not None:
            parts.append(f"top-1 {row.top1:.2%}")
    return ", ".join(parts)


def _figure(value) -> str:
    return f"{value:.4g}" if isinstance(value, (int, float)) else str(value)


def _measure_text(measured: MeasureValue) -> str:
    """A dashboard entry's note on its measure: its own verdict, baseline, delta and band."""
    unit = measured.measure.unit
    parts = [f"{measured.measure.title}: verdict {measured.verdict or 'not judged'}"]
    if measured.baseline is not None:
        parts.append(f"baseline {_figure(measured.baseline)} {unit}")
    if measured.delta is not None:
        parts.append(f"delta {measured.delta:+.1%}")
    tolerance = measured.tolerance
    if isinstance(tolerance, (int, float)):   # an absolute band is in the unit: top-1's points
        parts.append(f"tolerance +-{_figure(tolerance)} {unit}"
                     if measured.measure.band_is_absolute else f"tolerance {tolerance:.1%}")
    return ", ".join(parts)


def entry_name(case_id: str, slug: str) -> str:
    """A dashboard series: `<case> <slug>`; the img/s keeps the bare case id, the series
    dashboards charted before they had other measures."""
    return case_id if slug == "throughput" else f"{case_id} {slug}"


def github_action_benchmark(document: dict, bigger_is_better: bool = True) -> list[dict]:
    """github-action-benchmark's `customBiggerIsBetter` input (or, `bigger_is_better` false,
    its `customSmallerIsBetter`): an entry per measure of that direction in each case, the
    median in its unit, the runs' standard deviation as its range, the measure's verdict,
    baseline, delta and band and the case's verdict in `extra`. A tool input charts one
    direction, so the two lists are two files (two steps of the action)."""
    entries = []
    for case_id, row in sorted(measured_cases(document).items()):
        for measured in measures_of(case_id, row):
            if measured.measure.bigger_is_better != bigger_is_better:
                continue
            runs = measured_runs(measured)
            entry = {"name": entry_name(case_id, measured.measure.slug),
                     "unit": measured.measure.unit, "value": measured.value}
            if runs:
                entry["range"] = f"± {statistics.stdev(runs) if len(runs) > 1 else 0.0:.4g}"
            entry["extra"] = f"{_measure_text(measured)}; case: {_case_text(row)}"
            entries.append(entry)
    return entries


def bencher_metric_format(document: dict) -> dict:
    """Bencher Metric Format: per case a measure per slug of its kind (`throughput`, Bencher's
    built-in, `speedup`, `peak-memory`, `time-to-train`, `top-1`...), the median with the lowest
    and highest run as its bounds where it has runs. Bencher creates a measure the first time
    its slug arrives; its thresholds gate each one."""
    metrics = {}
    for case_id, row in sorted(measured_cases(document).items()):
        measures = {}
        for measured in measures_of(case_id, row):
            runs = measured_runs(measured)
            measures[measured.measure.slug] = {"value": measured.value, **(
                {"lower_value": min(runs), "upper_value": max(runs)} if runs else {})}
        metrics[case_id] = measures
    return metrics


# FORMAT of --perf-export FORMAT=PATH -> its document, from results.json and the repository (whose
# commit pytest-benchmark's records).
EXPORT_FORMATS: dict[str, Callable[[dict, Path], object]] = {
    "pytest-benchmark": pytest_benchmark_document,
    "github-action-benchmark": lambda document, _: github_action_benchmark(document),
    "github-action-benchmark-smaller":
        lambda document, _: github_action_benchmark(document, bigger_is_better=False),
    "bencher": lambda document, _: bencher_metric_format(document)}


def write_export(format_name: str, path: Path, document: dict, repository: Path) -> Path:
    return write_json(path, EXPORT_FORMATS[format_name](document, repository),
                      f"--perf-export {format_name}")


@dataclass(frozen=True)
class ExportRequests:
    """Where this session's results go beyond its folder (from the command line and CI)."""
    exports: tuple[tuple[str, Path], ...] = ()
    step_summary: str | None = None  # the value of GITHUB_STEP_SUMMARY, where it is set


def write_exports(requests: ExportRequests, document: dict, markdown: str,
                  repository: Path) -> tuple[list[Path], list[str]]:
    """Everything requested: the paths written, and one line for each that could not be."""
    jobs = []
    if requests.step_summary:
        jobs.append(lambda: append_step_summary(requests.step_summary, markdown))
    for format_name, path in requests.exports:
        jobs.append(lambda format_name=format_name, path=path:
                    write_export(format_name, path, document, repository))
    written, errors = [], []
    for job in jobs:
        try:
            written.append(job())
        except ExportError as error:
            errors.append(str(error))
    return written, errors
