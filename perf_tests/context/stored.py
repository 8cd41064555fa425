"""The settings stored with a result and its baseline entry: those a figure depends on (an entry
recorded under others is not comparable; their names are baselines/file.py's
`COMPARABLE_SETTINGS`, one list per kind of entry), and those that say how the workers ran it."""
from __future__ import annotations

from dataclasses import dataclass

from perf_tests.baselines.file import COMPARABLE_SETTINGS
from perf_tests.cli.settings import Settings
from perf_tests.core.cases import THROUGHPUT, Case, Profile
from perf_tests.runs.host import HostFacts
from rn50_model.config import TrainConfig


@dataclass(frozen=True)
class StoredSettings:
    settings: Settings
    profile: Profile
    host: HostFacts

    def comparable(self, case: Case, kind: str = THROUGHPUT) -> dict:
        """This session's values of the settings `kind`'s figures depend on (the loss scale
        for amp only)."""
        settings = self.settings
        values = {"device_type": self.host.device_type, "image_size": settings.image_size,
                  "data_backend": settings.data_backend, "warmup_iters": settings.warmup_iters,
                  "timed_iters": settings.timed_iters, "loss_scale": settings.loss_scale,
                  "batch_step": settings.batch_step,
                  "max_batch_limit": settings.max_batch_limit,
                  "memory_limit": settings.memory_limit}
        return {name: values[name] for name in COMPARABLE_SETTINGS[kind]
                if name != "loss_scale" or case.precision == "amp"}

    def recorded(self, case: Case, records: list[dict] = ()) -> dict:
        """The settings stored with a result and its baseline entry, as the workers ran them:
        the memory format resolved, the threads a worker took (from the runs' records)."""
        settings = self.settings
        threads = settings.threads or next((record["threads_per_worker"] for record in records
                                            if record.get("threads_per_worker")), None)
        memory_format = TrainConfig(memory_format=settings.memory_format) \
            .resolved_memory_format(self.host.device_type)
        return {**self.comparable(case), "profile": self.profile.name,
                "memory_format": memory_format, "threads": threads,
                "compile": settings.compile, "cuda_graphs": settings.cuda_graphs,
                "launcher": settings.launcher}

    def first_environment(self, records: list[dict]) -> dict:
        """The environment the first run's workers reported, else the probe's."""
        return records[0]["environment"] if records else self.host.environment
