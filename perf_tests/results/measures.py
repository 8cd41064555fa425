"""What each kind of row measures: one table, read by every place a user looks after the gate.

A row of results.json holds several measures (a throughput row: img/s, speedup, peak memory,
energy, bus bandwidth), some gated, each with its own baseline, delta, band and verdict. Readers
that list measures by hand forget one (memory was missing from the exports, the site and the
lineage), so the exports, the history site and the lineage ask this table instead:
`measures_of(case_id, row)` gives each measure the row has, with its figures and the verdict that
measure alone gives. A measure added to a kind's tuple here reaches every one of them, and
docs/formats.md's table of measures (`rn50-perf formats-doc`), whose verdict column is the first
paragraph of the measure's verdict function's docstring (`Measure.rule`).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from perf_tests.core.cases import AB, COLLECTIVES, MAX_BATCH, THROUGHPUT, TIME_TO_TRAIN
from perf_tests.core.rows import Row, Speed, ThroughputRow
from perf_tests.core.row_values import row_of

# The verdicts a measure's figure was judged with (a case's others, skipped, error, oom and
# the like, say nothing about one measure).
JUDGED = ("pass", "regression", "improvement", "inconclusive", "host-unfit")


@dataclass(frozen=True)
class Measure:
    """One measure of a kind of row: where its figures are and how it is judged.

    Its keys name fields of the kind's row type (perf_tests/core/rows.py): `key` holds the
    median, `runs_key` the per-run values, `baseline_key` the baseline's (or the A/B
    reference's) figure, `delta_key` the relative change, `tolerance_key` the band it was
    judged with; `gated` says whether a verdict rests on it; `verdict` reads the verdict this
    measure alone gives from the row (None where it was not judged). `scale` turns the stored
    figure into `unit` (a top-1 fraction into %). A band is a fraction of the baseline (0.05:
    within 5% of it) unless `band_is_absolute`: then it is in the figure's own unit, scaled as
    the figure is (top-1's 0.05 is 5 points of accuracy: 76% +- 5)."""
    slug: str                     # a stable name: Bencher's measure slug, the site's series
    title: str                    # in a sentence: 'peak memory'
    unit: str
    key: str
    bigger_is_better: bool
    gated: bool
    verdict: Callable[[Row], str | None]
    runs_key: str | None = None
    baseline_key: str | None = None
    delta_key: str | None = None
    tolerance_key: str | None = None
    scale: float = 1.0
    band_is_absolute: bool = False

    @property
    def rule(self) -> str:
        """Where this measure's verdict comes from, in a sentence: its verdict function's
        docstring, the first paragraph."""
        return " ".join((self.verdict.__doc__ or "").split("\n\n")[0].split())


@dataclass(frozen=True)
class MeasureValue:
    """A measure's figures in one row, in the measure's unit (an absolute band too)."""
    measure: Measure
    value: float
    runs: tuple[float | None, ...]
    baseline: float | None
    delta: float | None
    tolerance: float | str | None
    verdict: str | None


def field_of(row: Row, name: str):
    """The field of `row` a measure names: a declared one (core/rows.py), a key the row holds
    that no type declares yet (a measure added here before its field is declared), else None
    (a kind that does not record it: a max batch search has no per-run memory)."""
    return row.unknown[name] if name in row.unknown else getattr(row, name, None)


def case_verdict(row: Row) -> str | None:
    """The row's `verdict`, where it judged a figure."""
    return row.verdict if row.verdict in JUDGED else None


def speed_verdict(row: Speed) -> str | None:
    """The row's `throughput_verdict` (what the speed alone said) where a memory growth made
    the case a regression, else its `verdict`."""
    verdict = row.throughput_verdict or row.verdict
    return verdict if verdict in JUDGED else None


def speedup_verdict(row: ThroughputRow) -> str | None:
    """The speed's verdict where the row has `speedup_delta` (the speedup decided it); else a
    pass where it was compared (`baseline_speedup`), or not judged."""
    if row.speedup_delta is not None:
        return speed_verdict(row)
    return "pass" if row.baseline_speedup is not None and speed_verdict(row) else None


def memory_verdict(row: Row) -> str | None:
    """A regression where the row has `memory_regression`, a pass where it was compared
    (`memory_delta`); none where its kind does not judge memory (a max batch search records
    its peak only)."""
    if not isinstance(row, Speed):
        return None
    if row.memory_regression:
        return "regression"
    return "pass" if row.memory_delta is not None else None


def own_verdict(key: str) -> Callable[[Row], str | None]:
    """A measure whose mode records its own verdict under `key`."""
    def verdict(row: Row) -> str | None:
        value = field_of(row, key)
        return value if value in JUDGED else None
    verdict.__doc__ = f"The row's `{key}`: the mode's verdict of this measure alone."
    return verdict


def recorded(row: Row) -> None:
    """Not judged: recorded and stored."""
    return None


SPEED = Measure("throughput", "throughput", "img/s", "median_ips", True, True, speed_verdict,
                runs_key="runs_ips", baseline_key="baseline_ips", delta_key="delta",
                tolerance_key="tolerance")
SPEEDUP = Measure("speedup", "speedup", "x", "speedup", True, True, speedup_verdict,
                  baseline_key="baseline_speedup", delta_key="speedup_delta",
                  tolerance_key="tolerance")
MEMORY = Measure("peak-memory", "peak memory", "B", "peak_memory_bytes", False, True,
                 memory_verdict, runs_key="runs_peak_memory_bytes",
                 baseline_key="baseline_peak_memory_bytes", delta_key="memory_delta",
                 tolerance_key="memory_tolerance")
ENERGY = Measure("energy", "energy per image", "J/img", "joules_per_image", False, False,
                 recorded, runs_key="runs_joules_per_image")
BUSBW = Measure("busbw", "bus bandwidth", "GB/s", "busbw_gbps", True, False, recorded,
                runs_key="runs_busbw_gbps")
PAIR_RATIO = Measure("pair-ratio", "candidate/reference", "x", "ratio", True, True,
                     speed_verdict, delta_key="delta", tolerance_key="tolerance")
CANDIDATE_SPEED = Measure("throughput", "candidate throughput", "img/s", "median_ips", True,
                          False, recorded, runs_key="runs_ips")
MAX_BATCH_SIZE = Measure("max-batch", "largest batch", "samples/device", "max_batch", True,
                         True, case_verdict, baseline_key="baseline_max_batch")
MAX_BATCH_SPEED = Measure("throughput", "throughput at the largest batch", "img/s",
                          "max_batch_ips", True, False, recorded)
TIME = Measure("time-to-train", "time to train", "s", "time_to_train_s", False, True,
               own_verdict("time_verdict"), runs_key="runs_time_to_train_s",
               baseline_key="baseline_time_to_train_s", delta_key="time_delta",
               tolerance_key="tolerance")
# What a training ran at: recorded beside its time, as the throughput cases' img/s is gated.
TRAINING_SPEED = Measure("throughput", "training throughput", "img/s", "median_ips", True,
                         False, recorded)
TOP1 = Measure("top-1", "top-1", "%", "top1", True, True, own_verdict("accuracy_verdict"),
               runs_key="runs_top1", baseline_key="baseline_top1",
               tolerance_key="accuracy_tolerance", scale=100.0, band_is_absolute=True)
COLLECTIVE_BUSBW = Measure("busbw", "bus bandwidth", "GB/s", "busbw_gbps", True, True,
                           case_verdict, runs_key="runs_busbw_gbps",
                           baseline_key="baseline_busbw_gbps", delta_key="busbw_delta",
                           tolerance_key="tolerance")

# Each kind's measures, the one its verdict rests on first.
MEASURES: dict[str, tuple[Measure, ...]] = {
    THROUGHPUT: (SPEED, SPEEDUP, MEMORY, ENERGY, BUSBW),
    AB: (PAIR_RATIO, CANDIDATE_SPEED, MEMORY),
    MAX_BATCH: (MAX_BATCH_SIZE, MAX_BATCH_SPEED, MEMORY),
    TIME_TO_TRAIN: (TIME, TOP1, TRAINING_SPEED),
    COLLECTIVES: (COLLECTIVE_BUSBW,),
}


def scaled(value, scale: float):
    return value * scale if isinstance(value, (int, float)) and scale != 1.0 else value


def measures_of(case_id: str, row: Row | Mapping) -> list[MeasureValue]:
    """The measures `row` has a figure for, in its kind's order, in their units."""
    row = row_of(case_id, row)
    values = []
    for measure in MEASURES[row.kind]:
        value = field_of(row, measure.key)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        runs = field_of(row, measure.runs_key) if measure.runs_key else None
        tolerance = field_of(row, measure.tolerance_key) if measure.tolerance_key else None
        values.append(MeasureValue(
            measure, scaled(value, measure.scale),
            tuple(scaled(run, measure.scale) for run in runs or ()),
            scaled(field_of(row, measure.baseline_key), measure.scale) if measure.baseline_key
            else None,
            field_of(row, measure.delta_key) if measure.delta_key else None,
            scaled(tolerance, measure.scale) if measure.band_is_absolute else tolerance,
            measure.verdict(row)))
    return values
