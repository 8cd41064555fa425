"""The steps of the first GPU hour and what each reads of what it ran: the environment and the
peaks, every CUDA path, baselines, MFU, the harness ratio, the loader, explain, max batch and
time-to-train, each a command and a reader of its output (hour.py types them)."""
from __future__ import annotations

import dataclasses
import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from perf_tests.core.cases import FULL
from perf_tests.core.row_values import judged_of, median_ips, rows_of
from perf_tests.core.text import markdown_lines
from perf_tests.results.document import RESULTS_FILE, read_results
from perf_tests.session.report import every_case_skipped
from tools.gpu.bench import (PEAK_DTYPE, PEAK_PROBE, baseline_options, mfu, parse_peaks, percent_or,
                             suite_command)
from tools.gpu.cuda_paths import (FAILED, PASSED, SKIPPED, path_table)
from tools.gpu.hour import (BASELINE_CASES, BASELINE_RESULTS, BASELINE_RUNS, HARNESS_PAIRS,
                            LOADER_ITERS, LOADER_WARMUP, MAX_BATCH_LIMIT, MAX_BATCH_STEP,
                            PATHS_JSON, CommandRun, Context, MeasureError, Step, StepResult,
                            estimates)


def read_json(path: Path) -> dict | list | None:
    return json.loads(path.read_text()) if path.exists() else None


def copy_out(context: Context, source: Path, name: str) -> None:
    if source.exists():
        shutil.copyfile(source, context.out / name)


def read_environment(context: Context, ran: CommandRun) -> StepResult:
    found = json.loads(ran.stdout)
    return StepResult(PASSED, f"{found.get('device')}: torch {found.get('torch')}, CUDA "
                              f"{found.get('cuda')}, driver {found.get('driver')}; key "
                              f"{found.get('hardware')}", found)


def read_peaks(context: Context, ran: CommandRun) -> StepResult:
    peaks = parse_peaks(ran.stdout)
    rows = [(dtype, f"{value:.1f}") for dtype, value in peaks.items()]
    return StepResult(PASSED, ", ".join(f"{dtype} {value:.0f}" for dtype, value in peaks.items())
                      + " TFLOP/s", {"matmul_tflops": peaks},
                      markdown_lines(("dtype", "matmul TFLOP/s"), rows, {1}))


def read_paths(context: Context, ran: CommandRun) -> StepResult:
    rows = read_json(context.scratch / PATHS_JSON) or []
    copy_out(context, context.scratch / PATHS_JSON, PATHS_JSON)
    failed = [row["path"] for row in rows if row["outcome"] == FAILED]
    skipped = sum(row["outcome"] == SKIPPED for row in rows)
    note = (f"{len(rows) - len(failed) - skipped} passed, {skipped} skipped"
            + (f", failed: {', '.join(failed)}" if failed else ""))
    outcome = PASSED if ran.returncode == 0 and rows else FAILED
    if not rows:
        note = ran.last_line()
    brief = [{key: value for key, value in row.items() if key != "record"} for row in rows]
    return StepResult(outcome, note, {"rows": brief}, path_table(rows) if rows else [])


def suite_result(ran: CommandRun, folder: Path) -> StepResult:
    """A pytest session of the suite: its cases from results.json, its outcome from pytest's
    exit status (every case skipped: skipped, with the reasons)."""
    found = read_results(folder / RESULTS_FILE) if (folder / RESULTS_FILE).exists() else {}
    cases = found.get("cases", {})
    rows = rows_of(cases)
    # A recording session judges each case against the old entry (no-baseline, the first
    # time), so its message asks for the baseline it has just recorded: say what was recorded.
    note = "; ".join(f"{case_id}: {median_ips(row) or 0:.1f} img/s, baseline recorded "
                     f"({row.baseline_update})" if row.baseline_update else
                     row.message or f"{case_id}: {row.verdict}"
                     for case_id, row in rows.items()) or ran.last_line()
    if found.get("interrupted"):
        note += f"; interrupted in {found['interrupted'].get('in_case')}"
    data = {"returncode": ran.returncode, "cases": cases}
    if ran.returncode == 0 and every_case_skipped(cases):
        return StepResult(SKIPPED, note, data)
    lines = [(case_id, row.verdict, row.message) for case_id, row in rows.items()]
    section = markdown_lines(("case", "verdict", "message"), lines, set()) if lines else []
    for case_id, row in rows.items():
        explained = judged_of(row).explain.get("lines")
        if explained:
            section += ["", f"{case_id}, operator profile:", "",
                        *(f"    {line}" for line in explained)]
    return StepResult(PASSED if ran.returncode == 0 and cases else FAILED, note, data, section)


def suite_step(name: str, title: str, estimate_s: float, options: Callable[[Context], list],
               keep_results_as: str | None = None) -> Step:
    """A step that is one session of the suite, its results folder in the scratch folder."""
    def folder(context: Context) -> Path:
        return context.scratch / name

    def command(context: Context) -> list[str]:
        given = options(context)
        # The suite refuses a --perf-baseline-file that does not exist unless it records one:
        # where the baselines step wrote none, a later step reads the repository's default file.
        records = any(word.startswith("--perf-update-baselines") for word in given)
        baseline = (["--perf-baseline-file", str(context.baseline_file)]
                    if records or context.baseline_file.exists() else [])
        return suite_command(*given, *baseline, "--perf-results", str(folder(context)), "-rs")

    def read(context: Context, ran: CommandRun) -> StepResult:
        if keep_results_as:
            copy_out(context, folder(context) / "results.json", keep_results_as)
        return suite_result(ran, folder(context))
    return Step(name, title, estimate_s, command, read)


def read_mfu(context: Context, ran: None) -> StepResult:
    """img/s of each baseline case and its MFU against its own compute dtype's peak."""
    peaks = context.data("peaks")["matmul_tflops"]
    cases = rows_of(context.results["baselines"].data["cases"])
    rows, figures = [], {}
    for case_id, row in cases.items():
        precision, ips = row.precision, median_ips(row)
        utilization = mfu(ips, precision, peaks)
        figures[case_id] = {"median_ips": ips, "peak_dtype": PEAK_DTYPE[precision],
                            "peak_tflops": peaks.get(PEAK_DTYPE[precision]), "mfu": utilization}
        rows.append((case_id, f"{ips:.0f}" if ips else row.verdict,
                     PEAK_DTYPE[precision], f"{peaks.get(PEAK_DTYPE[precision], 0):.0f}",
                     percent_or(utilization, "-")))
    note = ", ".join(f"{case_id} {percent_or(figure['mfu'], '-')}"
                     for case_id, figure in figures.items())
    return StepResult(PASSED, f"MFU {note}", {"cases": figures},
                      markdown_lines(("case", "img/s", "peak dtype", "peak TFLOP/s", "MFU"),
                                     rows, {1, 3, 4}))


def mfu_needs(context: Context) -> str | None:
    if not context.data("peaks"):
        return "no matmul peaks: the peaks step did not pass"
    cases = (context.results.get("baselines") or StepResult(SKIPPED, "")).data.get("cases")
    if not any(median_ips(row) for row in rows_of(cases or {}).values()):
        return "no measured baseline case: see the baselines step"
    return None


def read_harness(context: Context, ran: CommandRun) -> StepResult:
    if ran.returncode != 0:
        return StepResult(FAILED, ran.last_line())
    found = read_json(context.scratch / "harness.json")
    ratio = found["ratio_of_medians"]
    note = (f"worker / bare loop {ratio:.3f} (ratio of medians, {len(found['bare_ips'])} "
            f"pairs; median pair ratio {found['median_pair_ratio']:.3f})"
            + ("; more than 1% overhead" if ratio < 0.99 else ""))
    rows = [(str(pair), f"{bare:.0f}", f"{worker:.0f}", f"{worker / bare:.3f}") for pair, (
        bare, worker) in enumerate(zip(found["bare_ips"], found["worker_ips"]), 1)]
    return StepResult(PASSED, note, found,
                      markdown_lines(("pair", "bare img/s", "worker img/s", "ratio"), rows,
                                     {0, 1, 2, 3}))


def read_loader(context: Context, ran: CommandRun) -> StepResult:
    found = (read_json(context.scratch / "loader.json") or {}).get("input") or {}
    if ran.returncode != 0 or set(found) != {"synthetic", "torch"}:
        return StepResult(FAILED, ran.last_line(), found)
    failed = [f"{backend}: {result['outcome']}: {result['message']}"
              for backend, result in found.items() if result["outcome"] != "ok"]
    if failed:
        return StepResult(FAILED, "; ".join(failed), found)
    synthetic, loader = found["synthetic"]["median_ips"], found["torch"]["median_ips"]
    workers = found["torch"]["settings"]["data_workers"]
    return StepResult(PASSED, f"torch loader {loader:.0f} img/s = {loader / synthetic:.0%} of "
                              f"synthetic {synthetic:.0f} img/s (bf16 b256, {workers} workers)",
                      found)


def python_step(name: str, title: str, estimate_s: float, arguments: Callable[[Context], list],
                read: Callable) -> Step:
    return Step(name, title, estimate_s,
                lambda context: [sys.executable, *map(str, arguments(context))], read)


def plan(devices: int = 1, only: list[str] | None = None) -> list[Step]:
    """The steps, in order: the cheap and independent first, the baselines before the steps
    that read them. `only`: these steps alone, in the order given (a short lease puts first
    what it needs most; a step whose inputs did not run is skipped with the reason)."""
    steps = all_steps(devices)
    if not only:
        return steps
    by_name = {step.name: step for step in steps}
    unknown = [name for name in only if name not in by_name]
    if unknown:
        raise MeasureError(f"--steps names no step {', '.join(unknown)}; the steps are "
                           f"{', '.join(by_name)}")
    return [by_name[name] for name in dict.fromkeys(only)]


def all_steps(devices: int) -> list[Step]:
    seconds = estimates(devices)
    full = ["--perf-profile", "full", "--perf-launcher", "local"]
    return [
        python_step("environment", "Environment", seconds["environment"],
                    lambda c: ["-m", "rn50_model.environment"], read_environment),
        python_step("peaks", "Matmul peaks per compute dtype", seconds["peaks"],
                    lambda c: ["-c", PEAK_PROBE], read_peaks),
        python_step("paths", "CUDA paths (rn50-perf gpu-check)", seconds["paths"],
                    lambda c: ["-m", "tools", "gpu-check", "--output", c.scratch / PATHS_JSON],
                    read_paths),
        dataclasses.replace(suite_step(
            "baselines", "1n1g baselines (full profile, synthetic, 224 px)",
            seconds["baselines"],
            lambda c: baseline_options(tuple(p for p, _ in BASELINE_CASES), runs=BASELINE_RUNS)
            + ["--perf-launcher", "local"], keep_results_as=BASELINE_RESULTS),
            needs=lambda c: None if c.hardware else "no hardware key: the environment step "
                                                    "did not pass"),
        Step("mfu", "img/s and MFU against the peak of each precision's compute dtype",
             seconds["mfu"], None, read_mfu, mfu_needs),
        python_step("harness", "Harness: the worker's timed window against a bare loop "
                               "(bf16 b256)", seconds["harness"],
                    lambda c: ["-m", "tools", "bench-harness", "--device", "cuda",
                               "--precision", "bf16", "--batch", 256, "--image-size", 224,
                               "--warmup", FULL.warmup_iters, "--iters", FULL.timed_iters,
                               "--pairs", HARNESS_PAIRS, "--output", c.scratch / "harness.json"],
                    read_harness),
        python_step("loader", "torch DataLoader against synthetic data", seconds["loader"],
                    lambda c: ["-m", "tools", "gpu-bench", "--skip",
                               "precisions,optimizations,baseline", "--runs", 1, "--warmup",
                               LOADER_WARMUP, "--iters", LOADER_ITERS, "--output",
                               c.scratch / "loader.json"], read_loader),
        suite_step("explain", "Explain: operator profile of 1n1g_bf16_b256 against the "
                              "baseline's", seconds["explain"],
                   lambda c: full + ["-k", "1n1g_bf16_b256", "--perf-precisions", "bf16",
                                     "--perf-runs", "1", "--perf-set", "max-runs=1",
                                     "--perf-explain", "always"]),
        suite_step("max-batch", "Largest amp batch at 224 px", seconds["max-batch"],
                   lambda c: full + ["-k", "1n1g_amp", "--perf-precisions", "amp",
                                     "--perf-find-max-batch", "--perf-set",
                                     f"batch-step={MAX_BATCH_STEP}", "--perf-set",
                                     f"max-batch-limit={MAX_BATCH_LIMIT}"]),
        suite_step("time-to-train", "Time-to-train, smoke-sized, torch loader",
                   seconds["time-to-train"],
                   lambda c: ["--perf-profile", "smoke", "--perf-launcher", "local",
                              "--perf-time-to-train", "--perf-data-backend", "torch", "-k",
                              "ttt", "--perf-runs", "1"]),
    ]
