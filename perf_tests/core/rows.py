"""The rows of results.json as types: one per kind, the one place that names a row's keys.

A mode builds its case's row as this type (perf_tests/core/row_values.py's `new_row`, through
`CaseResult.judged`): a field the kind's type does not declare fails there, named, so a mode
cannot write an undeclared field; later steps amend it (`amended_row`) and results.json gets the
fields as written. Every reader of results.json (the report's tables and figures, the exports,
the baselines made from a row, the history site and the tools) reads it through `row_of`, which
gives the kind's type: `row.median_ips`, not `row["median_ips"]`, so a field a reader names
wrongly fails where it is read, and each field has one declared type and default. A key the type
does not declare (a file from a newer suite) is kept in `unknown` as read, and `to_dict` writes
the row back as it was. Old files (no `kind`) get their kind from `row_kind`; a field an older
file lacks reads as its default. Each field is `described`: its line in docs/formats.md's tables
of a row's fields (`rn50-perf formats-doc`) is its metadata.

What each kind measures, and where each measure's figures, band and verdict are among these
fields, is perf_tests/results/measures.py.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from perf_tests.core.cases import AB, COLLECTIVES, MAX_BATCH, THROUGHPUT, TIME_TO_TRAIN

EMPTY: Mapping[str, Any] = MappingProxyType({})
# A null that states something: `min_detectable_slowdown: null` (no slowdown was detectable)
MIN_DETECTABLE = "min_detectable_slowdown"


# A field's one-line description, in its metadata: docs/formats.md's table of each kind's
# fields is made of them (`rn50-perf formats-doc`).
DOC = "doc"
# The fields that are no key of a row in the file: its key under `cases`, what is kept as read,
# the declared keys held as null, the keys its mode wrote.
NOT_KEYS = frozenset({"case_id", "unknown", "nulls", "written"})


def described(default: Any, text: str) -> Any:
    """A field with its default (an empty mapping: a read-only one per row) and `text`, what it
    holds in the user's words."""
    if default is EMPTY:
        return field(default_factory=lambda: EMPTY, metadata={DOC: text})
    return field(default=default, metadata={DOC: text})


def plain(value: Any) -> Any:
    """A field's value as JSON holds it."""
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, MappingProxyType):
        return dict(value)
    if isinstance(value, Side):
        return value.to_dict()
    return value


def to_dict(typed: Any) -> dict:
    """A row or a side as results.json holds it: every field that has a value, the declared
    keys it held as null (`nulls`), then `unknown`; a row its mode built (`new_row`), every key
    its mode wrote, in that order, an empty one too."""
    nulls = getattr(typed, "nulls", frozenset())
    if typed.written:
        return {key: None if key in nulls else plain(getattr(typed, key))
                for key in typed.written}
    data = {}
    for declared in dataclasses.fields(typed):
        if declared.name in NOT_KEYS:
            continue
        value = getattr(typed, declared.name)
        if declared.name in nulls:
            data[declared.name] = None
        elif not (value is None or value == () or value == EMPTY or value == Side()):
            data[declared.name] = plain(value)
    data.update(typed.unknown)
    return data


@dataclass(frozen=True)
class Row:
    """What a row of every kind holds: the case's layout and inputs, its runs' img/s, the
    verdict and its line, and what the session did with the baseline."""
    case_id: str = described(dataclasses.MISSING, "not a key in the row: its key under `cases`")
    kind: str = described(THROUGHPUT, "the mode that measured it: `throughput`, `ab`, "
                          "`max-batch`, `collectives` or `time-to-train`")
    nodes: int = described(1, "nodes the case ran on")
    gpus_per_node: int = described(1, "devices per node (GPUs, or worker ranks on a CPU)")
    batch_per_device: int = described(0, "samples per device per step")
    precision: str = described("", "`fp32`, `tf32`, `amp` or `bf16`")
    image_size: int | None = described(None, "the images' side, in pixels")
    data_backend: str | None = described(
        None, "where the images came from: `synthetic`, `dali-gpu`, `dali-cpu` or `torch`")
    runs_ips: tuple[float, ...] = described(
        (), "each timed run's img/s, in the order they ran (A/B: the candidate's)")
    verdict: str = described("", "the case's verdict ([verdicts](verdicts.md))")
    message: str = described(
        "", "the case's line, as the terminal says it ([verdicts](verdicts.md#the-failure-line))")
    tolerance: float | None = described(
        None, "the band it was judged with, a fraction of the baseline's figure (A/B: of the "
        "reference's); never below the profile's floor ([the band](verdicts.md#the-band))")
    settings: Mapping[str, Any] = described(
        EMPTY, "what makes a baseline comparable (image size, data backend, iterations, device "
        "type, loss scale) and the workload settings a failure line names when they changed "
        "(threads, memory format, launcher, compile, CUDA graphs)")
    settings_diff: str | None = described(
        None, "the settings that differ from the baseline entry's, as the line names them")
    environment_diff: str | None = described(
        None, "what differs from the baseline's environment (A/B: the reference's), or `no "
        "change in device, driver, ...` ([verdicts](verdicts.md#the-failure-line))")
    failure_tail: tuple[str, ...] = described((), "a failed run's last lines of stderr")
    skip_reason: str | None = described(None, "why this host or launcher cannot run the case")
    repro: str | None = described(
        None, "where the case failed its test: the command that measures it alone against the "
        "same baseline; report.md's line ends with it ([verdicts](verdicts.md#the-failure-line))")
    min_detectable_slowdown: float | None = described(
        None, "the smallest slowdown, as a fraction, that its runs, their spread and the "
        "verdict's rule could have caught (time to train: a time longer by that fraction), never "
        "below `tolerance`; null where none up to 90% could have been (A/B: fewer than 6 pairs) "
        "or no spread shows to judge by; absent where not judged "
        "([verdicts](verdicts.md#what-a-verdict-could-have-seen))")
    baseline_update: str | None = described(
        None, "`--perf-update-baselines`: what it recorded ([results](results.md#baselines))")
    baseline_refused: tuple[str, ...] = described(
        (), "each reason the checks refused to record it, the measures the gate failed among "
        "them ([results](results.md#baselines))")
    baseline_forced: tuple[str, ...] = described(
        (), "what `--perf-update-baselines=force` recorded past those checks")
    baseline_write_failed: str | None = described(
        None, "why the baseline file could not be written")
    unknown: Mapping[str, Any] = described(
        EMPTY, "not a key: the keys this version does not declare, written back as read")
    nulls: frozenset[str] = described(
        frozenset(), "not a key: the declared keys the row held as null, where null says more "
        "than an absent key does (`detects_stated`)")
    written: tuple[str, ...] = field(default=(), compare=False, metadata={DOC: (
        "not a key: a row its mode built (`new_row`), the keys it wrote, in order, as "
        "results.json gets them")})

    @property
    def devices(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def detects_no_slowdown(self) -> bool:
        """results.json's `min_detectable_slowdown: null`: the runs could detect no slowdown at
        all (up to judging/detectable.py's MOST_DETECTABLE); a row without the key states
        none."""
        return MIN_DETECTABLE in self.nulls

    @property
    def detects_stated(self) -> bool:
        """Whether the row states what slowdown its runs could detect: null is 'none up to
        MOST_DETECTABLE' (judging/detectable.py), an absent key no figure (no baseline, no
        runs, a file from before the figure)."""
        return self.min_detectable_slowdown is not None or \
            MIN_DETECTABLE in self.nulls

    def to_dict(self) -> dict:
        """The row as results.json holds it: every field that has a value, then `unknown`."""
        return to_dict(self)


@dataclass(frozen=True, kw_only=True)
class RunFigures:
    """What each run recorded beside its speed (judging/footprint.py): one value per run of
    `runs_ips` (None where a run had none) and their medians; what the peak memory spans. A
    throughput row and each side of an A/B row hold them alike."""
    runs_peak_memory_bytes: tuple[int | None, ...] = described(
        (), "each run's peak memory, bytes, one per `runs_ips` (null where a run had none)")
    peak_memory_bytes: int | None = described(
        None, "their median ([peak memory](verdicts.md#peak-memory-and-energy))")
    peak_memory_covers: str | None = described(
        None, "what the peak spans: on CUDA the peak allocated from the end of warm-up, on a "
        "CPU the worker process's peak resident memory; the largest over the ranks")
    runs_joules_per_image: tuple[float | None, ...] = described(
        (), "on a GPU: each run's energy per image, J, one per `runs_ips` (null where none)")
    joules_per_image: float | None = described(None, "their median")
    runs_busbw_gbps: tuple[float | None, ...] = described(
        (), "several devices: each run's bus bandwidth of the whole gradient's all-reduce, GB/s "
        "(nccl-tests' busbw; [interconnect](interconnect.md))")
    busbw_gbps: float | None = described(None, "their median")
    runs_gradient_allreduce_s: tuple[float | None, ...] = described(
        (), "several devices: each run's time to all-reduce the whole gradient, s")
    gradient_allreduce_s: float | None = described(None, "their median")


@dataclass(frozen=True)
class Speed(Row, RunFigures):
    """A row with a summary of its runs' img/s and, on several devices, its speedup, what its
    runs recorded beside it, and its peak memory against the baseline's."""
    median_ips: float | None = described(
        None, "the median of `runs_ips`, the figure the verdict judges "
        "([measurement](measurement.md))")
    mean_ips: float | None = described(None, "the mean of `runs_ips`")
    min_ips: float | None = described(None, "the slowest run's img/s")
    max_ips: float | None = described(None, "the fastest run's img/s")
    stdev_ips: float | None = described(None, "the standard deviation of `runs_ips`")
    cv: float | None = described(None, "`stdev_ips` / `mean_ips`")
    speedup: float | None = described(
        None, "`median_ips` over the 1n1g case's (this session's, else the baseline's); 1.0 on "
        "one device")
    efficiency: float | None = described(None, "`speedup` / devices")
    baseline_peak_memory_bytes: int | None = described(
        None, "the peak memory it was judged against: the baseline entry's (A/B: the "
        "reference's)")
    memory_delta: float | None = described(None, "the peak memory's growth, a fraction")
    memory_tolerance: float | None = described(
        None, "the growth allowed, a fraction (`--perf-set memory-tolerance`)")
    memory_clause: str | None = described(
        None, "the comparison as a line names it, what was measured first: `peak memory (RSS of "
        "the worker process, its largest rank) 782 MiB -> 790 MiB (+1%, tolerance 10%)`")
    memory_regression: str | None = described(
        None, "its line, where the peak grew beyond `memory_tolerance`")
    memory_note: str | None = described(
        None, "why the two peaks were not compared: they span different things")
    throughput_verdict: str | None = described(
        None, "where a memory growth made the case a regression: what the speed alone said (an "
        "operator profile explains a slowdown, never a memory growth alone: [explain](explain.md))")


@dataclass(frozen=True)
class ThroughputRow(Speed):
    """A throughput case judged against its baseline entry (modes/throughput.py)."""
    baseline_ips: float | None = described(None, "the baseline entry's `median_ips`")
    baseline_speedup: float | None = described(None, "the baseline entry's `speedup`")
    delta: float | None = described(
        None, "`median_ips` against `baseline_ips`, a fraction (0.02: 2% faster)")
    speedup_delta: float | None = described(
        None, "where the speedup, not the throughput, decided the verdict: its change (the "
        "table shows `regression (speedup -12.0%)`)")
    tolerance_reason: str | None = described(
        None, "judged against an entry with an auto band: where its `tolerance` came from "
        "([the band](verdicts.md#the-band))")
    drift: Mapping[str, Any] = described(
        EMPTY, "passed within its band but beyond it below an earlier entry of the entry's "
        "lineage: `delta`, `since`, `refreshes`, `changed` and that entry's `median_ips` "
        "([lineage and drift](verdicts.md#a-baseline-that-remembers-lineage-and-drift))")
    marked_runs: Mapping[str, list[str]] = described(
        EMPTY, "run number -> the reasons its record's `host_busy` gave, for each run the host "
        "was unfit in (empty under `--perf-ignore-host-state`); a baseline entry is made of the "
        "other runs ([the host's state](verdicts.md#the-hosts-state))")
    throttled_runs: tuple[Any, ...] = described(
        (), "the numbers of the runs whose record says the device throttled")
    other_machine: tuple[str, ...] = described(
        (), "judged `not-comparable`: what differs between the machine its baseline entry was "
        "recorded on and this one ([another machine's baseline]"
        "(verdicts.md#another-machines-baseline))")
    shared_devices: str | None = described(
        None, "`--perf-set share-devices=on`: how the ranks shared devices (`2 ranks on 1 CUDA "
        "device`); never judged")
    run_phases: Mapping[str, float] = described(
        EMPTY, "the median of each phase of its runs that ended well, s "
        "([measurement](measurement.md#where-a-runs-time-goes))")
    interconnect_skipped: str | None = described(
        None, "several devices: why no run probed the interconnect")
    explain: Mapping[str, Any] = described(
        EMPTY, "`--perf-explain`: where the trace and the operator profiles are "
        "([explain](explain.md#files))")
    op_profile: Mapping[str, Any] = described(
        EMPTY, "`--perf-explain`: the profiled run's summary of operators "
        "([explain](explain.md#files))")
    baseline_op_profile: Mapping[str, Any] = described(
        EMPTY, "the baseline entry's summary of operators, where it has one")


@dataclass(frozen=True, kw_only=True)
class Side(RunFigures):
    """One side of an A/B row (`reference`, `candidate`): its runs, their median, what each
    run recorded beside its speed, its environment, and its speedup on several devices."""
    runs_ips: tuple[float, ...] = described((), "the side's runs' img/s, in the order they ran")
    median_ips: float | None = described(None, "their median")
    speedup: float | None = described(
        None, "several devices, where the 1n1g case ran in the session: the side's speedup")
    environment: Mapping[str, Any] = described(
        EMPTY, "the side's environment, as the header's ([A/B](ab.md#output))")
    marked_runs: Mapping[str, Any] = described(
        EMPTY, "pair number -> why the host marked that side's run")
    unknown: Mapping[str, Any] = described(
        EMPTY, "not a key: the keys this version does not declare, written back as read")
    written: tuple[str, ...] = field(default=(), compare=False, metadata={DOC: (
        "not a key: as a row's")})

    def to_dict(self) -> dict:
        return to_dict(self)


@dataclass(frozen=True)
class ABRow(Speed):
    """A/B (modes/ab.py): the candidate's img/s in the summary, each side under its name, the
    verdict on the pairs."""
    reference: Side = described(
        Side(), "the reference's runs, as a `Side` ([A/B](ab.md#output))")
    candidate: Side = described(Side(), "the candidate's runs, as a `Side`")
    reference_stack: str | None = described(
        None, "the reference's stack as the report names it (`python /usr/bin/python3`)")
    candidate_stack: str | None = described(
        None, "the candidate's stack as the report names it (`RN50_AB_TEST=1`)")
    run_order: tuple[str, ...] = described(
        (), "every run, both sides, in the order they ran")
    pairs: int | None = described(None, "the pairs judged: each side ran that many runs")
    ratio: float | None = described(
        None, "the median pair ratio, candidate over reference: the figure the verdict judges")
    ratio_ci: tuple[float, float] | None = described(None, "its 95% interval: low, high")
    ratio_of_medians: float | None = described(
        None, "the candidate's `median_ips` over the reference's")
    delta: float | None = described(None, "`ratio` - 1")
    speedup_ratio: float | None = described(
        None, "several devices: `ratio` over the 1n1g case's, what the speedup verdict judged")
    marked_runs: Mapping[str, Any] = described(
        EMPTY, "where the host marked runs: each side's are under its name")


@dataclass(frozen=True)
class MaxBatchRow(Row):
    """The largest batch per device (modes/max_batch/)."""
    start_batch: int | None = described(
        None, "the batch the search started from: the case's batch per device "
        "([max batch](max-batch.md#results-and-baseline))")
    batch_step: int | None = described(
        None, "the step between the batches probed (`--perf-set batch-step`)")
    max_batch_limit: int | None = described(
        None, "the largest batch the search probes (`--perf-set max-batch-limit`)")
    max_batch: int | None = described(None, "the largest batch per device that ran")
    oom_batch: int | None = described(None, "the smallest batch that ran out of memory")
    limit_reached: bool | None = described(
        None, "whether the search reached `max_batch_limit` without running out of memory")
    max_batch_ips: float | None = described(None, "img/s at `max_batch`")
    peak_memory_bytes: int | None = described(
        None, "the peak memory at `max_batch`, bytes, the largest over the ranks")
    probes: tuple[Mapping[str, Any], ...] = described(
        (), "each probe in the order they ran: batch, outcome, peak memory, img/s, seconds")
    search_seconds: float | None = described(None, "how long the search took, s")
    probe_iters: tuple[int, ...] = described(
        (), "each probe's warm-up and timed iterations")
    baseline_max_batch: int | None = described(None, "the baseline's `max_batch`")


@dataclass(frozen=True)
class TimeToTrainRow(Row):
    """Time to train to a target top-1 (modes/time_to_train/)."""
    time_to_train_s: float | None = described(
        None, "the median time, s, of the runs that reached `target_top1` "
        "([time to train](time-to-train.md#results))")
    runs_time_to_train_s: tuple[float | None, ...] = described(
        (), "each run's time to the target, s (null where it did not reach it)")
    reached_target: bool | None = described(None, "whether every run reached the target")
    runs_reached_target: tuple[bool, ...] = described((), "whether each run reached it")
    top1: float | None = described(None, "the runs' median final top-1, a fraction")
    runs_top1: tuple[float, ...] = described((), "each run's final top-1")
    top5: float | None = described(None, "the runs' median final top-5")
    best_top1: float | None = described(None, "the best top-1 of any run's curve")
    epochs: float | None = described(None, "the median of the epochs the runs trained")
    runs_epochs: tuple[float, ...] = described((), "the epochs each run trained")
    max_epochs: int | None = described(None, "the epochs a run trains at most")
    median_ips: float | None = described(None, "the runs' median training img/s")
    curve: tuple[Any, ...] = described((), "per run, one list of epochs: its top-1 and time")
    target_top1: float | None = described(None, "the top-1 a run trains to, a fraction")
    accuracy_tolerance: float | None = described(
        None, "how far `top1` may fall below the baseline's, absolute: 0.05 is 5 points "
        "(`--perf-set accuracy-tolerance`)")
    baseline_time_to_train_s: float | None = described(None, "the baseline's `time_to_train_s`")
    baseline_top1: float | None = described(None, "the baseline's `top1`")
    baseline_reached_target: bool | None = described(None, "the baseline's `reached_target`")
    time_delta: float | None = described(
        None, "`time_to_train_s` against the baseline's, a fraction")
    time_verdict: str | None = described(
        None, "the time's own verdict: pass, inconclusive, improvement or regression")
    accuracy_verdict: str | None = described(None, "top-1's own verdict: pass or regression")
    mlperf_log: str | None = described(
        None, "why no MLPerf log was written "
        "([time to train](time-to-train.md#mlperfs-log-and-its-checker))")


@dataclass(frozen=True)
class CollectivesRow(Row):
    """The all-reduce probe alone (modes/collectives.py): bus bandwidth, no img/s."""
    ranks: int | None = described(
        None, "the ranks that all-reduced ([interconnect](interconnect.md))")
    runs_busbw_gbps: tuple[float | None, ...] = described(
        (), "each run's bus bandwidth of the whole gradient's all-reduce, GB/s")
    busbw_gbps: float | None = described(None, "their median, the figure the verdict judges")
    gradient_allreduce_s: float | None = described(
        None, "the median time to all-reduce the whole gradient, s")
    messages: tuple[Any, ...] = described(
        (), "the last run's figures per message all-reduced: name, bytes, dtype, seconds, "
        "bandwidths")
    baseline_busbw_gbps: float | None = described(
        None, "the `busbw_gbps` the case's throughput entry stores")
    busbw_delta: float | None = described(None, "`busbw_gbps` against it, a fraction")


ROW_TYPES: dict[str, type[Row]] = {
    THROUGHPUT: ThroughputRow, AB: ABRow, MAX_BATCH: MaxBatchRow,
    TIME_TO_TRAIN: TimeToTrainRow, COLLECTIVES: CollectivesRow}
