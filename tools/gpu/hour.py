"""The first GPU hour's plan: its steps, what each run gives, and what each is expected to take (the
cost model fitted to the GPU hours), within a budget, so that no step is stopped for an estimate
that was short. `rn50-perf gpu-check --measure` runs it (measure.py); the steps are steps.py."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from perf_tests.core.cases import FULL, PROFILED_ITERATIONS
from tools.gpu.cuda_paths import (IMAGE, PASSED, PATH_BATCH, PATH_ITERS, PATH_WARMUP, paths)

BUDGET_S = 20 * 60


# The cost model: a worker launch by a GPU tool (its agent, CUDA context, cudnn.benchmark's
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
