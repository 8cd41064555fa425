"""A case's workers, as a mode starts them: whether this host can run the case, the worker's
config (its data folder resolved and checked), and the launch request of each of its runs."""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from perf_tests.cli.settings import Settings
from perf_tests.core.cases import Case, Profile
from perf_tests.environment.lock import StackReadings
from perf_tests.results.folder import ResultsFolder
from perf_tests.runs.host import HostFacts, worker_environment
from perf_tests.runs.launch import Host, Launcher, LaunchRequest, Stack
from rn50_model.config import TrainConfig
from rn50_model.dataset import (check_enough_images, count_images, ensure_generated_dataset,
                                resolve_data_dir, spec_for_job)


@dataclass
class Workers:
    settings: Settings
    profile: Profile
    host: HostFacts
    launcher: Launcher
    rootdir: Path
    results: ResultsFolder
    # Each stack's lock, read once (perf_tests/environment/lock.py); None outside a session:
    # then no record is stamped with variables.
    stacks: StackReadings | None = None
    _user_data: tuple[Path, int] | None = field(default=None, repr=False, compare=False)

    @property
    def slots(self) -> Host:
        """This host's devices (or cores) as the launcher places workers on them: shared where
        --perf-set share-devices=on says so."""
        return replace(self.host.host, share_devices=self.settings.share_devices)

    def skip_reason(self, case: Case, data_backend: str | None = None) -> str | None:
        """Why this host (or its launcher) cannot run `case`; None where it can."""
        settings = self.settings
        return (self.host.skip_reason(case, self.profile.name,
                                      data_backend or settings.data_backend, settings.compile)
                or self.launcher.skip_reason(case, self.slots))

    def sharing(self, case: Case) -> str | None:
        """`2 ranks on 1 CUDA device` where `case`'s workers share this host's devices
        (--perf-set share-devices=on); None where each has its own."""
        return self.slots.sharing(self.launcher.workers_per_host(case))

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
        """The variables `stack`'s runs are recorded with (perf_tests/runs/variables.py)."""
        return self.stacks.variables(stack) if self.stacks is not None else None
