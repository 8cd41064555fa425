"""Why a case got slower: its operator profile against the one stored with its baseline.

`--perf-explain` decides when a case gets a profiled run (rn50_model/op_profile.py, a launch of
its own after the timed runs): `auto` on a regression, and under `--perf-update-baselines` so that
the new baseline entry stores an `op_profile` (not where the checks refuse the entry: nothing
would store it); `always` for every measured case; `never` not at all. This module runs that
launch and puts the comparison of the two summaries (perf_tests/modes/explain/comparison.py: the
operators whose per-iteration time grew most, new and vanished operators, host against device)
into the failure output and results.json. A passing case in `auto` pays nothing.

Explain is a follow-up of the throughput mode rather than a mode with cases of its own: the
throughput mode calls `profile_operators` after each verdict, and its report section ends with
`explain/comparison.py`'s `markdown_section`.
"""
from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from perf_tests.context.context import Context
from perf_tests.core.cases import PROFILED_ITERATIONS, Case
from perf_tests.judging.verdicts import ERROR, OOM, REGRESSION, SKIPPED
from perf_tests.modes.explain.comparison import compare, explanation_lines, operator_ms
from perf_tests.results.case_result import CaseResult
from perf_tests.runs.launch import Launcher, LaunchRequest
from perf_tests.runs.protocol import run_rounds
from rn50_model.config import TrainConfig
from rn50_model.files import write_json_atomically
from rn50_model.op_profile import SUMMARY_FILE, TRACE_FILE

BASELINE_SUMMARY_FILE = "baseline_op_profile.json"
NOT_MEASURED = (SKIPPED, ERROR, OOM)


def wants_profile(mode: str, verdict: str, updating_baseline: bool) -> bool:
    """Whether a case with this verdict gets a profiled run under `mode`."""
    if mode == "never" or verdict in NOT_MEASURED:
        return False
    return mode == "always" or verdict == REGRESSION or updating_baseline


def profiled_config(config: TrainConfig) -> TrainConfig:
    return dataclasses.replace(config, profile_iters=PROFILED_ITERATIONS)


@dataclass
class ProfileRun:
    """What the profiled launch left: the summary and trace, or one line on why there is none."""
    folder: Path
    summary: dict | None
    message: str
    seconds: float

    @property
    def trace(self) -> Path:
        return self.folder / TRACE_FILE


def profile_operators(context: Context, case: Case, config: TrainConfig,
                      result: CaseResult, recording: bool) -> CaseResult:
    """The operator profile --perf-explain asks for (`wants_profile` decides when; `recording`:
    the case's baseline entry will be written, and stores it): one profiled launch after the
    timed runs, compared with the baseline entry's; its lines join a regression's, its figures
    the case's row."""
    settings = context.settings
    # The speed's own verdict: a case failed for its memory alone has no slowdown to explain.
    timed = result.row.throughput_verdict or result.verdict
    if not wants_profile(settings.explain, timed, recording):
        return result
    folder = context.results.path / case.case_id / "profile"
    request_for = context.workers.launch_requests(case, profiled_config(config),
                                                  folder / "config.json")
    context.progress(f"{case.case_id}: profiling operators ({timed})")
    profiled = run_profile(case, context.launcher, request_for, folder)
    baseline = result.baseline_entry.op_profile if result.baseline_entry else None
    explanation = explain(profiled, baseline, context.results.path, config.precision)
    return result.amended(explanation=explanation.lines if timed == REGRESSION else None,
                          **explanation.details)


def run_profile(case: Case, launcher: Launcher, request_for: Callable[..., LaunchRequest],
                folder: Path) -> ProfileRun:
    """One run of the worker with a profiled config (`request_for`'s) in `folder`, through the
    run loop as every run (its record beside it, `profile.json`). The device lock is the case's
    own: the measure skeleton holds it through the follow-up."""
    started = time.perf_counter()
    outcome = run_rounds(case, launcher, request_for, lambda index: folder, 1, 1).runs[-1]
    seconds = time.perf_counter() - started
    summary = (outcome.record or {}).get("op_profile")
    if outcome.outcome != "ok" or not summary:
        why = outcome.message.removeprefix("run 1: ") or "the worker wrote no operator profile"
        return ProfileRun(folder, None, why, seconds)
    return ProfileRun(folder, summary, "", seconds)



@dataclass
class Explanation:
    lines: list[str]  # for the failure output
    details: dict     # for the results.json row


def explain(profile: ProfileRun, baseline: dict | None, results_dir: Path,
            precision: str | None = None) -> Explanation:
    """Write the baseline's summary beside the current one and say what changed."""
    def relative(path: Path) -> str:
        try:
            return str(path.relative_to(results_dir))
        except ValueError:
            return str(path)

    details: dict = {"profile_dir": relative(profile.folder),
                     "profile_seconds": round(profile.seconds, 2)}
    if profile.summary is None:
        line = f"no operator profile: {profile.message} (logs in {profile.folder})"
        return Explanation([line], {"explain": {**details, "message": line}})
    details.update(trace=relative(profile.trace),
                   op_profile=relative(profile.folder / SUMMARY_FILE))
    if baseline is not None:
        write_json_atomically(profile.folder / BASELINE_SUMMARY_FILE, baseline)
        details["baseline_op_profile"] = relative(profile.folder / BASELINE_SUMMARY_FILE)
        details["operators"] = [
            {"operator": row.name, "baseline_ms": row.before_ms, "current_ms": row.after_ms}
            for row in compare(baseline, profile.summary).rows]
    else:
        details["operators"] = [{"operator": name, "baseline_ms": None, "current_ms": value}
                                for name, value in list(operator_ms(profile.summary).items())[:10]]
    lines = explanation_lines(profile.summary, baseline, profile.trace, precision)
    details["lines"] = lines
    return Explanation(lines, {"op_profile": profile.summary, "explain": details})

