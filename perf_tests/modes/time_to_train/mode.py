"""Time-to-train cases (`--perf-time-to-train`, ids `..._ttt`): training to a target top-1.

Each run trains in fresh worker processes (`rn50_model.convergence` through the worker) until
the validation top-1 reaches the target or the epochs run out. A case gates on two things
against its baseline entry: time-to-train (lower is better, with the throughput gate's noise
rule: beyond the tolerance band *and* the runs clearly slower) and accuracy (the median final
top-1 no more than `--perf-set accuracy-tolerance` below the baseline's, absolute). A run that does
not reach the target is a result, `not-converged`: it fails where the baseline converged.

This module holds the mode: the case's settings, its runs, their judging and what its baseline
entry keeps. The verdict itself is perf_tests/modes/time_to_train/verdict.py (pure functions of the
runs' records and the entry); the profiles are in perf_tests/core/cases.py with the suite's others,
the report section's tables (shaped like NVIDIA's time-to-train table) in
perf_tests/report/time_to_train.py, the plot of top-1 against time in perf_tests/report/plots.py.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from perf_tests.baselines.checks import refusals
from perf_tests.baselines.entries import baseline_times, entry_from_row
from perf_tests.baselines.file import COMPARABLE_SETTINGS, BaselineEntry
from perf_tests.context.baseline_store import ENTRIES, Lookup, Update, kept_runs
from perf_tests.core.cases import TIME_TO_TRAIN, TIME_TO_TRAIN_PROFILES, Case, TimeToTrainProfile
from perf_tests.core.text import is_number, percent, seconds_text
from perf_tests.environment.differences import environment_diff
from perf_tests.judging.detectable import detectable_figure
from perf_tests.judging.verdicts import ERROR, NO_BASELINE, NOT_CONVERGED, OOM
from perf_tests.modes.base import Figure, Mode, Report
from perf_tests.modes.time_to_train.verdict import (RunFigures, case_figures, judge_time_to_train,
                                                    measure_verdicts)
from perf_tests.report.time_to_train import markdown_section, terminal_table, top1_plot
from perf_tests.results.case_result import CaseResult
from perf_tests.runs.protocol import Runs, run_rounds
from rn50_model.config import ConfigError, TrainConfig
from rn50_model.dataset import ensure_learnable_dataset, resolve_data_dir


@dataclass
class Plan:
    case: Case
    config: TrainConfig
    data_dir: Path
    settings: dict                   # what its baseline entry must agree on
    entry: dict | None
    no_entry_reason: str


class TimeToTrain(Mode):
    """`_ttt` cases: train to a target top-1, judged on time and accuracy."""
    kind = TIME_TO_TRAIN
    title = "ResNet50 time to train"
    fixture = "ttt_case"
    test_module = "test_time_to_train.py"
    report = Report(terminal_table, (markdown_section,),
                    Figure(top1_plot, "time_to_train.png",
                           "ResNet50 v1.5 top-1 against time on {hardware}"))

    @staticmethod
    def wanted(settings) -> bool:
        return settings.time_to_train or any(case.time_to_train
                                             for case in settings.extra_cases)

    @property
    def requested(self):
        """The command line (`Settings`): --perf-time-to-train, --perf-set epochs, ..."""
        return self.context.requested

    @property
    def profile(self) -> TimeToTrainProfile:
        return TIME_TO_TRAIN_PROFILES[self.context.profile.name]

    def cases(self) -> list[Case]:
        """The profile's `_ttt` cases under --perf-time-to-train, and any asked for by id."""
        asked = [case for case in self.context.settings.extra_cases if case.time_to_train]
        cases = self.profile.cases() if self.requested.time_to_train else []
        return cases + [case for case in asked if case not in cases]

    # -- settings of a run ---------------------------------------------------------------

    @property
    def epochs(self) -> int:
        return self.requested.epochs or self.profile.epochs

    @property
    def warmup_epochs(self) -> int:
        return min(self.profile.warmup_epochs, self.epochs)

    @property
    def target_top1(self) -> float:
        return self.requested.target_top1 or self.profile.target_top1

    @property
    def accuracy_tolerance(self) -> float:
        return self.requested.accuracy_tolerance or self.profile.accuracy_tolerance

    @property
    def runs(self) -> int:
        return self.requested.runs or self.profile.runs

    @property
    def data_backend(self) -> str:
        backend = self.context.settings.data_backend
        return self.profile.data_backend if backend == "synthetic" else backend

    @property
    def image_size(self) -> int:
        return self.requested.image_size or self.profile.image_size

    def data_dir(self) -> Path:
        """The user's folder (holding train/ and val/), else the profile's generated set."""
        given = self.context.settings.data_dir
        if given:
            root = Path(given)
            for split in ("train", "val"):
                if not (root / split).is_dir():
                    raise ConfigError(f"data dir {root} has no {split}/ folder; time-to-train "
                                      f"reads {root}/train/<class>/ and {root}/val/<class>/")
                resolve_data_dir(root / split)
            return root
        return ensure_learnable_dataset(self.profile.generated)

    def skip_reason(self, case: Case) -> str | None:
        context = self.context
        reason = (context.workers.skip_reason(case)
                  or context.host.backend_problem(self.data_backend))
        if reason:
            return reason
        if self.profile.generated is None and not context.settings.data_dir:
            return ("time-to-train on the full profile trains on ImageNet: pass --perf-data-dir "
                    "with train/ and val/ (ImageNet layout)")
        return None

    def train_config(self, case: Case, data_dir: Path) -> TrainConfig:
        classes = sum(1 for entry in os.scandir(data_dir / "train") if entry.is_dir())
        # The command line's workload options, but the profile's image size and data, whole
        # epochs instead of timed iterations, and no CUDA graphs (the convergence loop runs
        # eagerly).
        return TrainConfig(**{
            **self.context.settings.train_values(),
            "batch_per_device": case.batch_per_device, "precision": case.precision,
            "image_size": self.image_size, "num_classes": classes, "warmup_iters": 0,
            "timed_iters": 1, "data_backend": self.data_backend, "data_dir": str(data_dir),
            "device": self.context.host.device_type, "cuda_graphs": False})

    def comparable_settings(self, data_dir: Path) -> dict:
        """Its values of the settings a time to train depends on (baselines/file.py's
        COMPARABLE_SETTINGS)."""
        values = {"device_type": self.context.host.device_type, "image_size": self.image_size,
                  "data_backend": self.data_backend, "target_top1": self.target_top1,
                  "epochs": self.epochs, "warmup_epochs": self.warmup_epochs,
                  "data_dir": data_dir.name}
        return {name: values[name] for name in COMPARABLE_SETTINGS[TIME_TO_TRAIN]}

    # -- one case ------------------------------------------------------------------------

    def plan(self, case: Case) -> Plan:
        data_dir = self.data_dir()
        config = self.train_config(case, data_dir)
        config.validate(self.context.host.device_type)
        settings = self.comparable_settings(data_dir)
        entry, no_entry_reason = self.context.baselines.lookup(
            case.case_id, settings, names=Lookup(noun="time-to-train baseline"),
            usable=lambda raw: "time_to_train_s" in raw or "top1" in raw,
            read=lambda case_id, raw: raw)   # its figures are read by name (verdict.py)
        return Plan(case, config, data_dir, settings, entry, no_entry_reason)

    def run(self, plan: Plan) -> Runs:
        context, case = self.context, plan.case
        folder = context.results.path / case.case_id
        convergence_path = folder / "time_to_train.json"
        folder.mkdir(parents=True, exist_ok=True)
        convergence_path.write_text(json.dumps(
            {"epochs": self.epochs, "target_top1": self.target_top1,
             "warmup_epochs": self.warmup_epochs}, indent=2) + "\n")
        # --perf-set timeout bounds one epoch here: a run may take up to that for each of them.
        request_for = context.workers.launch_requests(
            case, plan.config, folder / "config.json",
            extra_args=("--time-to-train", str(convergence_path.resolve())),
            timeout=context.settings.timeout * self.epochs)

        def report_run(runs: Runs) -> None:
            run = runs.latest
            if run.outcome != "ok":
                outcome = run.outcome
            elif run.record["reached_target"]:
                outcome = (f"{seconds_text(run.record['time_to_train_s'])} to "
                           f"{percent(run.record['top1'])} top-1 ({run.record['epochs']} epochs)")
            else:
                outcome = (f"did not reach {percent(self.target_top1)} in "
                           f"{run.record['epochs']} epochs (top-1 {percent(run.record['top1'])})")
            if run.record and run.record.get("mlperf_log_note"):
                outcome += f"; MLPerf log {run.record['mlperf_log_note']}"
            context.progress(f"{case.case_id} run {run.index}/{self.runs}: {outcome}")

        # Every run is a whole training: no runs beyond the planned ones.
        return run_rounds(case, context.launcher, request_for,
                          partial(context.results.run_dir, case.case_id), self.runs, self.runs,
                          report_run=report_run)

    def judge(self, plan: Plan, runs: Runs) -> CaseResult:
        context, case, entry = self.context, plan.case, plan.entry
        records = [run.record for run in runs.runs if run.record]
        environment = context.stored.first_environment(records)
        details = {"image_size": self.image_size, "data_backend": self.data_backend,
                   "target_top1": self.target_top1, "max_epochs": self.epochs,
                   "accuracy_tolerance": self.accuracy_tolerance, "environment": environment,
                   # The throughput window's iterations say nothing about a training run.
                   "settings": {**{key: value for key, value
                                   in context.stored.recorded(case, records).items()
                                   if key not in ("warmup_iters", "timed_iters")},
                                **plan.settings}}
        missing_log = next((record["mlperf_log_note"] for record in records
                            if record.get("mlperf_log_note")), None)
        if missing_log:
            details["mlperf_log"] = missing_log
        baseline = None
        if entry is not None:
            baseline = BaselineEntry(case.case_id, float(entry["median_ips"]),
                                     environment=entry.get("environment") or {})
            details["baseline_time_to_train_s"] = entry.get("time_to_train_s")
            details["baseline_top1"] = entry.get("top1")
            details["baseline_reached_target"] = bool(entry.get("reached_target"))
            details["environment_diff"] = environment_diff(baseline.environment, environment)
        failed = runs.failed
        if failed is not None:
            verdict = OOM if failed.outcome == "oom" else ERROR
            return self.result(case, verdict, f"{case.case_id}: {failed.message}",
                               runs_ips=runs.runs_ips, failure_tail=failed.stderr_tail,
                               baseline_entry=baseline, **details)
        figures = [RunFigures.of(run) for run in runs.runs]
        details.update(case_figures(figures))
        details["tolerance"] = self.time_tolerance(entry)
        verdict, message = judge_time_to_train(case.case_id, figures, entry, self.target_top1,
                                               self.epochs, details["tolerance"],
                                               self.accuracy_tolerance)
        # Each measure's own verdict beside the case's (results/measures.py reads them).
        details.update({key: value for key, value in measure_verdicts(
            figures, entry, details["tolerance"], self.accuracy_tolerance).items()
            if value is not None})
        if entry is not None and entry.get("time_to_train_s") and details["reached_target"]:
            details["time_delta"] = details["time_to_train_s"] / entry["time_to_train_s"] - 1
            details.update(detectable_figure(
                case.case_id, details["runs_time_to_train_s"], baseline_times(entry),
                entry["time_to_train_s"], details["tolerance"], lower_is_better=True))
        if entry is None and verdict != NOT_CONVERGED:
            verdict, message = NO_BASELINE, f"{message}; {plan.no_entry_reason}"
        return self.result(case, verdict, message, runs_ips=runs.runs_ips,
                           baseline_entry=baseline, **details)

    def time_tolerance(self, entry: dict | None) -> float:
        if self.context.settings.fixed_tolerance is not None:
            return self.context.settings.fixed_tolerance
        if entry is not None and is_number(entry.get("tolerance")):
            return float(entry["tolerance"])
        return self.profile.time_tolerance

    def baseline_update(self, result: CaseResult) -> Update | None:
        if result.verdict == OOM or not result.runs_ips:
            return None
        row = result.row
        entry = entry_from_row(result.case_id, row, environment=dict(result.environment),
                               source="measured", tolerance=self.context.settings.fixed_tolerance)

        def change(old: dict | None) -> str:
            old = old or {}
            old_text = (seconds_text(old["time_to_train_s"]) if old.get("time_to_train_s")
                        else "none")
            new_text = (seconds_text(row.time_to_train_s) if row.time_to_train_s
                        else "not converged")
            return f"time-to-train {old_text} -> {new_text}"

        # A time to train is judged on its own band: only the run count applies.
        untrusted = refusals(result.runs_ips, wanted_runs=self.profile.runs)
        return Update(ENTRIES, entry, change, kept_runs(self.context, result, bool(untrusted)),
                      tuple(untrusted))

    @staticmethod
    def judged_not_converged(result: CaseResult) -> bool:
        """A not-converged verdict against the old entry, not a baseline update."""
        return result.verdict == NOT_CONVERGED and not result.row.baseline_update

    def fails(self, result: CaseResult) -> str | None:
        """`not-converged` fails where the baseline converged (as a regression does); every
        other verdict as a throughput case's."""
        if self.judged_not_converged(result):
            return "" if result.row.baseline_reached_target else None
        return super().fails(result)

    def enforce(self, result: CaseResult) -> None:
        """`not-converged` fails as a regression where it fails (`fails`), else warns."""
        if self.judged_not_converged(result) and self.fails(result) is None:
            self.context.warn(result.case_id, result.message)
            return
        super().enforce(result)
