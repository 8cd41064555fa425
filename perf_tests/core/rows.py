"""The rows of results.json as types: one per kind, the one place that names a row's keys.

A mode builds its case's row as this type (`new_row`, through results/case_result.py's
`CaseResult.judged`): a field the kind's type does not declare fails there, named, so a mode
cannot write an undeclared field; later steps amend it (`amended_row`) and results.json gets the
fields as written. Every reader of results.json (the report's tables and figures, the exports,
the baselines made from a row, the history site and the tools) reads it through `row_of`, which
gives the kind's type: `row.median_ips`, not `row["median_ips"]`, so a field a reader names
wrongly fails where it is read, and each field has one declared type and default. A key the type
does not declare (a file from a newer suite) is kept in `unknown` as read, and `to_dict` writes
the row back as it was. Old files (no `kind`) get their kind from
`row_kind`; a field an older file lacks reads as its default.

What each kind measures, and where each measure's figures, band and verdict are among these
fields, is perf_tests/results/measures.py.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from perf_tests.core.cases import AB, COLLECTIVES, MAX_BATCH, THROUGHPUT, TIME_TO_TRAIN, row_kind

EMPTY: Mapping[str, Any] = MappingProxyType({})
# What a row holds beside its fields: its id (the key of its row), what it does not declare, the
# declared keys held as null and the keys its mode wrote.
UNWRITTEN = ("case_id", "unknown", "nulls", "written")
# A null that states something: `min_detectable_slowdown: null` (no slowdown was detectable)
MIN_DETECTABLE = "min_detectable_slowdown"


def mapping() -> Any:
    return field(default_factory=lambda: EMPTY)


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
    data = {}
    nulls = getattr(typed, "nulls", frozenset())
    if typed.written:
        return {key: None if key in nulls else plain(getattr(typed, key))
                for key in typed.written}
    for declared in dataclasses.fields(typed):
        if declared.name in UNWRITTEN:
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
    case_id: str
    kind: str = THROUGHPUT
    nodes: int = 1
    gpus_per_node: int = 1
    batch_per_device: int = 0
    precision: str = ""
    image_size: int | None = None
    data_backend: str | None = None
    runs_ips: tuple[float, ...] = ()
    verdict: str = ""
    message: str = ""
    tolerance: float | None = None
    settings: Mapping[str, Any] = mapping()
    settings_diff: str | None = None
    environment_diff: str | None = None
    failure_tail: tuple[str, ...] = ()
    skip_reason: str | None = None
    repro: str | None = None
    min_detectable_slowdown: float | None = None
    # --perf-update-baselines: what was recorded, why it was refused, what force recorded
    baseline_update: str | None = None
    baseline_refused: tuple[str, ...] = ()
    baseline_forced: tuple[str, ...] = ()
    baseline_write_failed: str | None = None
    unknown: Mapping[str, Any] = mapping()   # keys this version does not declare, as read
    # the declared keys the row held as null, where null says more than an absent key does
    # (`detects_stated`)
    nulls: frozenset[str] = frozenset()
    # a row its mode built (`new_row`): the keys it wrote, in order, as results.json gets them
    written: tuple[str, ...] = field(default=(), compare=False)

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
    runs_peak_memory_bytes: tuple[int | None, ...] = ()
    peak_memory_bytes: int | None = None
    peak_memory_covers: str | None = None
    runs_joules_per_image: tuple[float | None, ...] = ()
    joules_per_image: float | None = None
    runs_busbw_gbps: tuple[float | None, ...] = ()
    busbw_gbps: float | None = None
    runs_gradient_allreduce_s: tuple[float | None, ...] = ()
    gradient_allreduce_s: float | None = None


@dataclass(frozen=True)
class Speed(Row, RunFigures):
    """A row with a summary of its runs' img/s and, on several devices, its speedup, what its
    runs recorded beside it, and its peak memory against the baseline's."""
    median_ips: float | None = None
    mean_ips: float | None = None
    min_ips: float | None = None
    max_ips: float | None = None
    stdev_ips: float | None = None
    cv: float | None = None
    speedup: float | None = None
    efficiency: float | None = None
    # peak memory against the baseline's (judging/footprint.py)
    baseline_peak_memory_bytes: int | None = None
    memory_delta: float | None = None
    memory_tolerance: float | None = None
    memory_clause: str | None = None
    memory_regression: str | None = None
    memory_note: str | None = None
    throughput_verdict: str | None = None   # the speed's own, where memory decided the case


@dataclass(frozen=True)
class ThroughputRow(Speed):
    """A throughput case judged against its baseline entry (modes/throughput.py)."""
    baseline_ips: float | None = None
    baseline_speedup: float | None = None
    delta: float | None = None
    speedup_delta: float | None = None   # where the speedup, not the img/s, decided
    tolerance_reason: str | None = None
    drift: Mapping[str, Any] = mapping()
    marked_runs: Mapping[str, list[str]] = mapping()
    throttled_runs: tuple[Any, ...] = ()
    other_machine: tuple[str, ...] = ()
    shared_devices: str | None = None
    run_phases: Mapping[str, float] = mapping()
    interconnect_skipped: str | None = None
    explain: Mapping[str, Any] = mapping()
    op_profile: Mapping[str, Any] = mapping()
    baseline_op_profile: Mapping[str, Any] = mapping()


@dataclass(frozen=True, kw_only=True)
class Side(RunFigures):
    """One side of an A/B row (`reference`, `candidate`): its runs, their median, what each
    run recorded beside its speed, its environment, and its speedup on several devices."""
    runs_ips: tuple[float, ...] = ()
    median_ips: float | None = None
    speedup: float | None = None
    environment: Mapping[str, Any] = mapping()
    marked_runs: Mapping[str, Any] = mapping()
    unknown: Mapping[str, Any] = mapping()
    written: tuple[str, ...] = field(default=(), compare=False)   # as a row's

    def to_dict(self) -> dict:
        return to_dict(self)

    @classmethod
    def of(cls, data: Mapping[str, Any] | None) -> "Side":
        known, unknown = typed_values(cls, data or {})
        return cls(unknown=MappingProxyType(unknown), **known)


@dataclass(frozen=True)
class ABRow(Speed):
    """A/B (modes/ab.py): the candidate's img/s in the summary, each side under its name, the
    verdict on the pairs."""
    reference: Side = Side()
    candidate: Side = Side()
    reference_stack: str | None = None
    candidate_stack: str | None = None
    run_order: tuple[str, ...] = ()
    pairs: int | None = None
    ratio: float | None = None
    ratio_ci: tuple[float, float] | None = None
    ratio_of_medians: float | None = None
    delta: float | None = None
    speedup_ratio: float | None = None
    marked_runs: Mapping[str, Any] = mapping()


@dataclass(frozen=True)
class MaxBatchRow(Row):
    """The largest batch per device (modes/max_batch/)."""
    start_batch: int | None = None
    batch_step: int | None = None
    max_batch_limit: int | None = None
    max_batch: int | None = None
    oom_batch: int | None = None
    limit_reached: bool | None = None
    max_batch_ips: float | None = None
    peak_memory_bytes: int | None = None
    probes: tuple[Mapping[str, Any], ...] = ()
    search_seconds: float | None = None
    probe_iters: tuple[int, ...] = ()
    baseline_max_batch: int | None = None


@dataclass(frozen=True)
class TimeToTrainRow(Row):
    """Time to train to a target top-1 (modes/time_to_train/)."""
    time_to_train_s: float | None = None
    runs_time_to_train_s: tuple[float | None, ...] = ()
    reached_target: bool | None = None
    runs_reached_target: tuple[bool, ...] = ()
    top1: float | None = None
    runs_top1: tuple[float, ...] = ()
    top5: float | None = None
    best_top1: float | None = None
    epochs: float | None = None
    runs_epochs: tuple[float, ...] = ()
    max_epochs: int | None = None
    median_ips: float | None = None
    curve: tuple[Any, ...] = ()
    target_top1: float | None = None
    accuracy_tolerance: float | None = None
    baseline_time_to_train_s: float | None = None
    baseline_top1: float | None = None
    baseline_reached_target: bool | None = None
    time_delta: float | None = None
    time_verdict: str | None = None
    accuracy_verdict: str | None = None
    mlperf_log: str | None = None


@dataclass(frozen=True)
class CollectivesRow(Row):
    """The all-reduce probe alone (modes/collectives.py): bus bandwidth, no img/s."""
    ranks: int | None = None
    runs_busbw_gbps: tuple[float | None, ...] = ()
    busbw_gbps: float | None = None
    gradient_allreduce_s: float | None = None
    messages: tuple[Any, ...] = ()
    baseline_busbw_gbps: float | None = None
    busbw_delta: float | None = None


ROW_TYPES: dict[str, type[Row]] = {
    THROUGHPUT: ThroughputRow, AB: ABRow, MAX_BATCH: MaxBatchRow,
    TIME_TO_TRAIN: TimeToTrainRow, COLLECTIVES: CollectivesRow}


def typed_values(row_type: type, data: Mapping[str, Any]) -> tuple[dict, dict]:
    """(the values of `data` that `row_type` declares, as its fields hold them: lists as
    tuples, mappings read-only, a side as a `Side`, the declared keys held as null in `nulls`
    where the type has it; the keys it does not declare)."""
    fields = {one.name for one in dataclasses.fields(row_type)} - set(UNWRITTEN)
    known: dict = {}
    unknown, nulls = {}, set()
    for key, value in data.items():
        if key not in fields:
            unknown[key] = value
        elif value is None:
            nulls.add(key)
        elif key in ("reference", "candidate") and row_type is ABRow:
            known[key] = Side.of(value)
        elif isinstance(value, list):
            known[key] = tuple(value)
        elif isinstance(value, dict):
            known[key] = MappingProxyType(value)
        else:
            known[key] = value
    if nulls and "nulls" in {one.name for one in dataclasses.fields(row_type)}:
        known["nulls"] = frozenset(nulls)
    return known, unknown


def row_of(case_id: str, data: Mapping[str, Any] | Row) -> Row:
    """`data`, a row of results.json, as its kind's type (a typed row is returned as it is)."""
    if isinstance(data, Row):
        return data
    kind = row_kind(case_id, dict(data))
    known, unknown = typed_values(ROW_TYPES[kind], data)
    known["kind"] = kind
    return ROW_TYPES[kind](case_id=case_id, unknown=MappingProxyType(unknown), **known)


def declared_values(kind: str, case_id: str, fields: Mapping[str, Any]) -> dict:
    """`fields` as `kind`'s row type holds them (`typed_values`), an A/B side as a `Side` that
    writes its keys as given; a TypeError names each key the type (or `Side`) does not
    declare."""
    row_type = ROW_TYPES[kind]
    known, unknown = typed_values(row_type, fields)
    undeclared = sorted(unknown)
    for name in ("reference", "candidate"):
        if isinstance(known.get(name), Side):
            undeclared += [f"{name}.{key}" for key in known[name].unknown]
            known[name] = dataclasses.replace(known[name], written=tuple(fields[name]))
    if undeclared:
        raise TypeError(f"{case_id}: the {kind} row declares "
                        f"no {', '.join(undeclared)}: declare it in {row_type.__name__} "
                        "(perf_tests/core/rows.py) or leave it out")
    return known


def new_row(kind: str, case_id: str, **fields: Any) -> Row:
    """The row a mode writes for `case_id`: `fields`, each declared by `kind`'s type, or a
    TypeError that names the ones it does not declare; results.json gets them as written."""
    known = declared_values(kind, case_id, {"kind": kind, **fields})
    return ROW_TYPES[kind](case_id=case_id, written=("kind", *[key for key in fields
                                                                if key != "kind"]), **known)


def amended_row(row: Row, **fields: Any) -> Row:
    """`row` with `fields` added or changed, each declared by its type (a TypeError names the
    others), written after the row's own keys; a field amended to None is held as null."""
    known = declared_values(row.kind, row.case_id, fields)
    defaults = {one.name: one for one in dataclasses.fields(row)}
    for key in known.pop("nulls", ()):
        one = defaults[key]
        known[key] = one.default_factory() if one.default is dataclasses.MISSING \
            else one.default
    nulls = (row.nulls - set(fields)) | {key for key, value in fields.items() if value is None}
    return dataclasses.replace(row, **known, nulls=frozenset(nulls), written=row.written + tuple(
        key for key in fields if key not in row.written))


def rows_of(cases: Mapping[str, Any]) -> dict[str, Row]:
    """Every row of a results document's `cases`, typed, in their order."""
    return {case_id: row_of(case_id, data) for case_id, data in cases.items()}
