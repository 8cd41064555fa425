"""Every command-line option of the suite, in one table, and the `Settings` built from it.

A row of `OPTIONS` is the whole of an option: its flag, how its value parses, its default, its
help, the `Settings` attribute it fills and, where the workers need it, the `TrainConfig` field
it sets (`train`). The plugin registers the rows, `Settings` has one attribute per row, and
`Settings.train_values` hands the `train` rows to every worker's `TrainConfig`: a new option is
one row here, plus the code that uses it. Rules between options (`--perf-max-runs` below
`--perf-runs`, a candidate with `--update-baselines`, ...) live in `plugin.settings_from`.
"""
from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rn50_model.config import DATA_BACKENDS, LOSS_SCALES, MEMORY_FORMATS

from . import options
from .cases import PROFILES, Profile
from .explain import EXPLAIN_MODES
from .launchers import LAUNCHERS, Stack
from .max_batch import DEFAULT_BATCH_STEP, DEFAULT_MAX_BATCH_LIMIT

PROFILE_CHOICES = ("auto", "full", "smoke")


@dataclass(frozen=True)
class Option:
    """One command-line option. `default` is the command line's (None: the profile's or the
    host's, settled in `Settings.resolved` or by the code that reads it); `convert` turns the
    parsed value into the `Settings` attribute; `train` names the `TrainConfig` field it sets."""
    flag: str
    help: str
    field: str = ""  # default: the flag without --perf- or --, dashes as underscores
    default: Any = None
    type: Callable[[str], Any] | None = None
    choices: tuple[str, ...] | None = None
    action: str | None = None  # store_true or append
    metavar: str | None = None
    train: str | None = None
    convert: Callable[[Any], Any] | None = None

    def __post_init__(self) -> None:
        if not self.field:
            name = self.flag.removeprefix("--").removeprefix("perf-")
            object.__setattr__(self, "field", name.replace("-", "_"))

    @property
    def dest(self) -> str:
        """The name pytest gives the value: `config.getoption(option.dest)`."""
        return self.flag.removeprefix("--").replace("-", "_")

    def add_to(self, add: Callable[..., None]) -> None:
        """Register with a pytest option group's (or an argparse parser's) `addoption`."""
        keywords = {name: value for name, value in (
            ("type", self.type), ("choices", self.choices), ("action", self.action),
            ("metavar", self.metavar)) if value is not None}
        default = list(self.default) if self.action == "append" else self.default
        add(self.flag, default=default, help=self.help, **keywords)

    def value(self, parsed: Any) -> Any:
        """The `Settings` attribute for the command line's value."""
        if self.convert is not None:
            return self.convert(parsed)
        return tuple(parsed) if self.action == "append" else parsed


def _profile(name: str) -> Profile | None:
    return None if name == "auto" else PROFILES[name]


OPTIONS: tuple[Option, ...] = (
    # -- the matrix and the protocol ------------------------------------------------------
    Option("--perf-profile", field="profile", default="auto", choices=PROFILE_CHOICES,
           convert=_profile,
           help="the matrix and protocol: full (DLPerf: 5 runs x 20 warm-up x 100 iterations "
                "at 224 px) or smoke (CPU CI, minutes); default auto: full with CUDA devices, "
                "else smoke"),
    Option("--perf-runs", type=options.whole_number(1),
           help="independent runs per case (default: the profile's, 5 full / 3 smoke; in "
                "A/B, pairs of runs: 8)"),
    Option("--perf-max-runs", type=options.whole_number(1),
           help="runs a case may take when its first runs do not decide (default: 3 x "
                "--perf-runs; under --update-baselines, --perf-runs; in A/B, 5 x the pairs)"),
    Option("--perf-warmup", field="warmup_iters", train="warmup_iters",
           type=options.whole_number(0),
           help="warm-up iterations per run, not timed (default: the profile's, 20 full / 2 "
                "smoke)"),
    Option("--perf-iters", field="timed_iters", train="timed_iters",
           type=options.whole_number(1),
           help="timed iterations per run (default: the profile's, 100 full / 4 smoke)"),
    Option("--perf-image-size", train="image_size", type=options.whole_number(32, 1024),
           help="image side in pixels (default: the profile's, 224 full / 64 smoke)"),
    Option("--perf-precisions", type=options.precision_list,
           help="comma list of fp32,tf32,amp,bf16 to measure on every topology (default: the "
                "profile's: fp32 b128 and amp b256 in full, fp32 and 1n1g bf16 in smoke)"),
    Option("--perf-batches", type=options.batch_list,
           help="comma list of batch sizes per device, or 'sweep' for 32,64,128,160,256 "
                "(default: the profile's batch for each precision)"),
    Option("--perf-case", field="extra_cases", type=options.case_id, action="append",
           default=(),
           help="an extra case to measure, e.g. 1n4g_bf16_b192 (repeatable; default none)"),
    # -- input and launch -----------------------------------------------------------------
    Option("--data-backend", train="data_backend", default="synthetic", choices=DATA_BACKENDS,
           help="input pipeline: synthetic (device-resident batch), dali-gpu, dali-cpu or "
                "torch (default synthetic)"),
    Option("--data-dir",
           help="ImageNet-style folder <dir>/train/<class>/*.JPEG for the real-data backends "
                "(default: a generated JPEG set, cached)"),
    Option("--launcher", choices=LAUNCHERS,
           help="how workers start: local (torchrun here), simulated (several torchrun agents "
                "here as nodes), slurm (srun in an allocation), mpirun (--hostfile); default "
                "simulated for smoke, local for full"),
    Option("--hostfile",
           help="OpenMPI hostfile for --launcher mpirun: one line per node (default none)"),
    # -- baselines and verdicts -----------------------------------------------------------
    Option("--baseline-file", type=Path,
           help="baseline JSON to compare with and update (default "
                "baselines/<hardware-key>.json)"),
    Option("--update-baselines", action="store_true", default=False,
           help="write each measured case into the baseline file, keeping all other entries "
                "(default off)"),
    Option("--perf-tolerance", type=options.fraction,
           help="allowed slowdown as a fraction, over every entry's own (default: the entry's, "
                "else the profile's: 0.05 full / 0.15 smoke)"),
    Option("--require-baseline", action="store_true", default=False,
           help="fail cases that have no comparable baseline entry (default: warn)"),
    Option("--perf-strict", action="store_true", default=False,
           help="fail cases whose runs stay inconclusive after --perf-max-runs (default: warn)"),
    Option("--perf-results", type=Path,
           help="new folder for results.json, run records, report and plot (default "
                "perf_results/<UTC time>)"),
    Option("--perf-timeout", type=options.seconds, default=600.0,
           help="seconds one run may take before its processes are ended (default 600)"),
    # -- the workload -------------------------------------------------------------------------
    Option("--perf-memory-format", train="memory_format", default="auto",
           choices=MEMORY_FORMATS,
           help="tensor layout: channels_last or contiguous (default auto: channels_last)"),
    Option("--perf-threads", train="threads", type=options.whole_number(1),
           help="CPU threads per worker (default: this host's cores split across its workers)"),
    Option("--perf-loss-scale", train="loss_scale", default="dynamic", choices=LOSS_SCALES,
           help="amp loss scaling, dynamic or static (default dynamic)"),
    Option("--perf-compile", train="compile", action="store_true", default=False,
           help="train through torch.compile (default off)"),
    Option("--perf-cuda-graphs", train="cuda_graphs", action="store_true", default=False,
           help="replay each training step as a CUDA graph (default off)"),
    Option("--perf-rdzv-port", type=options.whole_number(1, 65535),
           help="c10d rendezvous port (default: a free port here, or a random one in "
                "29400-29999 on a remote first node)"),
    Option("--perf-memory-limit", train="memory_limit_bytes", type=options.byte_size,
           help="memory each worker may allocate for training, e.g. 40G; beyond it the run is "
                "an oom result (default: no limit)"),
    # -- other questions than throughput ----------------------------------------------------
    Option("--perf-find-max-batch", action="store_true", default=False,
           help="instead of throughput, find per topology and precision the largest batch per "
                "device that trains without running out of memory, by short real runs "
                "(default off)"),
    Option("--perf-batch-step", type=options.whole_number(1),
           help="with --perf-find-max-batch: the batches tried are multiples of this (default "
                f"{DEFAULT_BATCH_STEP})"),
    Option("--perf-max-batch-limit", type=options.whole_number(1),
           help="with --perf-find-max-batch: the largest batch per device tried (default "
                f"{DEFAULT_MAX_BATCH_LIMIT})"),
    Option("--perf-explain", default="auto", choices=EXPLAIN_MODES,
           help="operator profile of a case, in a short profiled run after its timed runs: "
                "auto (on a regression, naming the operators that slowed down against the "
                "baseline's profile, and under --update-baselines, to store one), always "
                "(every measured case), never (default auto)"),
    Option("--perf-time-to-train", action="store_true", default=False,
           help="also train to a target top-1: the profile's ..._ttt cases, gated on "
                "time-to-train and accuracy (default off)"),
    Option("--perf-epochs", type=options.whole_number(1),
           help="most epochs a time-to-train run trains (default: the profile's, 90 full / 8 "
                "smoke)"),
    Option("--perf-target-top1", type=options.top1,
           help="validation top-1 at which a time-to-train run stops (default: the profile's, "
                "0.759 full (MLPerf's) / 0.8 smoke)"),
    Option("--perf-accuracy-tolerance", type=options.fraction,
           help="allowed top-1 drop below the baseline's, absolute (default: the profile's, "
                "0.005 full / 0.05 smoke)"),
    # -- A/B: a candidate stack -------------------------------------------------------------
    Option("--perf-candidate-python", type=options.interpreter, metavar="PATH",
           help="A/B: measure each case on this stack (the reference) and on a candidate "
                "running this interpreter, runs interleaved; no baseline file involved "
                "(default: no A/B)"),
    Option("--perf-candidate-prefix", type=options.command_prefix, metavar="CMD",
           help="A/B: a command that wraps each candidate launch, e.g. 'apptainer exec --nv "
                "new.sif' (default none)"),
    Option("--perf-candidate-env", type=options.env_setting, action="append", default=(),
           metavar="KEY=VALUE",
           help="A/B: a setting in the candidate's environment, e.g. NCCL_ALGO=Ring "
                "(repeatable; default none)"),
    # -- more outputs -----------------------------------------------------------------------
    Option("--perf-benchmark-json", type=options.output_file,
           help="also write the session in pytest-benchmark's JSON format, one benchmark per "
                "case, for `pytest-benchmark compare` (default: not written)"),
    Option("--perf-export", field="exports", type=options.export_target, action="append",
           default=(), metavar="FORMAT=PATH",
           help="also write the medians for a dashboard: github-action-benchmark=PATH "
                "(customBiggerIsBetter) or bencher=PATH (Bencher Metric Format); repeatable "
                "(default none)"),
)


def _candidate(self) -> Stack | None:
    """The candidate of an A/B session; None where no --perf-candidate-* option is given."""
    if not (self.candidate_python or self.candidate_prefix or self.candidate_env):
        return None
    return Stack(python=self.candidate_python or sys.executable,
                 prefix=self.candidate_prefix or (), env=self.candidate_env)


def _resolved(self, profile: Profile):
    """These settings with every default settled for `profile`."""
    # A baseline is recorded from more runs than a gate takes: every later verdict leans on
    # its median and its runs.
    runs = self.runs or (profile.baseline_runs if self.update_baselines else profile.runs)
    return replace(
        self, profile=profile, runs=runs,
        max_runs=max(self.max_runs or (runs if self.update_baselines else 3 * runs), runs),
        warmup_iters=profile.warmup_iters if self.warmup_iters is None else self.warmup_iters,
        timed_iters=self.timed_iters or profile.timed_iters,
        image_size=self.image_size or profile.image_size,
        # Smoke runs its multi-node case as simulated nodes here; full measures real devices.
        launcher=self.launcher or ("local" if profile.name == "full" else "simulated"),
        batch_step=self.batch_step or DEFAULT_BATCH_STEP,
        max_batch_limit=self.max_batch_limit or DEFAULT_MAX_BATCH_LIMIT)


def _train_values(self) -> dict:
    """The `TrainConfig` fields the command line sets, for every worker of a case."""
    return {option.train: getattr(self, option.field) for option in self.OPTIONS
            if option.train}


def settings_class(table: tuple[Option, ...]) -> type:
    """A frozen dataclass with one attribute per row of `table`, defaulting to the row's."""
    made = dataclasses.make_dataclass(
        "Settings",
        [(option.field, Any, dataclasses.field(default=option.value(option.default)))
         for option in table],
        namespace={"__doc__": "The command line, one attribute per row of `OPTIONS`; None "
                              "stands for the profile's default until `resolved` fills it in "
                              "(the profile itself is None for `auto`, which depends on the "
                              "devices the host has).",
                   "OPTIONS": table, "candidate": property(_candidate), "resolved": _resolved,
                   "train_values": _train_values},
        frozen=True)
    made.__module__ = __name__
    return made


Settings = settings_class(OPTIONS)


def settings_of(getoption: Callable[[str], Any], settings_type: type = Settings):
    """`Settings` (or another `settings_class`) from a parsed command line
    (`pytest.Config.getoption`)."""
    return settings_type(**{option.field: option.value(getoption(option.dest))
                            for option in settings_type.OPTIONS})
