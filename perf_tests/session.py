"""The state of one suite session and the verdict of each case.

`PerfSession` turns the command line into settings, probes the host once, owns the baseline
file and the results folder, and measures a case: skip reasons, the runs (through the
protocol), the statistics, the speedup, the verdict against the baseline, and the baseline
update. `enforce` turns a verdict into pytest's outcome: fail, skip, warn or pass.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from rn50_model.config import CPU_PRECISIONS, ConfigError, TrainConfig
from rn50_model.dataset import (check_enough_images, count_images, ensure_generated_dataset,
                                resolve_data_dir, spec_for_job)
from rn50_model.packages import compile_problem, data_backend_problem

from .baselines import (BaselineEntry, BaselineError, BaselineFile, check_writable,
                        derived_tolerance, load_baseline_file, measured_entry,
                        update_baseline_file)
from .cases import PROFILES, Case, Profile
from .device_lock import DeviceLockError, check_device_lock, device_lock_path, holding_devices
from .ab import Comparison
from .launchers import (Host, Launcher, LauncherError, LaunchRequest, Stack,
                        make_launcher)
from .max_batch import MaxBatchSearch, measure_max_batch, searches
from .explain import explain, profiled_config, run_profile, wants_profile
from .protocol import CaseRuns, RunOutcome, measure_runs
from .results import ResultsFolder, utc_now
from .settings import Settings
from .stats import summarize
from .verdicts import (AMBIGUOUS, ERROR, IMPROVEMENT, INCONCLUSIVE, NO_BASELINE, OOM, PASS,
                       REGRESSION, SKIPPED, Judgement, environment_diff, explained, ips, judge,
                       settings_diff, throttling_note)

PROBE_TIMEOUT_SECONDS = 120


class PerfWarning(UserWarning):
    """A case that passed but needs attention: no baseline, an improvement, an unclear result."""


class PerfUsageError(Exception):
    """A setting of this session that cannot work; reported as a pytest usage error."""


@dataclass
class CaseResult:
    case: Case
    verdict: str
    message: str
    runs_ips: list[float] = field(default_factory=list)
    details: dict = field(default_factory=dict)
    failure_tail: list[str] = field(default_factory=list)
    baseline_entry: BaselineEntry | None = None
    explanation: list[str] = field(default_factory=list)  # the operator profile's lines


def probe_host(cwd: Path, stack: Stack = Stack()) -> dict:
    """The environment as a worker would see it, read in a subprocess so that this pytest
    process never creates a CUDA context of its own; `stack`: as a candidate's worker would."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(cwd), env.get("PYTHONPATH")]))
    what = "this host" if stack.is_default else f"the candidate ({stack.describe()})"
    command = stack.wrap([sys.executable, "-m", "rn50_model.environment"])
    try:
        done = subprocess.run(command, cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=PROBE_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        raise PerfUsageError(f"probing {what} (python -m rn50_model.environment) took over "
                             f"{PROBE_TIMEOUT_SECONDS} s; check that torch imports") from None
    except OSError as error:
        raise PerfUsageError(f"probing {what}: {command[0]} cannot start "
                             f"({error.strerror or error})") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise PerfUsageError(f"probing {what} (python -m rn50_model.environment) failed: "
                             f"{last}")
    try:
        return json.loads(done.stdout)
    except ValueError:
        raise PerfUsageError(f"probing {what} (python -m rn50_model.environment) printed no "
                             f"JSON: {(done.stdout.strip().splitlines() or [''])[-1][:200]}") \
            from None


class PerfSession:
    def __init__(self, requested: Settings, rootdir: Path, results_dir: Path,
                 progress: Callable[[str], None] = lambda line: None) -> None:
        self.requested = requested
        self.rootdir = rootdir
        self.results = ResultsFolder(results_dir)
        self.progress = progress  # one line as a run ends, or while waiting for the devices
        self._settings: Settings | None = None
        self._environment: dict | None = None
        self._baseline: BaselineFile | None = None
        self._launcher: Launcher | None = None
        self._user_data: tuple[Path, int] | None = None  # resolved --data-dir, image count
        # An A/B session measures and judges each case by the comparison, not the baseline.
        self.comparison = (Comparison(requested.candidate, requested.tolerance)
                           if requested.candidate else None)

    # -- things read once, when the first case needs them ---------------------------------

    @property
    def environment(self) -> dict:
        if self._environment is None:
            self._environment = probe_host(self.rootdir)
        return self._environment

    @property
    def host(self) -> Host:
        environment = self.environment
        cuda = environment.get("device_count", 0) > 0
        return Host("cuda" if cuda else "cpu", environment.get("device_count", 0),
                    environment.get("cpu_count") or os.cpu_count() or 1)

    @property
    def profile(self) -> Profile:
        if self.requested.profile is not None:
            return self.requested.profile
        return PROFILES["full" if self.host.device_type == "cuda" else "smoke"]

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = self.requested.resolved(self.profile)
        return self._settings

    @property
    def hardware(self) -> str:
        return self.environment.get("hardware", "unknown")

    @property
    def baseline_path(self) -> Path:
        return self.settings.baseline_file or self.rootdir / "baselines" / f"{self.hardware}.json"

    @property
    def baseline(self) -> BaselineFile:
        if self._baseline is None:
            self._baseline = load_baseline_file(self.baseline_path)
        return self._baseline

    @property
    def launcher(self) -> Launcher:
        if self._launcher is None:
            self._launcher = make_launcher(self.settings.launcher, self.settings.hostfile)
            self._launcher.check_usable()
        return self._launcher

    def prepare(self) -> None:
        """Everything that can fail before any measurement, as PerfUsageError."""
        try:
            self.environment
            if self.comparison:
                probe_host(self.rootdir, self.comparison.candidate)  # its torch imports there
            else:
                self.baseline
            if self.settings.update_baselines:
                check_writable(self.baseline_path)
            self.launcher
            check_device_lock(device_lock_path())
        except (BaselineError, LauncherError, DeviceLockError) as error:
            raise PerfUsageError(str(error)) from None

    def cases(self) -> list[Case | MaxBatchSearch]:
        settings = self.settings
        cases = self.profile.cases(settings.precisions, settings.batches)
        cases.extend(case for case in settings.extra_cases if case not in cases)
        return searches(cases) if settings.find_max_batch else cases

    # -- one case --------------------------------------------------------------------------

    def skip_reason(self, case: Case) -> str | None:
        host, settings = self.host, self.settings
        if host.device_type == "cpu":
            if self.profile.name == "full":
                return ("the full profile measures CUDA devices and this host has none; use "
                        "--perf-profile smoke")
            if case.precision not in CPU_PRECISIONS:
                return (f"precision {case.precision} needs a CUDA device; this host has none "
                        f"(on CPU: {', '.join(CPU_PRECISIONS)})")
            if settings.data_backend == "dali-gpu":
                return "data backend dali-gpu needs a CUDA device; this host has none"
        elif case.precision in ("tf32", "bf16") and self.compute_capability() < (8, 0):
            return (f"precision {case.precision} needs compute capability 8.0 (Ampere) or newer; "
                    f"this host's {self.environment.get('device', 'GPU')} has "
                    f"{self.environment.get('compute_capability')}")
        reason = data_backend_problem(settings.data_backend, self.environment)
        if reason is None and settings.compile:
            reason = compile_problem(host.device_type)
        return reason or self.launcher.skip_reason(case, host)

    def compute_capability(self) -> tuple[int, ...]:
        """The first CUDA device's (major, minor); an unknown one is taken as new enough."""
        text = str(self.environment.get("compute_capability", ""))
        try:
            return tuple(int(part) for part in text.split("."))
        except ValueError:
            return (99, 0)

    def train_config(self, case: Case) -> TrainConfig:
        return TrainConfig(batch_per_device=case.batch_per_device, precision=case.precision,
                           data_dir=self.data_dir(case), device=self.host.device_type,
                           **self.settings.train_values())

    def data_dir(self, case: Case) -> str | None:
        """The folder `case` reads: the user's (checked to hold a batch for every rank, before
        any worker starts), else a generated set sized to the job."""
        if self.settings.data_backend == "synthetic":
            return None
        if not self.settings.data_dir:
            return str(ensure_generated_dataset(spec_for_job(case.devices, case.batch_per_device)))
        if self._user_data is None:
            folder = resolve_data_dir(self.settings.data_dir)
            self._user_data = folder, count_images(folder)
        folder, images = self._user_data
        check_enough_images(folder, images, case.devices, case.batch_per_device)
        return str(folder)

    def comparable_settings(self, case: Case) -> dict:
        settings = self.settings
        values = {"device_type": self.host.device_type, "image_size": settings.image_size,
                  "data_backend": settings.data_backend, "warmup_iters": settings.warmup_iters,
                  "timed_iters": settings.timed_iters}
        if case.precision == "amp":
            values["loss_scale"] = settings.loss_scale
        return values

    def recorded_settings(self, case: Case, records: list[dict] = ()) -> dict:
        """The settings stored with a result and its baseline entry, as the workers ran them:
        the memory format resolved, the threads a worker took (from the runs' records)."""
        settings = self.settings
        threads = settings.threads or next((record["threads_per_worker"] for record in records
                                            if record.get("threads_per_worker")), None)
        memory_format = TrainConfig(memory_format=settings.memory_format) \
            .resolved_memory_format(self.host.device_type)
        return {**self.comparable_settings(case), "profile": self.profile.name,
                "memory_format": memory_format, "threads": threads,
                "compile": settings.compile, "cuda_graphs": settings.cuda_graphs,
                "launcher": settings.launcher}

    def baseline_entry(self, case: Case) -> tuple[BaselineEntry | None, str]:
        """The comparable entry for `case`, or None and why there is none."""
        entry = self.baseline.entry(case.case_id)
        if entry is None:
            return None, (f"no baseline entry for {case.case_id} in {self.baseline_path}; record "
                          "one with --update-baselines")
        differences = entry.incomparable_settings(self.comparable_settings(case))
        if differences:
            return None, (f"the baseline for {case.case_id} in {self.baseline_path} was recorded "
                          f"under other settings ({'; '.join(differences)}): not comparable; "
                          "record one for these settings with --update-baselines")
        return entry, ""

    def reference_ips(self, case: Case) -> float | None:
        """The 1n1g median for speedup: this session's, else the baseline's."""
        single = case.single_device
        measured = self.results.case(single.case_id)
        if measured and measured.get("median_ips"):
            return float(measured["median_ips"])
        entry, _ = self.baseline_entry(single)
        return entry.median_ips if entry else None

    def tolerance_for(self, entry: BaselineEntry | None) -> float:
        if self.settings.tolerance is not None:
            return self.settings.tolerance
        if entry is not None and entry.tolerance is not None:
            return float(entry.tolerance)
        return self.profile.tolerance

    def measure(self, case: Case | MaxBatchSearch) -> CaseResult:
        if isinstance(case, MaxBatchSearch):  # --perf-find-max-batch: perf_tests/max_batch.py
            result = measure_max_batch(self, case)
            self.save(result)
            return result
        reason = self.skip_reason(case)
        if reason:
            return self.skipped(case, reason)
        try:
            config = self.train_config(case)
            config.validate(self.host.device_type)
        except ConfigError as error:
            result = CaseResult(case, ERROR, f"{case.case_id}: {error}")
            self.save(result)
            return result
        if self.comparison:
            result = self.comparison.measure(self, case, config)
            self.save(result)
            return result
        entry, no_entry_reason = self.baseline_entry(case)
        tolerance = self.tolerance_for(entry)
        reference = 1.0 if case.devices == 1 else None
        baseline_speedup = 1.0 if case.devices == 1 else None
        if case.devices > 1:
            reference = self.reference_ips(case)
            baseline_speedup = self.baseline.speedup_of(case) if entry else None

        max_runs = self.settings.max_runs  # never below the runs: see Settings.resolved
        # A regression stands on twice the case's runs (or on all that are allowed).
        confirm_runs = min(2 * self.settings.runs, max_runs)

        def judgement(runs_ips: list[float]) -> Judgement | None:
            if entry is None:
                return None
            median = summarize(runs_ips).median
            speedup = median / reference if reference and case.devices > 1 else None
            return judge(case.case_id, runs_ips, entry, tolerance, speedup,
                         baseline_speedup if case.devices > 1 else None, reference,
                         more_runs=len(runs_ips) < max_runs, confirm_runs=confirm_runs)

        def report_run(run: RunOutcome) -> None:
            planned = self.settings.runs
            count = (f"{run.index}/{planned}" if run.index <= planned
                     else f"{run.index} (more runs to decide, up to {max_runs})")
            outcome = f"{ips(run.global_ips)} img/s" if run.outcome == "ok" else run.outcome
            self.progress(f"{case.case_id} run {count}: {outcome}")

        try:
            with holding_devices(device_lock_path(), self.progress):
                runs = self.run_case(case, config, lambda ips: judgement(ips).verdict == AMBIGUOUS
                                     if entry else False, report_run)
        except DeviceLockError as error:
            result = CaseResult(case, ERROR, f"{case.case_id}: {error}")
            self.save(result)
            return result
        result = self.decide(case, runs, entry, no_entry_reason, tolerance, reference,
                             baseline_speedup, judgement)
        self.profile_operators(case, config, result)
        self.save(result)
        if self.settings.update_baselines and result.runs_ips and result.verdict != ERROR:
            self.update_baseline(result)
        return result

    def skipped(self, case: Case, reason: str) -> CaseResult:
        """The saved result of a case this host cannot hold, with the reason."""
        result = CaseResult(case, SKIPPED, f"{case.case_id}: skipped: {reason}",
                            details={"skip_reason": reason})
        self.save(result)
        return result

    def run_case(self, case: Case, config: TrainConfig, more_runs_wanted,
                 report_run: Callable[[RunOutcome], None], results: ResultsFolder | None = None,
                 runs: int | None = None) -> CaseRuns:
        """The case's runs into `results` (default the session's folder): `runs` exactly where
        given (a max-batch probe is one run), else the session's runs and more to decide."""
        results = results or self.results
        request_for = self.launch_requests(case, config,
                                           results.path / case.case_id / "config.json")
        return measure_runs(case, self.launcher, request_for, results,
                            runs or self.settings.runs, runs or self.settings.max_runs,
                            more_runs_wanted, report_run)

    def profile_operators(self, case: Case, config: TrainConfig, result: CaseResult) -> None:
        """The operator profile `--perf-explain` asks for (explain.py decides when): one
        profiled launch after the timed runs, compared with the baseline entry's."""
        if not wants_profile(self.settings.explain, result.verdict,
                             self.settings.update_baselines):
            return
        folder = self.results.path / case.case_id / "profile"
        request_for = self.launch_requests(case, profiled_config(config),
                                           folder / "config.json")
        self.progress(f"{case.case_id}: profiling operators ({result.verdict})")
        try:
            with holding_devices(device_lock_path(), self.progress):
                profiled = run_profile(self.launcher, request_for(folder))
        except DeviceLockError as error:
            result.explanation = [f"no operator profile: {error}"]
            return
        baseline = result.baseline_entry.op_profile if result.baseline_entry else None
        explanation = explain(profiled, baseline, self.results.path)
        result.details.update(explanation.details)
        if result.verdict == REGRESSION:
            result.explanation = explanation.lines

    def launch_requests(self, case: Case, config: TrainConfig,
                        config_path: Path) -> Callable[[Path], LaunchRequest]:
        """Writes `config` to `config_path`; returns what makes the launch request of one run
        (in its run folder, on a stack: this session's unless another is given)."""
        config_path.parent.mkdir(parents=True, exist_ok=True)
        config_path.write_text(json.dumps(config.to_dict(), indent=2) + "\n")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(self.rootdir),
                                                          env.get("PYTHONPATH")]))

        def request_for(run_dir: Path, stack: Stack = Stack()) -> LaunchRequest:
            return LaunchRequest(case=case, worker_args=["--config", str(config_path.resolve()),
                                                         "--run-dir", str(run_dir.resolve()),
                                                         "--redirect-logs"],
                                 run_dir=run_dir, env=env, cwd=self.rootdir,
                                 timeout=self.settings.timeout,
                                 rdzv_port=self.settings.rdzv_port, stack=stack)

        return request_for

    def decide(self, case: Case, runs: CaseRuns, entry: BaselineEntry | None,
               no_entry_reason: str, tolerance: float, reference: float | None,
               baseline_speedup: float | None, judgement) -> CaseResult:
        records = [run.record for run in runs.runs if run.record]
        environment = records[0]["environment"] if records else self.environment
        details = {"tolerance": tolerance, "environment": environment,
                   "settings": self.recorded_settings(case, records),
                   "throttled_runs": [run.index for run in runs.runs
                                      if run.record and run.record.get("throttled")]}
        throttling = throttling_note([(run.index, run.record) for run in runs.runs if run.record])
        if entry is not None:
            details["baseline_ips"] = entry.median_ips
            details["baseline_speedup"] = baseline_speedup
            details["environment_diff"] = environment_diff(entry.environment, environment)
            details["settings_diff"] = settings_diff(entry.settings, details["settings"])
        failed = runs.failed
        if failed is not None:
            verdict = OOM if failed.outcome == "oom" else ERROR
            message = f"{case.case_id}: {failed.message}"
            if verdict == OOM and entry is not None:
                message += f"; the baseline ran at {ips(entry.median_ips)} img/s"
            return CaseResult(case, verdict, message, runs.runs_ips, details, failed.stderr_tail,
                              entry)

        summary = summarize(runs.runs_ips)
        speedup = 1.0 if case.devices == 1 else (summary.median / reference if reference else None)
        details.update(summary.to_dict())
        details["speedup"] = speedup
        details["efficiency"] = speedup / case.devices if speedup else None
        if entry is None:
            verdict = NO_BASELINE
            message = f"{case.case_id}: {ips(summary.median)} img/s; {no_entry_reason}"
        else:
            decided = judgement(runs.runs_ips)
            details["delta"] = decided.delta
            verdict, message = decided.verdict, decided.message
            if verdict == AMBIGUOUS:
                verdict = INCONCLUSIVE
                message += (f" after {summary.runs} runs (the most --perf-max-runs allows); "
                            "rerun on a quieter host or raise --perf-max-runs")
        if throttling:
            message += f"; {throttling}"
        return CaseResult(case, verdict, message, runs.runs_ips, details, [], entry)

    def save(self, result: CaseResult) -> None:
        case = result.case
        row = {"nodes": case.nodes, "gpus_per_node": case.gpus_per_node,
               "batch_per_device": case.batch_per_device, "precision": case.precision,
               "image_size": self.settings.image_size, "data_backend": self.settings.data_backend,
               "runs_ips": result.runs_ips}
        row.update({key: value for key, value in result.details.items()
                    if key not in ("environment",)})
        row["verdict"] = result.verdict
        row["message"] = result.message
        if result.failure_tail:
            row["failure_tail"] = result.failure_tail
        header = {"hardware": self.hardware, "profile": self.profile.name,
                  "environment": self.environment, "launcher": self.settings.launcher,
                  "baseline_file": str(self.baseline_path), "started_at": utc_now(),
                  **(self.comparison.header() if self.comparison else {})}
        self.results.save_case(case.case_id, row, header)

    def update_baseline(self, result: CaseResult) -> None:
        tolerance = self.settings.tolerance or derived_tolerance(
            result.runs_ips, self.profile.tolerance)
        entry = measured_entry(result.runs_ips, tolerance=tolerance,
                               speedup=result.details.get("speedup"),
                               environment=result.details.get("environment", {}),
                               settings=result.details["settings"], source="measured",
                               op_profile=result.details.get("op_profile"))
        try:
            before = update_baseline_file(self.baseline_path, self.hardware,
                                          {result.case.case_id: entry})
        except (BaselineError, OSError) as error:
            self.keep_unwritten_update(result, str(error) if isinstance(error, BaselineError)
                                       else f"baseline file {self.baseline_path} could not be "
                                            f"written ({error.strerror})")
            return
        old = before.entries.get(result.case.case_id)
        old_text = f"{old['median_ips']:.1f}" if old else "none"
        result.details["baseline_update"] = f"{old_text} -> {entry['median_ips']:.1f} img/s"
        self._baseline = None  # re-read: other sessions may have written entries too
        self.save(result)

    def keep_unwritten_update(self, result: CaseResult, why: str) -> None:
        """The case fails, its runs stay in results.json, and the line says how to promote them."""
        case_id, results_file = result.case.case_id, self.results.results_file
        promote = self.rootdir / "tools" / "promote_baseline.py"
        result.verdict = ERROR
        result.details["baseline_write_failed"] = why
        # Fewer runs than a baseline is usually recorded from were asked for (--perf-runs):
        # the promotion tool wants --force for those, and the user already chose.
        force = " --force" if len(result.runs_ips) < self.profile.baseline_runs else ""
        result.message = (f"{case_id}: {why}; its {len(result.runs_ips)} measured runs are kept "
                          f"in {results_file}: promote them later with python3 {promote} "
                          f"{results_file} -k {case_id} --baseline-file {self.baseline_path}"
                          f"{force}")
        self.save(result)

    # -- pytest outcome ----------------------------------------------------------------------

    def warn(self, case: Case, text: str) -> None:
        # Located at the case's results folder, line 0, so pytest's summary shows where the runs
        # are, not the source line of this call (the same for every warning).
        warnings.warn_explicit(PerfWarning(text), PerfWarning,
                               str(self.results.path / case.case_id), 0)

    def enforce(self, result: CaseResult) -> None:
        settings = self.settings
        lines = [explained(result.message, result.details.get("environment_diff"),
                           result.details.get("settings_diff"))]
        if result.baseline_entry is not None or (result.verdict in (REGRESSION, OOM)
                                                 and not self.comparison):
            lines[0] += f" [baseline {self.baseline_path}]"
        text = "\n".join(lines + result.explanation + result.failure_tail)
        update = result.details.get("baseline_update")
        if update:
            self.warn(result.case, f"{result.case.case_id}: baseline updated {update} "
                                   f"({result.verdict} against the old one)")
            return
        if result.verdict == SKIPPED:
            pytest.skip(result.message.split("skipped: ", 1)[-1])
        if result.verdict in (REGRESSION, ERROR):
            pytest.fail(text, pytrace=False)
        if result.verdict == OOM:
            if result.baseline_entry is not None:
                pytest.fail(text, pytrace=False)
            self.warn(result.case, text)
        elif result.verdict == NO_BASELINE:
            if settings.require_baseline:
                pytest.fail(text + " (--require-baseline)", pytrace=False)
            self.warn(result.case, text)
        elif result.verdict == INCONCLUSIVE:
            if settings.strict:
                pytest.fail(text + " (--perf-strict)", pytrace=False)
            self.warn(result.case, text)
        elif result.verdict == IMPROVEMENT:
            self.warn(result.case, text)
        else:
            assert result.verdict == PASS, result.verdict
