"""What a mode is given to measure with: the session's settings, host, results folder, baseline
store and launcher, and the services built on them (a case's worker config, its launch
requests, its saved row). A mode never sees the session; the session builds one `Context`."""
from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rn50_model.config import TrainConfig
from rn50_model.dataset import (check_enough_images, count_images, ensure_generated_dataset,
                                resolve_data_dir, spec_for_job)

from .baselines.store import BaselineStore
from .case_result import CaseResult
from .cases import Case, Profile
from .environment_lock import StackReadings
from .runs.host import HostFacts, worker_environment
from .runs.launchers import Launcher, LaunchRequest, Stack
from .repro import CommandLine, repro_command
from .results import ResultsFolder, utc_now
from .run_variables import env_prefix
from .settings import Settings


class PerfWarning(UserWarning):
    """A case that passed but needs attention: no baseline, an improvement, an unclear result."""


class PerfDeprecationWarning(DeprecationWarning):
    """An option typed as it was spelled before the `--perf-` prefix: it still works, and the
    line names the spelling to use (perf_tests/options.py `RENAMED`)."""


class PerfCommandLineWarning(UserWarning):
    """The command line works, but not as it reads: pytest took an option's value for a test
    path (perf_tests/plugin.py `user_project`)."""


def perf_warning_format(original: Callable[..., str]) -> Callable[..., str]:
    """`warnings.formatwarning` for a session: a PerfWarning's location is its case's results
    folder (`Context.warn`), which reads as 'PerfWarning: <line> (runs in <folder>)' rather than
    as a source line '<folder>:0:'; a PerfDeprecationWarning or a PerfCommandLineWarning is its
    line alone (it is about the command line, not about a line of the plugin); every other
    warning as `original` formats it."""
    def formatted(message, category, filename, lineno, line=None) -> str:
        if isinstance(category, type) and issubclass(category, PerfWarning):
            return f"{category.__name__}: {message} (runs in {filename})\n"
        if isinstance(category, type) and issubclass(category, (PerfDeprecationWarning,
                                                                PerfCommandLineWarning)):
            return f"{category.__name__}: {message}\n"
        return original(message, category, filename, lineno, line)
    formatted.original = original
    return formatted


@dataclass
class Context:
    requested: Settings          # the command line as given
    settings: Settings           # ... with every default settled for the profile
    profile: Profile
    host: HostFacts
    rootdir: Path
    results: ResultsFolder
    baselines: BaselineStore
    launcher: Launcher
    progress: Callable[[str], None]    # one line as a run ends, or while waiting for devices
    header_extras: dict = field(default_factory=dict)   # the mode's fields of the header
    command_line: CommandLine | None = None     # as typed, for a failed case's repro command
    node_ids: dict[str, str] = field(default_factory=dict)   # case id -> its test's node id
    # Each stack's lock, read once (perf_tests/environment_lock.py); None outside a session:
    # then no record is stamped with variables.
    stacks: StackReadings | None = None
    _user_data: tuple[Path, int] | None = None   # resolved --perf-data-dir, its image count
    # When the session started (its context is built as it collects): results.json is first
    # written as the first case ends, which may be many minutes later.
    started_at: str = field(default_factory=utc_now)
    # The rows this process saved, by case id: what a later case reads of an earlier one.
    _rows: dict[str, dict] = field(default_factory=dict)

    # -- a case's workers -----------------------------------------------------------------

    def skip_reason(self, case: Case, data_backend: str | None = None) -> str | None:
        """Why this host (or its launcher) cannot run `case`; None where it can."""
        settings = self.settings
        return (self.host.skip_reason(case, self.profile.name,
                                      data_backend or settings.data_backend, settings.compile)
                or self.launcher.skip_reason(case, self.host.host))

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

    def launch_requests(self, case: Case, config: TrainConfig, config_path: Path,
                        extra_args: tuple[str, ...] = (), timeout: float | None = None
                        ) -> Callable[..., LaunchRequest]:
        """Writes `config` to `config_path`; returns what makes the launch request of one run
        (in its run folder, on a stack: this session's unless another is given)."""
        config_path.parent.mkdir(parents=True, exist_ok=True)
        config_path.write_text(json.dumps(config.to_dict(), indent=2) + "\n")
        env = worker_environment(self.rootdir)
        # What an image's workers need of this host: the run folders, the config, the data
        # (those there: a tool's session may write its runs elsewhere than its results folder;
        # each runtime binds them once, absolute).
        mounts = tuple(Path(path) for path in (self.results.path, config_path.parent,
                                               *filter(None, [config.data_dir]))
                       if Path(path).exists())

        def request_for(run_dir: Path, stack: Stack | None = None) -> LaunchRequest:
            stack = stack or self.settings.stack
            return LaunchRequest(case=case, worker_args=["--config", str(config_path.resolve()),
                                                         *extra_args,
                                                         "--run-dir", str(run_dir.resolve()),
                                                         "--redirect-logs"],
                                 run_dir=run_dir, env=env, cwd=self.rootdir,
                                 timeout=timeout or self.settings.timeout,
                                 rdzv_port=self.settings.rdzv_port, stack=stack,
                                 variables=self.stack_variables(stack),
                                 stamp=self.stacks.stamp(stack) if self.stacks is not None
                                 else {}, mounts=mounts)

        return request_for

    def stack_variables(self, stack: Stack) -> dict[str, str] | None:
        """The variables `stack`'s runs are recorded with (perf_tests/run_variables.py)."""
        return self.stacks.variables(stack) if self.stacks is not None else None

    # -- what is stored with a result -------------------------------------------------------

    def comparable_settings(self, case: Case) -> dict:
        """What a throughput figure depends on: a baseline recorded under others is not
        comparable."""
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

    def first_environment(self, records: list[dict]) -> dict:
        """The environment the first run's workers reported, else the probe's."""
        return records[0]["environment"] if records else self.host.environment

    def header(self) -> dict:
        """results.json's fields beside its cases, as the file is first written."""
        return {"hardware": self.host.hardware, "profile": self.profile.name,
                "environment": self.host.environment, "launcher": self.settings.launcher,
                "baseline_file": str(self.baselines.path), "started_at": self.started_at,
                **self.header_extras}

    def row(self, result: CaseResult) -> dict:
        """The case's row in results.json."""
        return result.row(self.settings.image_size, self.settings.data_backend)

    def save(self, result: CaseResult) -> None:
        """Merge the case's row into results.json (written once, as the case ends)."""
        self._rows[result.case_id] = self.row(result)
        self.results.save_case(result.case_id, self._rows[result.case_id], self.header())

    def measured(self, case_id: str) -> dict | None:
        """This session's row of `case_id`: as this process saved it, else as results.json
        has it where another process of the session (a pytest-xdist worker) measured it;
        None where no case of that id has ended."""
        return self._rows.get(case_id) or self.results.case(case_id)

    def measured_rows(self) -> dict[str, dict]:
        """Every row this session has saved, those of other processes too."""
        return {**(self.results.load() or {}).get("cases", {}), **self._rows}

    def repro(self, case_ids: list[str], uses_baseline: bool,
              result: CaseResult | None = None, recording: bool = False) -> str | None:
        """The command that measures `case_ids` (the failed case last) as this session did
        (perf_tests/repro.py), in the variables `result`'s runs had where its baseline's
        differed, and (`recording`: the session's recording was not written) records them
        again; None where a test is not known (a context outside a session)."""
        node_ids = [self.node_ids.get(case_id) for case_id in case_ids]
        if None in node_ids or self.command_line is None:
            return None
        baseline = self.baselines.path if uses_baseline and (
            recording or self.baselines.path.exists()) else None
        entry = result.baseline_entry if result is not None and uses_baseline else None
        prefix = env_prefix(entry.environment, result.details.get("environment") or {}) \
            if entry is not None else []
        return repro_command(self.command_line, self.rootdir, node_ids, baseline, prefix,
                             recording)

    def warn(self, case_id: str, text: str) -> None:
        # Located at the case's results folder, so pytest's summary shows where the runs are,
        # not the source line of this call (the same for every warning): perf_warning_format.
        warnings.warn_explicit(PerfWarning(text), PerfWarning, str(self.results.path / case_id),
                               0)
