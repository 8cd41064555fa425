"""Every command-line option of the suite, in one table, under one prefix (`--perf-`).

`GROUPS` holds the options by what they serve, as `pytest --help` and docs/options.md list them:
the gate, the workload, launching, A/B and images, the other modes, the output. A row (`Option`)
is the whole of an option: its flag, how its value parses (`values.py`), its default, its help,
the `Settings` attribute it fills and, where the workers need it, the `TrainConfig` field it sets
(`train`). The fine settings of the protocol, the workload and the modes are not options of their
own but the KEYs of one repeatable `--perf-set KEY=VALUE` (asv's `-a key=value`): a group's
`keys` are rows too, whose flag is the KEY, parsed by the same parsers and filling their own
`Settings` attribute as an option does. The plugin registers the options, `Settings`
(settings.py) has one attribute per row and per key, `Settings.train_values` hands the `train`
rows to every worker's `TrainConfig`, and docs/options.md is generated from the groups
(`rn50-perf options-doc`): a new option is one row here (or a key, which adds no option), its
attribute in `Settings`, plus the code that uses it.

`RENAMED` lists the spellings from before the prefix, in a 0.1 project no second way in: typed,
one is a usage error naming the spelling to use.
"""
from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perf_tests.cli import values
from perf_tests.cli.option import FORCE, PREFIX, Group, Option, RecordBaselines
from perf_tests.containers import RUNTIMES
from perf_tests.core.cases import PROFILES, Profile
from perf_tests.runs.launchers import LAUNCHERS
from rn50_model.config import DATA_BACKENDS, DIST_BACKENDS, LOSS_SCALES, MEMORY_FORMATS

PROFILE_CHOICES = ("auto", "full", "smoke")
# --perf-explain (perf_tests/modes/explain/profiling.py)
EXPLAIN_MODES = ("auto", "always", "never")
DEFAULT_BATCH_STEP = 32        # DLPerf's unit: "in units of 32, the maximum batch size is 128"
DEFAULT_MAX_BATCH_LIMIT = 1024
DRIFT_ACTIONS = ("warn", "fail", "off")   # --perf-drift (perf_tests/baselines/lineage.py)
def _profile(name: str) -> Profile | None:
    return None if name == "auto" else PROFILES[name]


def set_value(text: str) -> tuple[str, Any]:
    """--perf-set KEY=VALUE as (the `Settings` attribute it fills, its value), by the key's own
    parser (`KEYS`, below); a line that names the key, the value and what is accepted where it
    is not one."""
    name, equals, typed = text.partition("=")
    key = KEYS.get(name.strip())
    if key is None or not equals:
        what = f"no key {name!r}" if key is None else f"no value for {name}"
        raise argparse.ArgumentTypeError(f"{text!r}: {what}; use KEY=VALUE with KEY one of "
                                         f"{', '.join(KEYS)}")
    try:
        return key.field, key.parse(typed)
    except argparse.ArgumentTypeError as error:
        raise argparse.ArgumentTypeError(f"{name}={typed}: {error}") from None


# --perf-set keys: the protocol and the verdicts' fine settings
GATE_KEYS: tuple[Option, ...] = (
    Option("warmup", field="warmup_iters", train="warmup_iters",
           type=values.whole_number(0),
           help="warm-up iterations per run, not timed (default: the profile's, 20 full / "
                "2 smoke)"),
    Option("iters", field="timed_iters", train="timed_iters", type=values.whole_number(1),
           help="timed iterations per run (default: the profile's, 100 full / 4 smoke)"),
    Option("max-runs", type=values.whole_number(1),
           help="runs a case may take when its first runs do not decide (default: 3 x "
                "--perf-runs; under --perf-update-baselines, 2 x --perf-runs, the second "
                "half only to run again the runs a busy host marked, while they can still "
                "make up the unmarked runs the entry needs; in A/B, 5 x the pairs)"),
    Option("memory-tolerance", type=values.fraction, default=0.10,
           help="allowed growth of a case's median peak memory over its baseline entry's, "
                "as a fraction: beyond it the case is a regression, however fast (default "
                "0.10)"),
    Option("history", type=values.history_folders, default=(), metavar="PATH[,PATH]|none",
           help="folders of earlier sessions (or sessions' folders) an auto band also learns "
                "the host's movement between sessions from; none: from no earlier session "
                "(default: the folder this session's results folder is in)"),
    Option("drift-window", type=values.whole_number(1), default=90,
           help="days back in a baseline entry's lineage that --perf-drift compares with "
                "(default 90)"),
    Option("timeout", type=values.seconds, default=600.0,
           help="seconds one run may take before its processes are ended (default 600)"),
)
# --perf-set keys: the workload's knobs
WORKLOAD_KEYS: tuple[Option, ...] = (
    Option("image-size", train="image_size", type=values.whole_number(32, 1024),
           help="image side in pixels (default: the profile's, 224 full / 64 smoke)"),
    Option("threads", train="threads", type=values.whole_number(1),
           help="CPU threads per worker (default: this host's cores split across its "
                "workers)"),
    Option("memory-format", train="memory_format", default="auto", choices=MEMORY_FORMATS,
           help="tensor layout: channels_last or contiguous (default auto: channels_last)"),
    Option("loss-scale", train="loss_scale", default="dynamic", choices=LOSS_SCALES,
           help="amp loss scaling, dynamic or static (default dynamic)"),
    Option("compile", train="compile", type=values.switch, default=False,
           help="train through torch.compile; cases skip where it cannot build (default "
                "off)"),
    Option("cuda-graphs", train="cuda_graphs", type=values.switch, default=False,
           help="replay each training step as a CUDA graph (default off)"),
    Option("memory-limit", train="memory_limit_bytes", type=values.byte_size,
           help="memory each worker may allocate for training, e.g. 40G; beyond it the run "
                "is an oom result (default: no limit)"),
)
# --perf-set keys: the rendezvous and the interconnect probe
LAUNCH_KEYS: tuple[Option, ...] = (
    Option("rdzv-port", type=values.whole_number(1, 65535),
           help="the workers' store port on the first node (default: a free port here, or a "
                "random one in 29400-29999 on a remote first node)"),
    Option("fork-server", type=values.switch, default=True,
           help="start the workers of a run on one node by forking them from a process that "
                "imported torch once this session (each run still a new process; a worker in "
                "an image or on another node starts fresh); off: each worker imports torch "
                "itself (default on)"),
    Option("interconnect-iters", train="interconnect_iters", default=5,
           type=values.whole_number(0),
           help="timed all-reduces of each message (a DDP bucket, the whole gradient) in "
                "the interconnect probe every multi-device run makes after its timed "
                "window; 0: no probe (default 5)"),
    Option("share-devices", train="share_devices", type=values.switch, default=False,
           help="run a case that asks for more workers a node than this host has devices "
                "(or CPU cores): rank r on device r mod count, to check the path, not the "
                "figure; such a case is marked in every row, judged shared-devices, never a "
                "pass against a baseline and never recorded as one (default off: it skips)"),
    Option("dist-backend", train="dist_backend", default="auto", choices=DIST_BACKENDS,
           help="the process group's backend: nccl, or gloo (on CUDA too: CUDA tensors "
                "through the host, e.g. for ranks sharing one device where NCCL refuses them) "
                "(default auto: nccl on CUDA, gloo on CPU)"),
)
# --perf-set keys: the other modes' knobs
MODE_KEYS: tuple[Option, ...] = (
    Option("batch-step", type=values.whole_number(1),
           help="with --perf-find-max-batch: the batches tried are multiples of this "
                f"(default {DEFAULT_BATCH_STEP})"),
    Option("max-batch-limit", type=values.whole_number(1),
           help="with --perf-find-max-batch: the largest batch per device tried, rounded "
                f"down to a multiple of the step (default {DEFAULT_MAX_BATCH_LIMIT})"),
    Option("epochs", type=values.whole_number(1),
           help="with --perf-time-to-train: most epochs a run trains (default: the "
                "profile's, 90 full / 8 smoke)"),
    Option("target-top1", type=values.top1,
           help="with --perf-time-to-train: validation top-1 at which a run stops "
                "(default: the profile's, 0.759 full (MLPerf's) / 0.8 smoke)"),
    Option("accuracy-tolerance", type=values.fraction,
           help="with --perf-time-to-train: allowed top-1 drop below the baseline's, "
                "absolute (default: the profile's, 0.005 full / 0.05 smoke)"),
)
# --perf-set keys: what a session writes
OUTPUT_KEYS: tuple[Option, ...] = (
    Option("plots", type=values.switch, default=True,
           help="draw the figures (scaling.png and each mode's) into the results folder; "
                "off: results.json, report.md and the tables only, a second or two less a "
                "session where matplotlib loads slowly (default on)"),
)
GROUPS: tuple[Group, ...] = (
    Group("gate", "the gate: cases, runs, baselines and verdicts", options=(
        Option("--perf-profile", field="profile", default="auto", choices=PROFILE_CHOICES,
               convert=_profile,
               help="the matrix and protocol: full (DLPerf: 5 runs x 20 warm-up x 100 "
                    "iterations at 224 px) or smoke (CPU CI, minutes); default auto: full with "
                    "CUDA devices, else smoke"),
        Option("--perf-precisions", type=values.precision_list,
               help="comma list of fp32,tf32,amp,bf16 to measure on every topology (default: "
                    "the profile's: fp32 b128 and amp b256 in full, fp32 and 1n1g bf16 in "
                    "smoke)"),
        Option("--perf-batches", type=values.batch_list,
               help="comma list of batch sizes per device, or 'sweep' for 32,64,128,160,256 "
                    "(default: the profile's batch for each precision)"),
        Option("--perf-case", field="extra_cases", type=values.case_id, action="append",
               default=(),
               help="an extra case to measure, e.g. 1n4g_bf16_b192 (repeatable; default none)"),
        Option("--perf-runs", type=values.whole_number(1),
               help="independent runs per case (default: the profile's, 5 full / 3 smoke; 10 "
                    "under --perf-update-baselines; in A/B, pairs of runs: 8)"),
        Option("--perf-tolerance", type=values.tolerance,
               help="allowed slowdown as a fraction over every entry's own, or auto: a band "
                    "from the noise of the baseline's and the session's runs and the host's "
                    "earlier sessions (--perf-set history), never below its floor (0.01 full / "
                    "0.05 smoke, down to 0.005 where earlier sessions lay close), for every "
                    "entry with 3 runs or more "
                    "(default: the entry's: auto for entries recorded since auto bands, the "
                    "number an older entry stores, else the profile's: 0.05 full / 0.15 "
                    "smoke)"),
        Option("--perf-baseline-file", type=Path,
               help="baseline JSON to compare with and update (default "
                    "baselines/<hardware-key>.json)"),
        Option("--perf-update-baselines", field="update_baselines", action=RecordBaselines,
               default=False, forms=("--perf-update-baselines=" + FORCE,),
               help="write each measured case into the baseline file, keeping all other "
                    "entries; =force also records entries the checks refuse (fewer runs than the "
                    "profile's baseline runs, over a fifth of the runs beyond twice the tolerance "
                    "from their median, a speedup over 1.1x the device count), each with a "
                    "warning (default off)"),
        Option("--perf-drift", choices=DRIFT_ACTIONS, default="warn",
               help="a pass whose median is beyond its band below an earlier entry of the "
                    "baseline's lineage (the entries refreshes replaced, within --perf-set "
                    "drift-window days): warn, fail the case, or off (default warn)"),
        Option("--perf-require-baseline", action="store_true", default=False,
               help="the CI gate: fail cases that have no comparable baseline entry, and a "
                    "session in which every case skipped; a session that failed no case but "
                    "could not judge one (host-unfit, inconclusive) exits 75, not 0 (default: "
                    "warn)"),
        Option("--perf-strict", action="store_true", default=False,
               help="fail cases whose runs stay inconclusive after max-runs, cases judged "
                    "host-unfit (slower only in the runs a busy host marked), and a session in "
                    "which every case skipped (default: warn)"),
        Option("--perf-ignore-host-state", action="store_true", default=False,
               help="judge and record every run as if the host were fit: no host-unfit verdict, "
                    "and --perf-update-baselines records the runs a busy host marked instead of "
                    "running them again (for a host whose background load belongs in its "
                    "baseline); the marks stay in the run records and progress lines (default: "
                    "judge them)"),
    ), keys=GATE_KEYS),
    Group("workload", "the workload", options=(
        Option("--perf-data-backend", train="data_backend", default="synthetic",
               choices=DATA_BACKENDS,
               help="input pipeline: synthetic (device-resident batch), dali-gpu, dali-cpu or "
                    "torch (default synthetic)"),
        Option("--perf-data-dir",
               help="ImageNet-style folder <dir>/train/<class>/*.JPEG for the real-data "
                    "backends (default: a generated JPEG set, cached)"),
        Option("--perf-set", field=None, type=set_value, action="append",
               default=(), metavar="KEY=VALUE",
               help="a fine setting of the protocol, the workload or a mode, repeatable, e.g. "
                    "iters=50 or compile=on; KEY one of " + ", ".join(
                        key.flag for key in (*GATE_KEYS, *WORKLOAD_KEYS, *LAUNCH_KEYS,
                                             *MODE_KEYS))
                    + " (docs/options.md: each key's values and default; default none)"),
    ), keys=WORKLOAD_KEYS),
    Group("launch", "launching", options=(
        Option("--perf-launcher", choices=LAUNCHERS,
               help="how workers start: local (the suite's agent here), simulated (one agent "
                    "a node, all here), slurm (srun in an allocation), mpirun "
                    "(--perf-hostfile); default simulated for smoke, local for full"),
        Option("--perf-hostfile",
               help="OpenMPI hostfile for --perf-launcher mpirun: one line per node (default "
                    "none)"),
    ), keys=LAUNCH_KEYS),
    Group("ab", "A/B and container images", options=(
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
        Option("--perf-candidate-image", metavar="IMAGE",
               help="A/B: the candidate runs inside IMAGE (as --perf-image); the reference on "
                    "this host, or inside --perf-image (default: no A/B)"),
        Option("--perf-image", metavar="IMAGE",
               help="run this session's workers inside IMAGE: a docker or podman image, an "
                    "apptainer .sif, an enroot squashfs, or a root filesystem folder (bwrap); "
                    "with a candidate, the reference side's (default: on this host as it is)"),
        Option("--perf-container-runtime", choices=tuple(RUNTIMES),
               help="the runtime that runs the images (default: the first installed that runs "
                    "an image of its kind: a folder bwrap, a .sif apptainer, a squashfs enroot, "
                    "else docker, then podman)"),
        Option("--perf-image-python", metavar="PATH",
               help="the interpreter inside the images that runs the workers (default "
                    "python3)"),
    )),
    Group("modes", "other questions than throughput", options=(
        Option("--perf-collectives", action="store_true", default=False,
               help="instead of throughput, run only the interconnect probe on each "
                    "multi-device case and judge its bus bandwidth against the baseline entry's "
                    "busbw_gbps (is the fabric itself slower?) (default off)"),
        Option("--perf-find-max-batch", action="store_true", default=False,
               help="instead of throughput, find per topology and precision the largest batch "
                    "per device that trains without running out of memory, by short real runs "
                    "(default off)"),
        Option("--perf-time-to-train", action="store_true", default=False,
               help="also train to a target top-1: the profile's ..._ttt cases, gated on "
                    "time-to-train and accuracy (default off)"),
        Option("--perf-explain", default="auto", choices=EXPLAIN_MODES,
               help="operator profile of a case, in a short profiled run after its timed runs: "
                    "auto (on a regression, naming the operators that slowed down against the "
                    "baseline's profile, and under --perf-update-baselines, to store one), "
                    "always (every measured case), never (default auto)"),
    ), keys=MODE_KEYS),
    Group("output", "output", options=(
        Option("--perf-results", type=Path,
               help="new folder for results.json, run records, report and plot, checked "
                    "writable when the session starts (default perf_results/<UTC time>)"),
        Option("--perf-export", field="exports", type=values.export_target, action="append",
               default=(), metavar="FORMAT=PATH",
               help="also write the session for another tool: pytest-benchmark=PATH "
                    "(pytest-benchmark's JSON, one benchmark per case, for `pytest-benchmark "
                    "compare`), github-action-benchmark=PATH (customBiggerIsBetter: the "
                    "measures where bigger is better), github-action-benchmark-smaller=PATH "
                    "(customSmallerIsBetter: peak memory, time to train...) or bencher=PATH "
                    "(Bencher Metric Format); repeatable (default none)"),
    ), keys=OUTPUT_KEYS),
)
OPTIONS: tuple[Option, ...] = tuple(option for group in GROUPS for option in group.options)
KEYS: dict[str, Option] = {key.flag: key for group in GROUPS for key in group.keys}
SET = next(option for option in OPTIONS if option.flag == "--perf-set")


def default_of(field: str) -> Any:
    """The `Settings` attribute `field` when its option or key is not given: the row's
    default."""
    option = next((option for option in (*OPTIONS, *KEYS.values()) if option.field == field),
                  None)
    if option is None:
        raise KeyError(f"no option or --perf-set key fills the setting {field!r}; add its row "
                       "to a group of GROUPS")
    return option.value(option.default)


@dataclass(frozen=True)
class Renamed:
    """A spelling from before the prefix: not an option any more, but recognised, so that a
    session typed with it stops with one line naming the spelling to use (`line`), rather than
    pytest's "unrecognized arguments"."""
    flag: str    # --perf-iters
    use: str     # --perf-set iters={}

    @property
    def dest(self) -> str:
        return self.flag.removeprefix("--").replace("-", "_")

    @property
    def takes_value(self) -> bool:
        return "{}" in self.use

    def add_to(self, add: Callable[..., None]) -> None:
        """Register, out of --help, so that typing it reaches `line`."""
        add(self.flag, dest=self.dest, help=argparse.SUPPRESS,
            **({"action": "append", "default": []} if self.takes_value else
               {"action": "store_true", "default": False}))

    def typed(self, getoption: Callable[[str], Any]) -> bool:
        """Whether it was typed, from a parsed command line where `add_to` registered it."""
        return bool(getoption(self.dest))

    @property
    def new(self) -> str:
        """The spelling to use: `--perf-launcher`, `--perf-set iters=N`."""
        flag, _, rest = self.use.partition(" ")
        key = KEYS.get(rest.partition("=")[0])
        value = key.placeholder if key is not None and flag == SET.flag else "PATH"
        return flag if rest == "{}" else self.use.replace("{}", value)

    @property
    def line(self) -> str:
        """`--launcher was renamed: use --perf-launcher`."""
        return f"{self.flag} was renamed: use {self.new}"


RENAMED: tuple[Renamed, ...] = (
    Renamed("--data-backend", "--perf-data-backend {}"),
    Renamed("--data-dir", "--perf-data-dir {}"),
    Renamed("--launcher", "--perf-launcher {}"),
    Renamed("--hostfile", "--perf-hostfile {}"),
    Renamed("--baseline-file", "--perf-baseline-file {}"),
    Renamed("--update-baselines", "--perf-update-baselines"),
    Renamed("--force-baselines", "--perf-update-baselines=" + FORCE),
    Renamed("--require-baseline", "--perf-require-baseline"),
    Renamed("--perf-benchmark-json", "--perf-export pytest-benchmark={}"),
    Renamed("--perf-compile", "--perf-set compile=on"),
    Renamed("--perf-cuda-graphs", "--perf-set cuda-graphs=on"),
    # the other options that became --perf-set keys: --perf-KEY VALUE
    *(Renamed(PREFIX + key, f"--perf-set {key}={{}}") for key in (
        "warmup", "iters", "max-runs", "memory-tolerance", "timeout", "image-size", "threads",
        "memory-format", "loss-scale", "memory-limit", "rdzv-port", "interconnect-iters",
        "batch-step", "max-batch-limit", "epochs", "target-top1", "accuracy-tolerance")),
)



def old_spellings(getoption: Callable[[str], Any]) -> list[Renamed]:
    """The spellings from before the prefix typed on a parsed command line."""
    return [old for old in RENAMED if old.typed(getoption)]

def values_taken_for_paths(args: Sequence[str]) -> list[str]:
    """`--perf-image /images/b` for each value-taking option written apart from its value where
    that value is a path that exists: pytest looks for its rootdir and ini file before an
    installed plugin's options are known, and takes such a value for a test path."""
    flags = {option.flag for option in OPTIONS if option.takes_value}
    return [f"{flag} {value}" for flag, value in zip(args, args[1:])
            if flag in flags and Path(value).exists()]
