"""Every command-line option of the suite, in one table.

A row of `OPTIONS` is the whole of an option: its flag, how its value parses (`values.py`), its
default, its help, the `Settings` attribute it fills and, where the workers need it, the
`TrainConfig` field it sets (`train`). The plugin registers the rows, `Settings` (settings.py)
has one attribute per row, `Settings.train_values` hands the `train` rows to every worker's
`TrainConfig`, and docs/options.md is generated from the rows (`python3 -m tools.options_doc`):
a new option is one row here, its attribute in `Settings`, plus the code that uses it.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rn50_model.config import DATA_BACKENDS, LOSS_SCALES, MEMORY_FORMATS

from . import values
from .cases import PROFILES, Profile
from .containers import RUNTIMES
from .runs.launchers import LAUNCHERS

PROFILE_CHOICES = ("auto", "full", "smoke")
EXPLAIN_MODES = ("auto", "always", "never")   # --perf-explain (perf_tests/explain.py)
DEFAULT_BATCH_STEP = 32        # DLPerf's unit: "in units of 32, the maximum batch size is 128"
DEFAULT_MAX_BATCH_LIMIT = 1024


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
    Option("--perf-runs", type=values.whole_number(1),
           help="independent runs per case (default: the profile's, 5 full / 3 smoke; 10 "
                "under --update-baselines; in A/B, pairs of runs: 8)"),
    Option("--perf-max-runs", type=values.whole_number(1),
           help="runs a case may take when its first runs do not decide (default: 3 x "
                "--perf-runs; under --update-baselines, 2 x --perf-runs, the second half only "
                "to run again the runs a busy host marked, while they can still make up the "
                "unmarked runs the entry needs; in A/B, 5 x the pairs)"),
    Option("--perf-warmup", field="warmup_iters", train="warmup_iters",
           type=values.whole_number(0),
           help="warm-up iterations per run, not timed (default: the profile's, 20 full / 2 "
                "smoke)"),
    Option("--perf-iters", field="timed_iters", train="timed_iters",
           type=values.whole_number(1),
           help="timed iterations per run (default: the profile's, 100 full / 4 smoke)"),
    Option("--perf-image-size", train="image_size", type=values.whole_number(32, 1024),
           help="image side in pixels (default: the profile's, 224 full / 64 smoke)"),
    Option("--perf-precisions", type=values.precision_list,
           help="comma list of fp32,tf32,amp,bf16 to measure on every topology (default: the "
                "profile's: fp32 b128 and amp b256 in full, fp32 and 1n1g bf16 in smoke)"),
    Option("--perf-batches", type=values.batch_list,
           help="comma list of batch sizes per device, or 'sweep' for 32,64,128,160,256 "
                "(default: the profile's batch for each precision)"),
    Option("--perf-case", field="extra_cases", type=values.case_id, action="append",
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
    Option("--force-baselines", action="store_true", default=False,
           help="with --update-baselines, also record entries the checks refuse (fewer runs "
                "than the profile's baseline runs, over a fifth of the runs beyond twice the "
                "tolerance from their median, a speedup over 1.1x the device count), each with "
                "a warning (default: refuse)"),
    Option("--perf-ignore-host-state", action="store_true", default=False,
           help="judge and record every run as if the host were fit: no host-unfit verdict, "
                "and --update-baselines records the runs a busy host marked instead of running "
                "them again (for a host whose background load belongs in its baseline); the "
                "marks stay in the run records and progress lines (default: judge them)"),
    Option("--perf-tolerance", type=values.fraction,
           help="allowed slowdown as a fraction, over every entry's own (default: the entry's, "
                "else the profile's: 0.05 full / 0.15 smoke)"),
    Option("--perf-memory-tolerance", type=values.fraction, default=0.10,
           help="allowed growth of a case's median peak memory over its baseline entry's, as "
                "a fraction: beyond it the case is a regression, however fast (default 0.10)"),
    Option("--require-baseline", action="store_true", default=False,
           help="fail cases that have no comparable baseline entry, and a session in which "
                "every case skipped (default: warn)"),
    Option("--perf-strict", action="store_true", default=False,
           help="fail cases whose runs stay inconclusive after --perf-max-runs, cases judged "
                "host-unfit (slower only in the runs a busy host marked), and a session in "
                "which every case skipped (default: warn)"),
    Option("--perf-results", type=Path,
           help="new folder for results.json, run records, report and plot, checked writable "
                "when the session starts (default perf_results/<UTC time>)"),
    Option("--perf-timeout", type=values.seconds, default=600.0,
           help="seconds one run may take before its processes are ended (default 600)"),
    # -- the workload -------------------------------------------------------------------------
    Option("--perf-memory-format", train="memory_format", default="auto",
           choices=MEMORY_FORMATS,
           help="tensor layout: channels_last or contiguous (default auto: channels_last)"),
    Option("--perf-threads", train="threads", type=values.whole_number(1),
           help="CPU threads per worker (default: this host's cores split across its workers)"),
    Option("--perf-loss-scale", train="loss_scale", default="dynamic", choices=LOSS_SCALES,
           help="amp loss scaling, dynamic or static (default dynamic)"),
    Option("--perf-compile", train="compile", action="store_true", default=False,
           help="train through torch.compile; cases skip where it cannot build (default "
                "off)"),
    Option("--perf-cuda-graphs", train="cuda_graphs", action="store_true", default=False,
           help="replay each training step as a CUDA graph (default off)"),
    Option("--perf-rdzv-port", type=values.whole_number(1, 65535),
           help="c10d rendezvous port (default: a free port here, or a random one in "
                "29400-29999 on a remote first node)"),
    Option("--perf-interconnect-iters", train="interconnect_iters", default=5,
           type=values.whole_number(0),
           help="timed all-reduces of each message (a DDP bucket, the whole gradient) in the "
                "interconnect probe every multi-device run makes after its timed window; 0: no "
                "probe (default 5)"),
    Option("--perf-memory-limit", train="memory_limit_bytes", type=values.byte_size,
           help="memory each worker may allocate for training, e.g. 40G; beyond it the run is "
                "an oom result (default: no limit)"),
    # -- other questions than throughput ----------------------------------------------------
    Option("--perf-collectives", action="store_true", default=False,
           help="instead of throughput, run only the interconnect probe on each multi-device "
                "case and judge its bus bandwidth against the baseline entry's busbw_gbps (is "
                "the fabric itself slower?) (default off)"),
    Option("--perf-find-max-batch", action="store_true", default=False,
           help="instead of throughput, find per topology and precision the largest batch per "
                "device that trains without running out of memory, by short real runs "
                "(default off)"),
    Option("--perf-batch-step", type=values.whole_number(1),
           help="with --perf-find-max-batch: the batches tried are multiples of this (default "
                f"{DEFAULT_BATCH_STEP})"),
    Option("--perf-max-batch-limit", type=values.whole_number(1),
           help="with --perf-find-max-batch: the largest batch per device tried, rounded down "
                f"to a multiple of the step (default {DEFAULT_MAX_BATCH_LIMIT})"),
    Option("--perf-explain", default="auto", choices=EXPLAIN_MODES,
           help="operator profile of a case, in a short profiled run after its timed runs: "
                "auto (on a regression, naming the operators that slowed down against the "
                "baseline's profile, and under --update-baselines, to store one), always "
                "(every measured case), never (default auto)"),
    Option("--perf-time-to-train", action="store_true", default=False,
           help="also train to a target top-1: the profile's ..._ttt cases, gated on "
                "time-to-train and accuracy (default off)"),
    Option("--perf-epochs", type=values.whole_number(1),
           help="most epochs a time-to-train run trains (default: the profile's, 90 full / 8 "
                "smoke)"),
    Option("--perf-target-top1", type=values.top1,
           help="validation top-1 at which a time-to-train run stops (default: the profile's, "
                "0.759 full (MLPerf's) / 0.8 smoke)"),
    Option("--perf-accuracy-tolerance", type=values.fraction,
           help="allowed top-1 drop below the baseline's, absolute (default: the profile's, "
                "0.005 full / 0.05 smoke)"),
    # -- A/B: a candidate stack -------------------------------------------------------------
    Option("--perf-candidate-python", type=values.interpreter, metavar="PATH",
           help="A/B: measure each case on this stack (the reference) and on a candidate "
                "running this interpreter, runs interleaved; no baseline file involved "
                "(default: no A/B)"),
    Option("--perf-candidate-prefix", type=values.command_prefix, metavar="CMD",
           help="A/B: a command that wraps each candidate launch, e.g. 'apptainer exec --nv "
                "new.sif' (default none)"),
    Option("--perf-candidate-env", type=values.env_setting, action="append", default=(),
           metavar="KEY=VALUE",
           help="A/B: a setting in the candidate's environment, e.g. NCCL_ALGO=Ring "
                "(repeatable; default none)"),
    # -- container images -------------------------------------------------------------------
    Option("--perf-image", metavar="IMAGE",
           help="run this session's workers inside IMAGE: a docker or podman image, an "
                "apptainer .sif, an enroot squashfs, or a root filesystem folder (bwrap); "
                "with a candidate, the reference side's (default: on this host as it is)"),
    Option("--perf-candidate-image", metavar="IMAGE",
           help="A/B: the candidate runs inside IMAGE (as --perf-image); the reference on "
                "this host, or inside --perf-image (default: no A/B)"),
    Option("--perf-container-runtime", choices=tuple(RUNTIMES),
           help="the runtime that runs the images (default: the first installed that runs "
                "an image of its kind: a folder bwrap, a .sif apptainer, a squashfs enroot, "
                "else docker, then podman)"),
    Option("--perf-image-python", metavar="PATH",
           help="the interpreter inside the images that runs the workers (default python3)"),
    # -- more outputs -----------------------------------------------------------------------
    Option("--perf-benchmark-json", type=values.output_file,
           help="also write the session in pytest-benchmark's JSON format, one benchmark per "
                "case, for `pytest-benchmark compare` (default: not written)"),
    Option("--perf-export", field="exports", type=values.export_target, action="append",
           default=(), metavar="FORMAT=PATH",
           help="also write the medians for a dashboard: github-action-benchmark=PATH "
                "(customBiggerIsBetter) or bencher=PATH (Bencher Metric Format); repeatable "
                "(default none)"),
)


def default_of(field: str) -> Any:
    """The `Settings` attribute `field` when its option is not given: the row's default."""
    option = next((option for option in OPTIONS if option.field == field), None)
    if option is None:
        raise KeyError(f"no option fills the setting {field!r}; add its row to OPTIONS")
    return option.value(option.default)
