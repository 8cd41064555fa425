"""`Settings`: the command line of one session, one attribute per row of `options.OPTIONS` and per
`--perf-set` key (`options.KEYS`).

Each attribute is declared with its type only and takes its row's default
(`defaults_from_the_table`), so the table stays the single source of every option; a test checks
that the attributes and the rows are the same set. None stands for the profile's default until
`resolved` fills it in (the profile itself is None for `auto`, which depends on the devices the
host has). `check` holds the rules between options that every mode shares; a mode's own rules
are its `check` (perf_tests/modes/).
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from perf_tests.baselines.file import AUTO
from perf_tests.cli.option import Option
from perf_tests.cli.options import (DEFAULT_BATCH_STEP, DEFAULT_MAX_BATCH_LIMIT, FORCE, KEYS,
                                    OPTIONS, RENAMED, SET, default_of, old_spellings)
from perf_tests.containers import ContainerError, Image, make_image
from perf_tests.core.cases import Case, Profile
from perf_tests.judging.gate_protocol import run_counts
from perf_tests.runs.launch import Stack
from rn50_model.config import ConfigError
from rn50_model.dataset import resolve_data_dir


class SettingsError(Exception):
    """Options that cannot work together; one line naming them, reported as a usage error."""


def defaults_from_the_table(cls: type) -> type:
    """Give each attribute `cls` declares the default of its row of the option table
    (`default_of`), before `dataclass` reads them: a row's default is written once, in the
    table."""
    for name in cls.__annotations__:
        setattr(cls, name, default_of(name))
    return cls


@dataclass(frozen=True)
@defaults_from_the_table
class Settings:
    """Each attribute's default is its row's (`defaults_from_the_table`)."""
    # -- the matrix and the protocol
    profile: Profile | None
    runs: int | None
    max_runs: int | None
    warmup_iters: int | None
    timed_iters: int | None
    image_size: int | None
    precisions: tuple[str, ...] | None
    batches: tuple[int, ...] | None
    extra_cases: tuple[Case, ...]
    # -- input and launch
    data_backend: str
    data_dir: str | None
    launcher: str | None
    hostfile: str | None
    share_devices: bool
    dist_backend: str
    # -- baselines and verdicts
    baseline_file: Path | None
    update_baselines: bool | str   # True, or "force"
    ignore_host_state: bool
    tolerance: float | str | None   # a fraction, "auto" or None
    memory_tolerance: float
    history: tuple[Path | str, ...]   # folders, or ("none",)
    drift: str
    drift_window: int
    require_baseline: bool
    strict: bool
    results: Path | None
    timeout: float
    # -- the workload
    memory_format: str
    threads: int | None
    loss_scale: str
    compile: bool
    cuda_graphs: bool
    rdzv_port: int | None
    fork_server: bool
    plots: bool
    interconnect_iters: int
    memory_limit: int | None
    # -- other questions than throughput
    collectives: bool
    find_max_batch: bool
    batch_step: int | None
    max_batch_limit: int | None
    explain: str
    time_to_train: bool
    epochs: int | None
    target_top1: float | None
    accuracy_tolerance: float | None
    # -- A/B: a candidate stack
    candidate_python: str | None
    candidate_prefix: tuple[str, ...] | None
    candidate_env: tuple[tuple[str, str], ...]
    # -- container images
    image: str | None
    candidate_image: str | None
    container_runtime: str | None
    image_python: str | None
    # -- more outputs
    exports: tuple[tuple[str, Path], ...]

    @property
    def fixed_tolerance(self) -> float | None:
        """--perf-tolerance where it is a number; None for auto or none given (the modes whose
        band is not the noise's, A/B, time to train, collectives, then take their own)."""
        return None if self.tolerance == AUTO else self.tolerance

    @property
    def force_baselines(self) -> bool:
        """--perf-update-baselines=force: also record the entries the checks refuse."""
        return self.update_baselines == FORCE

    @property
    def stack(self) -> Stack:
        """The stack this session's workers run on (the reference of an A/B session): this
        host's interpreter, or inside --perf-image."""
        return Stack(image=self.image_named(self.image)) if self.image else Stack()

    @property
    def candidate(self) -> Stack | None:
        """The candidate of an A/B session; None where no --perf-candidate-* option is given."""
        if not (self.candidate_python or self.candidate_prefix or self.candidate_env
                or self.candidate_image):
            return None
        # Inside --perf-image where no image of its own is named: the candidate's settings or
        # prefix are changes of that image, not of this host.
        return Stack(python=self.candidate_python or sys.executable,
                     prefix=self.candidate_prefix or (), env=self.candidate_env,
                     image=self.image_named(self.candidate_image or self.image))

    def image_named(self, name: str | None) -> Image | None:
        """`name` on --perf-container-runtime's runtime (else the first that runs it);
        ContainerError where none is installed."""
        if not name:
            return None
        return make_image(name, self.container_runtime, self.image_python)

    def resolved(self, profile: Profile) -> "Settings":
        """These settings with every default settled for `profile`."""
        # A baseline is recorded from more runs than a gate takes: every later verdict leans
        # on its median and its runs.
        runs = self.runs or (profile.baseline_runs if self.update_baselines else profile.runs)
        return replace(
            self, profile=profile, runs=runs,
            max_runs=run_counts(runs, self.max_runs, bool(self.update_baselines)).max_runs,
            warmup_iters=profile.warmup_iters if self.warmup_iters is None
            else self.warmup_iters,
            timed_iters=self.timed_iters or profile.timed_iters,
            image_size=self.image_size or profile.image_size,
            # Smoke runs its multi-node case as simulated nodes here; full measures real
            # devices.
            launcher=self.launcher or ("local" if profile.name == "full" else "simulated"),
            batch_step=self.batch_step or DEFAULT_BATCH_STEP,
            max_batch_limit=self.max_batch_limit or DEFAULT_MAX_BATCH_LIMIT)

    def train_values(self) -> dict:
        """The `TrainConfig` fields the command line sets, for every worker of a case."""
        return {option.train: getattr(self, option.field)
                for option in (*OPTIONS, *KEYS.values()) if option.train}


class OptionParser(argparse.ArgumentParser):
    """The suite's options on a plain parser (as a pytest option group registers them) whose
    error is a SettingsError."""
    def __init__(self) -> None:
        super().__init__(add_help=False, allow_abbrev=False)
        for option in OPTIONS:
            option.add_to(self.add_argument)
        for old in RENAMED:
            old.add_to(self.add_argument)

    def error(self, message: str) -> None:
        raise SettingsError(message)


def settings_of(getoption: Callable[[str], Any]) -> Settings:
    """`Settings` from a parsed command line (`pytest.Config.getoption`): every option's value,
    each `--perf-set KEY=VALUE` in its key's attribute (the last given wins)."""
    given = {option.dest: getoption(option.dest) for option in OPTIONS}
    values = {option.field: option.value(given[option.dest]) for option in OPTIONS
              if option.field}
    return Settings(**values, **dict(SET.value(given[SET.dest])))


def settings_from_args(args: Sequence[str]) -> tuple[Settings, list[str]]:
    """The suite's `Settings` from its options in `args` as a session would take them, and the words
    that are not the suite's options; SettingsError in one line for a bad value. What a tool that
    runs sessions (tools.bisect.command, tools.calibrate.command) checks the options it passes on
    with, instead of a parser of its own."""
    known, unknown = OptionParser().parse_known_args(list(args))
    typed = old_spellings(lambda dest: getattr(known, dest))
    if typed:
        raise SettingsError("; ".join(old.line for old in typed))
    return settings_of(lambda dest: getattr(known, dest)), unknown


def unfilled_settings(table: tuple[Option, ...] = (*OPTIONS, *KEYS.values())
                      ) -> tuple[set[str], set[str]]:
    """(rows of `table` without a `Settings` attribute, attributes without a row): both empty
    for the suite's options and keys (a test checks)."""
    rows = {option.field for option in table if option.field}
    attributes = {spec.name for spec in fields(Settings)}
    return rows - attributes, attributes - rows


def check(settings: Settings) -> None:
    """The rules between options that hold in every mode: the first broken one as
    SettingsError."""
    if settings.launcher == "mpirun" and not settings.hostfile:
        raise SettingsError("--perf-launcher mpirun needs --perf-hostfile FILE (one line per "
                            "node, e.g. 'node1 slots=8')")
    if settings.hostfile and not Path(settings.hostfile).is_file():
        raise SettingsError(f"--perf-hostfile {settings.hostfile} is not a file; pass an "
                            "OpenMPI hostfile")
    if (settings.container_runtime or settings.image_python) and not (
            settings.image or settings.candidate_image):
        given = "--perf-container-runtime" if settings.container_runtime \
            else "--perf-image-python"
        raise SettingsError(f"{given} only applies to an image; add --perf-image or "
                            "--perf-candidate-image, or leave it out")
    if settings.candidate_python and (settings.candidate_image or settings.image):
        raise SettingsError("--perf-candidate-python names an interpreter on this host, not in "
                            "an image; use --perf-candidate-image, and --perf-image-python for "
                            "the image's interpreter")
    try:
        settings.image_named(settings.image)          # each image on a runtime that runs it
        settings.image_named(settings.candidate_image)
    except ContainerError as error:
        raise SettingsError(str(error)) from None
    if settings.share_devices:
        other = next((flag for flag, given in (
            ("--perf-find-max-batch", settings.find_max_batch),
            ("--perf-collectives", settings.collectives),
            ("--perf-time-to-train", settings.time_to_train),
            ("--perf-candidate-*", settings.candidate is not None)) if given), None)
        if other:
            raise SettingsError(f"--perf-set share-devices=on checks the throughput path of "
                                f"ranks sharing devices, not {other}'s figures; leave one of "
                                "them out")
    if settings.max_runs and settings.runs and settings.max_runs < settings.runs:
        raise SettingsError(f"--perf-set max-runs={settings.max_runs} is below --perf-runs "
                            f"{settings.runs}; raise it or leave it out")
    if settings.data_dir:
        if settings.data_backend == "synthetic":
            raise SettingsError("--perf-data-dir needs a real-data backend; add "
                                "--perf-data-backend dali-gpu, dali-cpu or torch")
        try:
            resolve_data_dir(settings.data_dir)
        except ConfigError as error:
            raise SettingsError(f"--perf-data-dir: {error}") from None
