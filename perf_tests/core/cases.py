"""The configurations the suite measures: case ids, the DLPerf matrix and the smoke profile.

A case is (nodes, devices per node, precision, batch per device), named
`{nodes}n{gpus_per_node}g_{precision}_b{batch}` so `pytest perf_tests -k 1n8g_amp` selects it.
A profile fixes the matrix and the measurement protocol (runs, warm-up, timed iterations).
A time-to-train case (`--perf-time-to-train`) has the same id with `_ttt` appended; its profile
(`TIME_TO_TRAIN_PROFILES`, by the session's profile name) fixes the recipe: epochs, target top-1,
tolerances, runs and the data set.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from rn50_model.config import MLPERF_TARGET_TOP1, NVIDIA_EPOCHS, NVIDIA_WARMUP_EPOCHS, PRECISIONS
from rn50_model.dataset import LearnableDatasetSpec

TIME_TO_TRAIN_SUFFIX = "_ttt"


def is_time_to_train(case_id: str) -> bool:
    """A time-to-train case (judged on its time to the target top-1, its runs whole trainings)."""
    return case_id.endswith(TIME_TO_TRAIN_SUFFIX)


CASE_ID = re.compile(r"(?P<nodes>\d+)n(?P<gpus_per_node>\d+)g_(?P<precision>[a-z0-9]+)"
                     r"_b(?P<batch>\d+)(?P<time_to_train>_ttt)?")
TOPOLOGY = re.compile(r"(?P<nodes>\d+)n(?P<gpus_per_node>\d+)g")
CASE_ID_FORMAT = ("{nodes}n{gpus_per_node}g_{precision}_b{batch}[_ttt], e.g. 1n8g_amp_b256 or "
                  "1n8g_amp_b256_ttt")
SWEEP_BATCHES = (32, 64, 128, 160, 256)


class CaseIdError(ValueError):
    """A case id that does not parse; the message says the expected form."""


@dataclass(frozen=True, order=True)
class Case:
    nodes: int
    gpus_per_node: int
    precision: str
    batch_per_device: int
    time_to_train: bool = False   # trains to a target top-1 instead of measuring throughput

    @property
    def case_id(self) -> str:
        return (f"{self.nodes}n{self.gpus_per_node}g_{self.precision}"
                f"_b{self.batch_per_device}{'_ttt' if self.time_to_train else ''}")

    @property
    def topology(self) -> str:
        return f"{self.nodes}n{self.gpus_per_node}g"

    @property
    def devices(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def single_device(self) -> "Case":
        """The 1n1g case of the same precision and batch: the reference for speedup."""
        return Case(1, 1, self.precision, self.batch_per_device)

    @classmethod
    def parse(cls, case_id: str) -> "Case":
        match = CASE_ID.fullmatch(case_id.strip())
        if not match:
            raise CaseIdError(f"case id {case_id!r} does not parse; the form is {CASE_ID_FORMAT}")
        case = cls(int(match["nodes"]), int(match["gpus_per_node"]), match["precision"],
                   int(match["batch"]), bool(match["time_to_train"]))
        if case.precision not in PRECISIONS:
            raise CaseIdError(f"case id {case_id!r} has precision {case.precision!r}; "
                              f"use one of {', '.join(PRECISIONS)}")
        if min(case.nodes, case.gpus_per_node, case.batch_per_device) < 1:
            raise CaseIdError(f"case id {case_id!r} has a zero count; nodes, devices and batch "
                              "are at least 1")
        return case


@dataclass(frozen=True)
class Profile:
    name: str
    topologies: tuple[tuple[int, int], ...]
    precision_batches: tuple[tuple[str, int], ...]   # the default (precision, batch) pairs
    extra_cases: tuple[Case, ...]                    # cases beyond topologies x pairs
    image_size: int
    runs: int
    baseline_runs: int                               # runs under --perf-update-baselines
    warmup_iters: int
    timed_iters: int
    tolerance: float                                 # the band of entries that store none
    band_floor: float                                # the least an auto band can be
    default_batch: dict[str, int]      # the batch of each precision, where precisions are chosen

    def cases(self, precisions: tuple[str, ...] | None = None,
              batches: tuple[int, ...] | None = None) -> list[Case]:
        """The matrix, 1n1g first so speedups have their reference from this session."""
        if precisions is None and batches is None:
            pairs = self.precision_batches
            extra = self.extra_cases
        else:
            chosen = precisions or tuple(dict.fromkeys(p for p, _ in self.precision_batches))
            pairs = tuple((precision, batch) for precision in chosen
                          for batch in (batches or (self.default_batch[precision],)))
            extra = ()
        cases = {Case(nodes, gpus, precision, batch)
                 for nodes, gpus in self.topologies for precision, batch in pairs}
        cases.update(extra)
        return sorted(cases, key=lambda case: (case.devices, case.nodes, case.precision,
                                               case.batch_per_device))


# DLPerf's protocol: 5 runs of 20 warm-up + 100 timed iterations at 224 px.
FULL = Profile(
    name="full",
    topologies=((1, 1), (1, 2), (1, 4), (1, 8), (2, 8), (4, 8)),
    precision_batches=(("fp32", 128), ("amp", 256)),
    extra_cases=(),
    image_size=224, runs=5, baseline_runs=10, warmup_iters=20, timed_iters=100,
    # The floor: five times the most the same case moved between sessions with nothing changed
    # on the GPUs measured (docs/verdicts.md, "The band").
    tolerance=0.05, band_floor=0.01,
    default_batch={"fp32": 128, "tf32": 256, "amp": 256, "bf16": 256},
)

# A few minutes on a 2-core CPU: the same code paths (the agent, gloo, several nodes' store,
# both CPU precisions) at a size that finishes. Its tolerance comes from calibration on such
# machines (tools/calibrate/command.py).
SMOKE = Profile(
    name="smoke",
    topologies=((1, 1), (1, 2), (2, 1)),
    precision_batches=(("fp32", 8),),
    # bf16 has no native support on many CPUs (no AVX512-BF16 or AMX) and runs ~8x slower
    # than fp32 there; half the batch keeps its case near the others' duration.
    extra_cases=(Case(1, 1, "bf16", 4),),
    image_size=64, runs=3, baseline_runs=10, warmup_iters=2, timed_iters=4,
    tolerance=0.15, band_floor=0.05,
    default_batch={"fp32": 8, "tf32": 8, "amp": 8, "bf16": 4},
)

# The iterations of the profiled run (--perf-explain) that stores or explains a case's operator
# profile, after the case's warm-up iterations.
PROFILED_ITERATIONS = 3

PROFILES = {profile.name: profile for profile in (FULL, SMOKE)}


def profile_cases(context) -> list[Case]:
    """The profile's throughput cases (its precisions and batches as the command line chose)
    and the ones asked for by id."""
    settings = context.settings
    cases = context.profile.cases(settings.precisions, settings.batches)
    cases.extend(case for case in settings.extra_cases if case not in cases)
    return [case for case in cases if not case.time_to_train]


@dataclass(frozen=True)
class TimeToTrainProfile:
    topologies: tuple[tuple[int, int], ...]
    precision: str
    batch_per_device: int
    image_size: int
    epochs: int
    warmup_epochs: int
    target_top1: float
    accuracy_tolerance: float   # absolute top-1
    time_tolerance: float       # relative time-to-train, the floor of a baseline's band
    runs: int
    data_backend: str           # where the session's backend is the (accuracy-less) synthetic
    generated: LearnableDatasetSpec | None  # the data set without --perf-data-dir; None: required

    def cases(self) -> list[Case]:
        return [Case(nodes, gpus, self.precision, self.batch_per_device, time_to_train=True)
                for nodes, gpus in self.topologies]


# NVIDIA's recipe to MLPerf's target on ImageNet (MLPerf takes at least 5 runs).
TIME_TO_TRAIN_FULL = TimeToTrainProfile(
    topologies=((1, 1), (1, 8)), precision="amp", batch_per_device=256, image_size=224,
    epochs=NVIDIA_EPOCHS, warmup_epochs=NVIDIA_WARMUP_EPOCHS, target_top1=MLPERF_TARGET_TOP1,
    accuracy_tolerance=0.005, time_tolerance=0.10, runs=5, data_backend="dali-gpu",
    generated=None)

# Four colour classes of 40 px JPEGs, trained at 32 px: on two cores it reaches 80% in about
# three epochs (under a minute a run); it tops out near 95%, so accuracy can still regress.
# One epoch more or less is a third of the time: hence the wide time band.
TIME_TO_TRAIN_SMOKE = TimeToTrainProfile(
    topologies=((1, 1),), precision="fp32", batch_per_device=16, image_size=32, epochs=8,
    warmup_epochs=1, target_top1=0.8, accuracy_tolerance=0.05, time_tolerance=0.35, runs=3,
    data_backend="dali-cpu",
    generated=LearnableDatasetSpec(num_classes=4, train_per_class=64, val_per_class=16, side=40))

TIME_TO_TRAIN_PROFILES = {"full": TIME_TO_TRAIN_FULL, "smoke": TIME_TO_TRAIN_SMOKE}


# The kind of a results.json row: the mode that measured it (perf_tests/results/case_result.py).
THROUGHPUT, AB, MAX_BATCH, TIME_TO_TRAIN = "throughput", "ab", "max-batch", "time-to-train"
COLLECTIVES = "collectives"
# The two sides of an A/B session, as its rows in results.json name them.
REFERENCE, CANDIDATE = "reference", "candidate"
KINDS = (THROUGHPUT, AB, MAX_BATCH, TIME_TO_TRAIN, COLLECTIVES)


def row_kind(case_id: str, row: dict) -> str:
    """The mode that measured a results.json row, also for files written before `kind`."""
    if row.get("kind") in KINDS:
        return row["kind"]
    if is_time_to_train(case_id):
        return TIME_TO_TRAIN
    if row.get("candidate") or row.get("candidate_stack"):
        return AB
    return THROUGHPUT
