"""`rn50-perf gpu-check --measure DIR`: the first GPU hour in one command, within a budget (20
minutes unless `--budget` says otherwise) on one GPU.

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
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from perf_tests.core.text import markdown_lines
from perf_tests.runs.host import worker_environment
from perf_tests.runs.processes import ProcessTree, Started
from rn50_model.files import write_json_atomically
from tools.cli import SUITE_ROOT
from tools.gpu.cuda_paths import (FAILED, SKIPPED)
from tools.gpu.hour import (BASELINE_RUNS, BUDGET_S, LOG, LOG_TAIL_BYTES, MEASURE_JSON,
                            STOP_GRACE_S, SUMMARY, CommandRun, Context, MeasureError, Step,
                            StepResult, output_files, step_timeout)
from tools.gpu.steps import (plan)

# -- the cost model ---------------------------------------------------------------------------













# -- reading what a step left ------------------------------------------------------------------





























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
            environment = {**worker_environment(SUITE_ROOT), "PYTHONUNBUFFERED": "1"}
            started = tree.start(name, command, environment, SUITE_ROOT, folder)
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
        "schema_version": 1, "tool": "rn50-perf gpu-check --measure",
        "started_at": context.started_at,
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
