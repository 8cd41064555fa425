"""`gpu_check.py --measure DIR`: the first GPU hour in one command, within a budget (20 minutes
unless `--budget` says otherwise) on one GPU.

`plan()` is the fixed list of steps, each a command (a GPU tool of this repository, or the suite
through pytest) with its estimated seconds from a small cost model (measured on the first GPU
host), so that the plan's fit in the budget is arithmetic a CPU can check; `--steps` picks some
of them in an order of its own. `run_plan()` runs the steps in order, the order of what matters
most: each gets its own estimate where that much is left, more where the later steps' estimates
leave more, and is skipped where under half its estimate is left; it ends at that limit with
everything it started, and is recorded as `pass`, `FAIL` or `skipped` with its reason while the
rest go on. After every step DIR is rewritten with what is known so far, as at most 8 files
(`output_files`): summary.md, measure.json, measure.log, paths.json, baseline-results.json and
<hardware key>.json (the baseline file, to review and copy into baselines/). The steps' own
folders (run records and logs, the operator trace) stay in a scratch folder on the GPU host.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from perf_tests.cases import FULL
from perf_tests.mode_constants import PROFILED_ITERATIONS
from perf_tests.report.session import every_case_skipped
from perf_tests.runs.host import worker_environment
from perf_tests.runs.processes import ProcessTree, Started
from perf_tests.text import markdown_lines
from rn50_model.files import write_json_atomically
from tools.cuda_paths import (FAILED, IMAGE, PASSED, PATH_BATCH, PATH_ITERS, PATH_WARMUP,
                              SKIPPED, path_table, paths)
from tools.gpu_bench import (PEAK_DTYPE, PEAK_PROBE, baseline_options, mfu, parse_peaks,
                             percent_or, suite_command)
from tools.worker_runs import REPO_ROOT

BUDGET_S = 20 * 60
# The cost model: a worker launch by a GPU tool (torchrun, CUDA context, cudnn.benchmark's
# search), a run inside a suite session (the same, plus the host readings around its window and
# the record's assembly), a pytest session's own start (environment, collection, preflight),
# torch.compile's first compilation, a profiled run's trace, and the throughputs at 224 px. They
# size the plan only; no verdict reads them. Fitted to the GPU leases (docs/gpu-hours/), each
# figure the slower host's, so that no step's estimate is short on either:
# - H200, 2026-11-25: 15 path launches of 8 iterations took 321 s, one of them compiling; the
#   baselines step ran 13 suite runs (95 s of iterations at the medians) in 440 s with its
#   session: about 23 s a suite run.
# - H100, 2026-11-26: a suite run of 1n1g_amp_b256 took about 30 s, of which 120 iterations at
#   4,920 img/s are 6.2 s: about 24 s a suite run; the first torch.compile took 58 s.
# - H100, 2026-11-27: the same 15 path launches took 494 s (10 in 374 s, then 5 and 4 skipped
#   paths in 120 s): (494 - 60) / 15, about 29 s a tool's launch (the H200's was 17.5 s); its
#   explain step, planned at 82 s, took 72 s; the environment step took 13.8 s (8 s on the
#   H200 of 2026-11-25).
# - H200, 2026-11-28: a session of nine runs of amp b256 took 251 s, about 26 s a run; the
#   max-batch step took 79 s (3 probes: nothing ran out of memory by 1024) and the time-to-train
#   step 33 s; two runs of amp b256 in a session took 61 s on the host and 107 and 115 s with
#   the workers inside a bwrap image of the machine's own root; the environment step, planned at
#   5 s, was stopped there at 5 s.
# The throughputs are the slower card's where both were measured (the H100's amp b256 through
# the suite, its bf16 b256 from a plain loop, which the suite matches within 1%), else the
# H200's (fp32 b128, tf32 b256: not measured on the H100), so no step's estimate is short on
# either card; the H200 then finishes steps early, which the budget rule hands to later steps.
# docs/gpu.md (the estimates against the hours) and tests/test_gpu_measure.py hold each step's
# estimate against what it took in every GPU hour of docs/gpu-hours/.
STARTUP_S, SUITE_RUN_S, SESSION_S, COMPILE_S, PROFILE_EXTRA_S = 29.0, 24.0, 15.0, 60.0, 10.0
ENVIRONMENT_S = 20.0          # the slower host's 13.8 s, and room: it was stopped at 5 s
PEAKS_S = 20.0                # 8 and 9.8 s measured
# What a bwrap image added to a session of two runs (115 - 61 s), charged to one launch: the
# hour did not tell what the session's probes inside the image took from what its runs did.
IMAGE_EXTRA_S = 54.0
PLANNING_IPS = {"fp32": 1000, "tf32": 3180, "amp": 4920, "bf16": 3996}
LOADER_IPS = 1000             # the torch DataLoader decoding JPEGs on the host's cores
DATASET_S = 20.0              # generating the loader's JPEG set once
# The smoke time-to-train (4 classes, 32 px, <= 8 epochs) beyond its session and launch: the
# H200's whole step took 33 s, 55 s at the H100's launch cost (29 against 17.5 s a launch).
TIME_TO_TRAIN_S = 20.0
# The baselines keep the full profile's warm-up and timed iterations, so that a later
# `pytest perf_tests` compares with them; the run count is what the budget leaves (10 is the
# profile's for a baseline: record those when there is time).
BASELINE_CASES = tuple((precision, FULL.default_batch[precision])
                       for precision in ("fp32", "tf32", "amp", "bf16"))
BASELINE_RUNS = 3
HARNESS_PAIRS = 3
LOADER_WARMUP, LOADER_ITERS = 10, 50
# From amp b256 by doubling to the limit (256, 512, 1024), then bisecting 512..1024 by 128.
MAX_BATCH_STEP, MAX_BATCH_LIMIT, MAX_BATCH_PROBES = 128, 1024, 6

SUMMARY, MEASURE_JSON, LOG = "summary.md", "measure.json", "measure.log"
PATHS_JSON, BASELINE_RESULTS = "paths.json", "baseline-results.json"
LOG_TAIL_BYTES = 512 * 1024   # of each stream of each step: the log stays far below 16 MiB
# A step stopped at its limit gets this long to end what it started (a tool's own process tree,
# a suite session's runs) before everything left is killed.
STOP_GRACE_S = 30.0


class MeasureError(Exception):
    """DIR cannot be used; one line to act on."""


def output_files(hardware: str | None) -> tuple[str, ...]:
    """Every file DIR can hold, by name: at most 8."""
    return (SUMMARY, MEASURE_JSON, LOG, PATHS_JSON, BASELINE_RESULTS,
            f"{hardware or 'unknown-gpu'}.json")


@dataclass(frozen=True)
class CommandRun:
    """How one step's command ended."""
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool = False

    def last_line(self) -> str:
        lines = [line for line in (self.stderr or self.stdout).splitlines() if line.strip()]
        return lines[-1].strip() if lines else f"exit status {self.returncode}, no output"


@dataclass(frozen=True)
class StepResult:
    outcome: str                 # PASSED, FAILED or SKIPPED
    note: str                    # one line: the figures, or why not
    data: dict = field(default_factory=dict)      # into measure.json
    section: list[str] = field(default_factory=list)  # Markdown lines for summary.md
    name: str = ""
    seconds: float = 0.0


@dataclass
class Context:
    """What the steps share: DIR, the scratch folder, and the results so far."""
    out: Path
    scratch: Path
    devices: int = 1
    started_at: str = ""
    budget_s: float = BUDGET_S
    results: dict[str, StepResult] = field(default_factory=dict)

    def data(self, step: str) -> dict:
        result = self.results.get(step)
        return result.data if result and result.outcome == PASSED else {}

    @property
    def hardware(self) -> str | None:
        return self.data("environment").get("hardware")

    @property
    def baseline_file(self) -> Path:
        """DIR's baseline file; a scratch one where the hardware key is unknown."""
        return self.out / f"{self.hardware}.json" if self.hardware else \
            self.scratch / "no-hardware-key.json"


@dataclass(frozen=True)
class Step:
    name: str
    title: str
    estimate_s: float
    command: Callable[[Context], list[str]] | None     # None: computed from earlier steps
    read: Callable[[Context, CommandRun | None], StepResult]
    needs: Callable[[Context], str | None] = lambda context: None  # why it cannot run now


# -- the cost model ---------------------------------------------------------------------------

def run_s(precision: str, batch: int, iterations: int, ips: float | None = None,
          launch_s: float = STARTUP_S) -> float:
    """One worker launch by a GPU tool of `iterations` steps at `batch` images."""
    return launch_s + iterations * batch / (ips or PLANNING_IPS[precision])


def suite_run_s(precision: str, batch: int, iterations: int) -> float:
    """One run of a case inside a suite session."""
    return run_s(precision, batch, iterations, launch_s=SUITE_RUN_S)


def paths_s(devices: int) -> float:
    return sum(run_s(path.changes.get("precision", "amp"),
                     path.changes.get("batch_per_device", PATH_BATCH), PATH_WARMUP + PATH_ITERS)
               + (COMPILE_S if path.changes.get("compile") else 0.0)
               + (IMAGE_EXTRA_S if path.needs == IMAGE else 0.0)
               for path in paths(devices) if path.devices <= devices)


def baselines_s(runs: int) -> float:
    """The runs of each case, plus the profiled run that stores its operator profile."""
    full = FULL.warmup_iters + FULL.timed_iters
    return SESSION_S + sum(runs * suite_run_s(precision, batch, full) + PROFILE_EXTRA_S
                           + suite_run_s(precision, batch, FULL.warmup_iters + PROFILED_ITERATIONS)
                           for precision, batch in BASELINE_CASES)


def estimates(devices: int = 1, baseline_runs: int = BASELINE_RUNS) -> dict[str, float]:
    """Seconds per step, in the plan's order."""
    full = FULL.warmup_iters + FULL.timed_iters
    loader = LOADER_WARMUP + LOADER_ITERS
    return {
        "environment": ENVIRONMENT_S,
        "peaks": PEAKS_S,
        "paths": paths_s(devices),
        "baselines": baselines_s(baseline_runs),
        "mfu": 0.0,
        "harness": HARNESS_PAIRS * 2 * run_s("bf16", 256, full),
        "loader": run_s("bf16", 256, loader) + run_s("bf16", 256, loader, LOADER_IPS) + DATASET_S,
        "explain": SESSION_S + suite_run_s("bf16", 256, full) + PROFILE_EXTRA_S
        + suite_run_s("bf16", 256, FULL.warmup_iters + PROFILED_ITERATIONS),
        "max-batch": SESSION_S + MAX_BATCH_PROBES * suite_run_s("amp", MAX_BATCH_LIMIT, 8),
        "time-to-train": SESSION_S + SUITE_RUN_S + TIME_TO_TRAIN_S,
    }


def step_timeout(left_s: float, estimate_s: float, later_s: float) -> float | None:
    """What a step may take: the budget left after the later steps' estimates, and at least its
    own estimate where that much is left, since the steps come in the order of what matters
    most (a step is never skipped to keep time for a later one); None (skip it) where under
    half its estimate is left."""
    allowed = max(left_s - later_s, min(estimate_s, left_s))
    return allowed if allowed >= estimate_s / 2 else None


# -- reading what a step left ------------------------------------------------------------------

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
    found = read_json(folder / "results.json") or {}
    cases = found.get("cases", {})
    # A recording session judges each case against the old entry (no-baseline, the first
    # time), so its message asks for the baseline it has just recorded: say what was recorded.
    note = "; ".join(f"{case_id}: {row.get('median_ips', 0):.1f} img/s, baseline recorded "
                     f"({row['baseline_update']})" if row.get("baseline_update") else
                     row.get("message") or f"{case_id}: {row.get('verdict')}"
                     for case_id, row in cases.items()) or ran.last_line()
    if found.get("interrupted"):
        note += f"; interrupted in {found['interrupted'].get('in_case')}"
    data = {"returncode": ran.returncode, "cases": cases}
    if ran.returncode == 0 and every_case_skipped(cases):
        return StepResult(SKIPPED, note, data)
    rows = [(case_id, str(row.get("verdict")), str(row.get("message", "")))
            for case_id, row in cases.items()]
    section = markdown_lines(("case", "verdict", "message"), rows, set()) if rows else []
    for case_id, row in cases.items():
        explained = (row.get("explain") or {}).get("lines")
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
    cases = context.results["baselines"].data["cases"]
    rows, figures = [], {}
    for case_id, row in cases.items():
        precision, ips = row["precision"], row.get("median_ips")
        utilization = mfu(ips, precision, peaks)
        figures[case_id] = {"median_ips": ips, "peak_dtype": PEAK_DTYPE[precision],
                            "peak_tflops": peaks.get(PEAK_DTYPE[precision]), "mfu": utilization}
        rows.append((case_id, f"{ips:.0f}" if ips else str(row.get("verdict")),
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
    if not any(row.get("median_ips") for row in (cases or {}).values()):
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
        python_step("paths", "CUDA paths (gpu_check.py)", seconds["paths"],
                    lambda c: ["-m", "tools.gpu_check", "--output", c.scratch / PATHS_JSON],
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
                    lambda c: ["-m", "tools.bench_harness", "--device", "cuda",
                               "--precision", "bf16", "--batch", 256, "--image-size", 224,
                               "--warmup", FULL.warmup_iters, "--iters", FULL.timed_iters,
                               "--pairs", HARNESS_PAIRS, "--output", c.scratch / "harness.json"],
                    read_harness),
        python_step("loader", "torch DataLoader against synthetic data", seconds["loader"],
                    lambda c: ["-m", "tools.gpu_bench", "--skip",
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


# -- running the plan ---------------------------------------------------------------------------

Runner = Callable[[str, list[str], float], CommandRun]


def tail(path: Path) -> str:
    data = path.read_bytes() if path.exists() else b""
    return data[-LOG_TAIL_BYTES:].decode(errors="replace")


def stop_gently(started: Started) -> None:
    """SIGTERM to the step's process group, which the suite and the GPU tools turn into
    ending their own launches; ProcessTree kills whatever is left after that."""
    try:
        os.killpg(started.popen.pid, signal.SIGTERM)
        started.popen.wait(STOP_GRACE_S)
    except (ProcessLookupError, PermissionError, subprocess.TimeoutExpired):
        pass


def command_runner(scratch: Path, log: TextIO) -> Runner:
    """Runs a step's command with the tools' environment, ends it and everything it started at
    `timeout`, and appends what it printed to the log."""
    def run(name: str, command: list[str], timeout: float) -> CommandRun:
        folder = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=scratch))
        with ProcessTree() as tree:
            environment = {**worker_environment(REPO_ROOT), "PYTHONUNBUFFERED": "1"}
            started = tree.start(name, command, environment, REPO_ROOT, folder)
            waited = tree.wait(timeout)
            if waited.timed_out:
                stop_gently(started)
        ran = CommandRun(started.popen.returncode, tail(started.stdout_path),
                         tail(started.stderr_path), waited.timed_out)
        log.write(f"\n===== {name}: {' '.join(command)}\n===== exit status {ran.returncode}"
                  f"{', stopped at its time limit' if ran.timed_out else ''}\n{ran.stdout}"
                  f"\n----- stderr\n{ran.stderr}\n")
        log.flush()
        return ran
    return run


def run_step(step: Step, context: Context, timeout: float | None, run: Runner) -> StepResult:
    """One step, whatever happens in it: a step that raises is a FAIL with the reason."""
    began = time.monotonic()
    # A step computed from earlier ones costs nothing: only commands are skipped for time.
    reason = step.needs(context) if timeout is not None or not step.command else (
        f"no time left: under half of the about {step.estimate_s:.0f} s it needs remains "
        "in the budget")
    if reason:
        return StepResult(SKIPPED, reason, name=step.name)
    ran = None
    try:
        ran = run(step.name, step.command(context), timeout) if step.command else None
        result = step.read(context, ran)
    except Exception as error:  # a broken step is its own result; the others go on
        failed_command = ran is not None and ran.returncode != 0
        result = StepResult(FAILED, ran.last_line() if failed_command else
                            f"{type(error).__name__}: {error}".splitlines()[0])
    if ran is not None and ran.timed_out:
        result = dataclasses.replace(result, outcome=FAILED, note=(
            f"stopped after {timeout:.0f} s, its share of the budget; {result.note}"))
    return dataclasses.replace(result, name=step.name, seconds=time.monotonic() - began)


def run_plan(steps: list[Step], context: Context, run: Runner,
             clock: Callable[[], float] = time.monotonic) -> list[StepResult]:
    """Every step in order, DIR rewritten after each; returns their results."""
    start = clock()
    for index, step in enumerate(steps):
        later = sum(other.estimate_s for other in steps[index + 1:])
        timeout = step_timeout(context.budget_s - (clock() - start), step.estimate_s, later)
        print(f"[{index + 1}/{len(steps)}] {step.name}: {step.title} (about "
              f"{step.estimate_s:.0f} s)", flush=True)
        result = run_step(step, context, timeout, run)
        context.results[step.name] = result
        write_outputs(context, steps)
        print(f"    {result.outcome} in {result.seconds:.0f} s: {result.note}", flush=True)
    return [context.results[step.name] for step in steps]


# -- DIR ---------------------------------------------------------------------------------------

def steps_table(results: list[StepResult], steps: list[Step]) -> list[str]:
    estimate = {step.name: step.estimate_s for step in steps}
    rows = [(result.name, result.outcome, f"{result.seconds:.0f}",
             f"{estimate.get(result.name, 0):.0f}", result.note) for result in results]
    return markdown_lines(("step", "outcome", "seconds", "planned", "note"), rows, {2, 3})


def summary_lines(context: Context, steps: list[Step]) -> list[str]:
    found = context.data("environment")
    results = [context.results[step.name] for step in steps if step.name in context.results]
    lines = [f"# First GPU hour: {found.get('device', 'unknown device')} "
             f"({context.hardware or 'hardware key unknown'})", "",
             f"Started {context.started_at}; {context.devices} CUDA device(s); torch "
             f"{found.get('torch')}, CUDA {found.get('cuda')}, driver {found.get('driver')}.",
             "", "## Steps", "", *steps_table(results, steps)]
    for step in steps:
        result = context.results.get(step.name)
        if result and result.section:
            lines += ["", f"## {step.title}", "", *result.section]
    baseline = context.baseline_file
    lines += ["", "## Next", "", (
        f"- Review the baseline file `{baseline.name}` (recorded from {BASELINE_RUNS} runs a "
        f"case) and copy it into the repository: `cp {context.out.name}/{baseline.name} "
        f"baselines/`; record 10 runs a case with `--perf-update-baselines` when there is time."
        if baseline.parent == context.out and baseline.exists() else
        "- No baseline file was recorded: see the baselines step."),
              f"- Every figure: `{MEASURE_JSON}`; what each step printed: `{LOG}`; the steps' "
              f"own folders (run records, the operator trace) on the GPU host: "
              f"`{context.scratch}`."]
    return lines


def write_outputs(context: Context, steps: list[Step]) -> None:
    """summary.md and measure.json from the results so far."""
    document = {
        "schema_version": 1, "tool": "gpu_check.py --measure", "started_at": context.started_at,
        "budget_s": context.budget_s, "hardware": context.hardware, "devices": context.devices,
        "environment": context.data("environment"),
        "plan": [{"step": step.name, "title": step.title, "estimate_s": round(step.estimate_s)}
                 for step in steps],
        "files": list(output_files(context.hardware)),
        "steps": [{"step": result.name, "outcome": result.outcome,
                   "seconds": round(result.seconds, 1), "note": result.note,
                   "data": result.data} for result in context.results.values()]}
    write_json_atomically(context.out / MEASURE_JSON, document)
    (context.out / SUMMARY).write_text("\n".join(summary_lines(context, steps)) + "\n")


def new_folder(out: Path) -> None:
    """DIR: a folder that does not exist yet or is empty, never one with results in it."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise MeasureError(f"{out} already exists and is not an empty folder; pass a new one "
                           "(results are never overwritten)")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise MeasureError(f"{out} cannot be created ({error.strerror}); pass a writable "
                           "folder") from None


def measure(out: Path, devices: int,
            runner: Callable[[Path, TextIO], Runner] = command_runner,
            budget_s: float = BUDGET_S, only: list[str] | None = None) -> int:
    """The plan (or the steps `only` names) into `out` within `budget_s`; exit status 1 where
    a step failed."""
    out = Path(out).absolute()  # the steps run in the repository's root
    steps = plan(devices, only)
    new_folder(out)
    context = Context(out, Path(tempfile.mkdtemp(prefix="gpu-measure-")), devices,
                      time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), budget_s)
    planned = sum(step.estimate_s for step in steps)
    print(f"{len(steps)} steps, about {planned / 60:.1f} minutes planned against a "
          f"{budget_s / 60:.1f}-minute budget"
          + ("" if planned <= budget_s else ": they run in this order, and the last are "
             "skipped where the time runs out")
          + f"; into {out}, the steps' folders in {context.scratch}", flush=True)
    with (out / LOG).open("a") as log:
        results = run_plan(steps, context, runner(context.scratch, log))
    print("\n" + "\n".join(steps_table(results, steps)))
    failed = [result.name for result in results if result.outcome == FAILED]
    print(f"\nwrote {', '.join(sorted(path.name for path in out.iterdir()))} into {out}"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0
