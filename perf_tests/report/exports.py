"""A session's results in the formats CI systems and dashboards already read.

Every exporter reads a results.json document (or one case row of it), so what Jenkins, GitHub,
`pytest-benchmark compare`, github-action-benchmark and Bencher show is what the suite judged:

- JUnit properties per case (`junit_properties`), for `--junitxml`;
- the Markdown report appended to GitHub's job summary (`append_step_summary`);
- the formats of `--perf-export FORMAT=PATH` (`EXPORT_FORMATS`): pytest-benchmark's JSON, built
  with pytest-benchmark's own `Metadata` and `Stats` from the runs as seconds per image, so its
  `ops` is img/s (`pytest_benchmark_document`); github-action-benchmark's `customBiggerIsBetter`
  list and Bencher's metric format.

A time-to-train case (`..._ttt`) is judged on the time to reach its target top-1 and on that
top-1, not on img/s: every format carries those two, and pytest-benchmark's rounds are its
trainings, in seconds. An A/B case carries its paired ratio and interval beside the candidate's
img/s.
"""
from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from perf_tests.core.cases import TIME_TO_TRAIN, row_kind
from perf_tests.core.text import seconds_text

TEST_NODE_ID = "perf_tests/test_resnet50_training.py::test_training_throughput"
# Row keys shown as JUnit properties, in this order; a key the row lacks is left out.
JUNIT_KEYS = ("verdict", "median_ips", "runs", "cv", "baseline_ips", "delta", "tolerance",
              "speedup", "runs_ips", "time_to_train_s", "baseline_time_to_train_s",
              "reached_target", "top1", "target_top1", "ratio", "ratio_ci", "pairs",
              "peak_memory_bytes", "memory_delta", "joules_per_image", "busbw_gbps",
              "busbw_delta", "repro")
GITHUB_STEP_SUMMARY = "GITHUB_STEP_SUMMARY"
# What a pytest-benchmark entry's extra_info carries from a case row (the environment is the
# case's own: the session's header, the baseline's difference from it).
EXTRA_INFO_KEYS = ("verdict", "message", "median_ips", "runs_ips", "cv", "speedup", "efficiency",
                   "baseline_ips", "baseline_speedup", "delta", "tolerance", "environment_diff",
                   "settings", "nodes", "gpus_per_node", "precision", "batch_per_device",
                   "image_size", "data_backend", "time_to_train_s", "runs_time_to_train_s",
                   "reached_target", "runs_reached_target", "top1", "runs_top1", "target_top1",
                   "baseline_time_to_train_s", "baseline_top1", "ratio", "ratio_ci", "pairs",
                   "ratio_of_medians", "busbw_gbps", "gradient_allreduce_s")


class ExportError(Exception):
    """An export that could not be written; one line naming the file and what to do."""


def measured_cases(document: dict) -> dict[str, dict]:
    """The cases that have a median img/s (not skipped, oom or failed before a run ended)."""
    return {case_id: row for case_id, row in (document.get("cases") or {}).items()
            if isinstance(row.get("median_ips"), (int, float)) and row["median_ips"] > 0
            and row.get("runs_ips")}


def converged_seconds(row: dict) -> list[float]:
    """A time-to-train case's trainings that reached the target, in seconds each."""
    return [seconds for seconds in row.get("runs_time_to_train_s") or [] if seconds is not None]


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


# -- JUnit ----------------------------------------------------------------------------------------

def junit_properties(row: dict) -> list[tuple[str, str]]:
    """(name, value) pairs for a test's `user_properties`: pytest's --junitxml writes them as
    <property> elements under every junit_family, and pytest-xdist carries them to the
    controller with the report."""
    values = dict(row)
    if row.get("runs_ips"):
        values["runs"] = len(row["runs_ips"])
    else:
        values.pop("runs_ips", None)

    def text(value) -> str:
        if isinstance(value, list):   # runs_ips, ratio_ci: numbers separated by spaces
            return " ".join(text(item) for item in value)
        if isinstance(value, bool):
            return str(value).lower()
        return f"{value:.6g}" if isinstance(value, float) else str(value)

    return [(key, text(values[key])) for key in JUNIT_KEYS if values.get(key) is not None]


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


def images_per_run(row: dict) -> int:
    """Images one timed window processes on all devices: pytest-benchmark's iterations."""
    timed_iters = (row.get("settings") or {}).get("timed_iters") or 1
    return timed_iters * row["batch_per_device"] * row["nodes"] * row["gpus_per_node"]


def benchmark_rounds(case_id: str, row: dict) -> tuple[int, list[float], str]:
    """pytest-benchmark's iterations per round, the rounds in seconds, and what was timed: for
    a throughput case a round per run, each run's timed window divided into its images (so the
    stats are seconds per image and `ops` is img/s); for a time-to-train case a round per
    training that reached the target, its whole time (stats in seconds per training)."""
    if row_kind(case_id, row) == TIME_TO_TRAIN:
        return 1, converged_seconds(row), "wall clock from the first step to the target top-1"
    iterations = images_per_run(row)
    return (iterations, [iterations / images_per_second for images_per_second in row["runs_ips"]],
            "wall clock between device synchronizes")


def benchmark_metadata(case_id: str, row: dict, environment: dict):
    """One case as a pytest-benchmark `Metadata`, a round per run (`benchmark_rounds`)."""
    from pytest_benchmark.stats import Metadata

    settings = row.get("settings") or {}
    extra_info = {key: row[key] for key in EXTRA_INFO_KEYS if key in row}
    extra_info["environment"] = environment
    case = BenchmarkedCase(
        name=case_id, fullname=f"{TEST_NODE_ID}[{case_id}]", group=case_id, param=case_id,
        params={"perf_case": case_id}, extra_info=extra_info)
    iterations, rounds, timer = benchmark_rounds(case_id, row)
    metadata = Metadata(case, iterations=iterations, options={
        "runs": len(row["runs_ips"]), "warmup_iters": settings.get("warmup_iters"),
        "timed_iters": settings.get("timed_iters"), "timer": timer, "disable_gc": False})
    for seconds in rounds:
        metadata.update(seconds)
    return metadata


def pytest_benchmark_document(document: dict, repository: Path) -> dict:
    """The session as pytest-benchmark writes `--benchmark-json`: machine and commit info from
    pytest-benchmark's own functions, one benchmark per measured case. Each benchmark's group is
    its case id, so `pytest-benchmark compare A.json B.json` puts the sessions' figures for a
    case in one table."""
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
                  if benchmark_rounds(case_id, row)[1]]   # no training converged: none
    return {"machine_info": machine_info, "commit_info": commit_info, "benchmarks": benchmarks,
            "datetime": datetime.now(timezone.utc).isoformat(),
            "version": pytest_benchmark.__version__}


# -- dashboards -----------------------------------------------------------------------------------

def _extra_text(case_id: str, row: dict) -> str:
    parts = [f"verdict {row.get('verdict', '-')}", f"{len(row['runs_ips'])} runs"]
    if row.get("baseline_ips") is not None:
        parts.append(f"baseline {row['baseline_ips']:.2f} img/s")
    if row.get("delta") is not None:
        parts.append(f"delta {row['delta']:+.1%}")
    if row.get("ratio") is not None:
        interval = row.get("ratio_ci")
        parts.append(f"candidate/reference {row['ratio']:.3f}"
                     + (f" (95% CI {interval[0]:.3f}-{interval[1]:.3f})" if interval else "")
                     + f" over {row.get('pairs')} pairs")
    if row_kind(case_id, row) == TIME_TO_TRAIN and "runs_time_to_train_s" in row:
        converged = converged_seconds(row)
        parts.append(f"time to train {seconds_text(row['time_to_train_s'])} "
                     f"({len(converged)} of {len(row['runs_time_to_train_s'])} reached "
                     f"the target)" if row.get("time_to_train_s") is not None
                     else "no run reached the target")
        if row.get("top1") is not None:
            parts.append(f"top-1 {row['top1']:.2%}")
    return ", ".join(parts)


def github_action_benchmark(document: dict) -> list[dict]:
    """github-action-benchmark's `customBiggerIsBetter` input: one entry per measured case,
    the median img/s, the runs' standard deviation as its range. A time-to-train case adds an
    entry `<case> top-1` in %; its time to train (smaller is better, which a bigger-is-better
    list cannot chart) is in the extra text."""
    entries = []
    for case_id, row in sorted(measured_cases(document).items()):
        entries.append({"name": case_id, "unit": "img/s", "value": row["median_ips"],
                        "range": f"± {row.get('stdev_ips') or 0.0:.4g}",
                        "extra": _extra_text(case_id, row)})
        if row_kind(case_id, row) == TIME_TO_TRAIN and row.get("runs_top1"):
            top1 = [value * 100 for value in row["runs_top1"]]
            entries.append({"name": f"{case_id} top-1", "unit": "%", "value": row["top1"] * 100,
                            "range": f"{min(top1):.4g}-{max(top1):.4g}",
                            "extra": _extra_text(case_id, row)})
    return entries


def _measure(values: list[float], value: float) -> dict:
    return {"value": value, "lower_value": min(values), "upper_value": max(values)}


def bencher_metric_format(document: dict) -> dict:
    """Bencher Metric Format: per case the built-in `throughput` measure, the median with the
    slowest and fastest run as its bounds. A time-to-train case adds the measures
    `time-to-train` (seconds, over the trainings that reached the target) and `top-1` (%);
    Bencher creates a measure the first time its slug arrives."""
    metrics = {}
    for case_id, row in sorted(measured_cases(document).items()):
        measures = {"throughput": _measure(row["runs_ips"], row["median_ips"])}
        if row_kind(case_id, row) == TIME_TO_TRAIN:
            converged = converged_seconds(row)
            if converged and row.get("time_to_train_s") is not None:
                measures["time-to-train"] = _measure(converged, row["time_to_train_s"])
            if row.get("runs_top1"):
                measures["top-1"] = _measure([value * 100 for value in row["runs_top1"]],
                                             row["top1"] * 100)
        metrics[case_id] = measures
    return metrics


# FORMAT of --perf-export FORMAT=PATH -> its document, from results.json and the repository (whose
# commit pytest-benchmark's records).
EXPORT_FORMATS: dict[str, Callable[[dict, Path], object]] = {
    "pytest-benchmark": pytest_benchmark_document,
    "github-action-benchmark": lambda document, _: github_action_benchmark(document),
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
