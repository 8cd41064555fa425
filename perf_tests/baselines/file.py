"""Baseline files: `baselines/<hardware-key>.json`, read with checks and updated atomically.

A file is only ever replaced whole, under a lock, after re-reading it: every other entry is
kept, a concurrent session's entries are kept, and a file that does not read is never
overwritten (the error names it and says what to do).
"""
from __future__ import annotations

import copy
import json
import math
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from perf_tests.baselines.host_shift import HOST_SHIFT, host_shift_problem
from perf_tests.baselines.lineage import extended, lineage_problem
from perf_tests.core.cases import (COLLECTIVES, MAX_BATCH, THROUGHPUT, TIME_TO_TRAIN, Case,
                                   CaseIdError)
from perf_tests.core.stats import summarize
from perf_tests.core.storage import locked, write_json_atomically
from perf_tests.core.text import utc_now
from rn50_model.op_profile import summary_problem

SCHEMA_VERSION = 1
# An entry's tolerance is a fraction, or this: each gate derives its band from the noise
# (perf_tests/judging/tolerance_band.py).
AUTO = "auto"
MAX_BATCH_SECTION = "max_batch"
# What a figure depends on, one list per kind of entry: an entry recorded under other values of
# these is not comparable, and the line says which differ. (Memory format, threads, compile and the
# like are how fast the same work runs: a change there is what the gate exists to catch.)
COMPARABLE_SETTINGS = {
    THROUGHPUT: ("device_type", "image_size", "data_backend", "warmup_iters", "timed_iters",
                 "loss_scale"),
    MAX_BATCH: ("device_type", "image_size", "data_backend", "loss_scale", "batch_step",
                "max_batch_limit", "memory_limit"),
    TIME_TO_TRAIN: ("device_type", "image_size", "data_backend", "target_top1", "epochs",
                    "warmup_epochs", "data_dir"),
    COLLECTIVES: ("device_type",),
}


class BaselineError(Exception):
    """A baseline file that cannot be used; one line naming the file and what to do."""


@dataclass
class BaselineEntry:
    case_id: str
    median_ips: float
    runs_ips: list[float] = field(default_factory=list)
    speedup: float | None = None
    # a fraction, or "auto" (perf_tests/judging/tolerance_band.py)
    tolerance: float | str | None = None
    environment: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)
    source: str | None = None
    recorded_at: str | None = None
    op_profile: dict | None = None  # rn50_model/op_profile.py's summary, for --perf-explain
    # Beside the speed (perf_tests/judging/footprint.py): the median peak memory, what it spans, and
    # the median energy per image; None in entries recorded without them.
    peak_memory_bytes: int | None = None
    peak_memory_covers: str | None = None
    joules_per_image: float | None = None
    # The interconnect probe's medians (rn50_model/interconnect.py): bus bandwidth of the whole
    # gradient's all-reduce, and that all-reduce's time; multi-device entries only.
    busbw_gbps: float | None = None
    gradient_allreduce_s: float | None = None
    # The entries refreshes replaced, oldest first (perf_tests/baselines/lineage.py).
    lineage: list[dict] = field(default_factory=list)
    # How far this host's unchanged sessions lie apart (perf_tests/baselines/host_shift.py).
    host_shift: dict | None = None

    @classmethod
    def from_dict(cls, case_id: str, raw: dict) -> "BaselineEntry":
        """The entry as the file stores it under `case_id`."""
        return cls(
            case_id=case_id, median_ips=float(raw["median_ips"]),
            runs_ips=[float(v) for v in raw.get("runs_ips") or []],
            speedup=raw.get("speedup"), tolerance=raw.get("tolerance"),
            environment=raw.get("environment") or {}, settings=raw.get("settings") or {},
            source=raw.get("source"), recorded_at=raw.get("recorded_at"),
            op_profile=raw.get("op_profile"), peak_memory_bytes=raw.get("peak_memory_bytes"),
            peak_memory_covers=raw.get("peak_memory_covers"),
            joules_per_image=raw.get("joules_per_image"), busbw_gbps=raw.get("busbw_gbps"),
            gradient_allreduce_s=raw.get("gradient_allreduce_s"),
            lineage=list(raw.get("lineage") or []), host_shift=raw.get(HOST_SHIFT))

    def incomparable_settings(self, settings: dict) -> list[str]:
        return incomparable_settings(self.settings, settings, COMPARABLE_SETTINGS[THROUGHPUT])


def incomparable_settings(recorded: dict, current: dict, names: tuple[str, ...]) -> list[str]:
    """'image_size 224 (baseline) vs 64' for each of `names` both sides state and differ on."""
    return [f"{name} {recorded[name]} (baseline) vs {current[name]}" for name in names
            if name in recorded and name in current and recorded[name] != current[name]]


@dataclass
class BaselineFile:
    path: Path
    hardware: str | None
    entries: dict[str, dict]
    max_batch: dict[str, dict] = field(default_factory=dict)  # --perf-find-max-batch boundaries

    def entry(self, case_id: str) -> BaselineEntry | None:
        raw = self.entries.get(case_id)
        return None if raw is None else BaselineEntry.from_dict(case_id, raw)

    def speedup_of(self, case: Case) -> float | None:
        """The entry's stored speedup, else its median over this file's own 1n1g median."""
        entry = self.entry(case.case_id)
        if entry is None:
            return None
        if entry.speedup is not None:
            return float(entry.speedup)
        reference = self.entry(case.single_device.case_id)
        return entry.median_ips / reference.median_ips if reference else None


def load_baseline_file(path: Path) -> BaselineFile:
    """Read and check a baseline file; a missing file is an empty one."""
    return baseline_file_of(Path(path), read_document(Path(path)))


def baseline_file_of(path: Path, document: dict) -> BaselineFile:
    """The typed file of a checked `document` ({} for a missing file)."""
    return BaselineFile(path=path, hardware=document.get("hardware"),
                        entries=dict(document.get("entries") or {}),
                        max_batch=dict(document.get(MAX_BATCH_SECTION) or {}))


def read_document(path: Path) -> dict:
    """A baseline file's JSON, checked; {} where there is no file (BaselineError where it does
    not read)."""
    if not path.exists():
        return {}
    if path.is_dir():
        raise BaselineError(f"baseline file {path} is a directory; pass a JSON file with "
                            "--perf-baseline-file")
    try:
        text = path.read_text()
    except OSError as error:
        raise BaselineError(f"baseline file {path} cannot be read ({error.strerror}); fix its "
                            "permissions or pass another with --perf-baseline-file") from None
    try:
        document = json.loads(text)
    except ValueError as error:
        raise BaselineError(f"baseline file {path} is not valid JSON ({error}); restore it from "
                            "version control or delete it (it was not changed)") from None
    check_document(path, document)
    return document


def check_document(path: Path, document) -> None:
    def fail(problem: str) -> None:
        raise BaselineError(f"baseline file {path} {problem}; fix it or restore it from version "
                            "control (it was not changed)")

    if not isinstance(document, dict):
        fail("does not hold a JSON object")
    # Only median_ips is required (the product contract): a file that states no schema_version
    # is read as the one this suite writes.
    if document.get("schema_version", SCHEMA_VERSION) != SCHEMA_VERSION:
        fail(f"has schema_version {document.get('schema_version')!r}, this suite reads "
             f"{SCHEMA_VERSION}")
    entries = document.get("entries")
    if not isinstance(entries, dict):
        fail("has no 'entries' object")
    for case_id, entry in entries.items():
        try:
            Case.parse(case_id)
        except CaseIdError as error:
            fail(f"has entry {case_id!r} whose id does not parse ({error})")
        if not isinstance(entry, dict):
            fail(f"entry {case_id} is not an object")
        median = entry.get("median_ips")
        if not _positive_number(median):
            fail(f"entry {case_id} has no positive median_ips (got {median!r})")
        runs = entry.get("runs_ips")
        if runs is not None and not (isinstance(runs, list)
                                     and all(_positive_number(v) for v in runs)):
            fail(f"entry {case_id} has runs_ips that are not a list of positive numbers")
        tolerance = entry.get("tolerance")
        if tolerance is not None and tolerance != AUTO and not (_positive_number(tolerance)
                                                                and tolerance < 1):
            fail(f"entry {case_id} has tolerance {tolerance!r}; use a fraction such as 0.05, "
                 f"or \"{AUTO}\"")
        problem = lineage_problem(entry.get("lineage"))
        if problem:
            fail(f"entry {case_id} has a lineage that {problem} (delete that key to keep the "
                 "entry without one)")
        problem = host_shift_problem(entry.get(HOST_SHIFT))
        if problem:
            fail(f"entry {case_id} has a {HOST_SHIFT} that {problem} (measure it again with "
                 "rn50-perf calibrate, or delete that key)")
        for figure in ("peak_memory_bytes", "joules_per_image", "busbw_gbps",
                       "gradient_allreduce_s"):
            if figure in entry and not _positive_number(entry[figure]):
                fail(f"entry {case_id} has {figure} {entry[figure]!r}; it is a positive number "
                     "(delete that key to keep the entry without one)")
        covers = entry.get("peak_memory_covers")
        if covers is not None and not isinstance(covers, str):
            fail(f"entry {case_id} has peak_memory_covers {covers!r}; it is a text such as "
                 "'timed window (after warm-up)'")
        if "op_profile" in entry:
            problem = summary_problem(entry["op_profile"])
            if problem:
                fail(f"entry {case_id} has an op_profile that {problem} (delete that key to "
                     "keep the entry without one)")
    boundaries = document.get(MAX_BATCH_SECTION, {})
    if not isinstance(boundaries, dict):
        fail(f"has a '{MAX_BATCH_SECTION}' that is not an object")
    for search_id, entry in boundaries.items():
        batch = entry.get("max_batch") if isinstance(entry, dict) else None
        if not (isinstance(batch, int) and not isinstance(batch, bool) and batch > 0):
            fail(f"{MAX_BATCH_SECTION} entry {search_id} has no positive whole max_batch "
                 f"(got {batch!r})")


def _positive_number(value) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and value > 0)


def update_baseline_file(path: Path, hardware: str, new_entries: dict[str, dict],
                         section: str = "entries") -> BaselineFile:
    """Merge `new_entries` into the file's `section` (`entries`, or `max_batch` for batch
    limits) under its lock, keeping every other entry and section, each entry that replaces one
    with the lineage it extends; return the file as it was.

    Raises BaselineError, leaving the file untouched, if the file on disk does not read.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with locked(path):
        document = read_document(path)   # read once, under the lock
        before = baseline_file_of(path, document)
        document = copy.deepcopy(document)
        entries = dict(document.get(section) or {})
        if section == "entries":
            new_entries = {case_id: extended(entries.get(case_id), entry, not (
                entries.get(case_id) and incomparable_settings(
                    entries[case_id].get("settings") or {}, entry.get("settings") or {},
                    COMPARABLE_SETTINGS[THROUGHPUT]))) for case_id, entry in new_entries.items()}
        entries.update(new_entries)
        order = (lambda item: sort_key(item[0])) if section == "entries" else \
            (lambda item: item[0])
        document.update({"schema_version": SCHEMA_VERSION,
                         "hardware": before.hardware or hardware,
                         "entries": document.get("entries") or {},
                         section: dict(sorted(entries.items(), key=order))})
        check_document(path, document)
        write_json_atomically(path, document)
    return before


def record_host_shifts(path: Path, shifts: dict[str, dict]) -> list[str]:
    """Keep each measured `host_shift` in the file's entry of its case, under the lock, the
    entries otherwise as they are (no lineage item: nothing was re-recorded); return the case
    ids the file has no entry for, whose shift is not kept."""
    path = Path(path)
    with locked(path):
        document = copy.deepcopy(read_document(path))
        entries = document.get("entries") or {}
        kept = {case_id: {**entries[case_id], HOST_SHIFT: shift}
                for case_id, shift in shifts.items() if case_id in entries}
        if kept:
            document["entries"] = {**entries, **kept}
            check_document(path, document)
            write_json_atomically(path, document)
    return [case_id for case_id in shifts if case_id not in entries]


def check_writable(path: Path) -> None:
    """Before measuring under --perf-update-baselines: that the file can be replaced and its lock
    taken, so no measured run waits on a write that cannot happen (raises BaselineError)."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            os.close(os.open(path, os.O_WRONLY))  # opened for writing, not changed
        with locked(path), tempfile.TemporaryFile(dir=path.parent):
            pass
    except OSError as error:
        raise BaselineError(f"baseline file {path} cannot be written ({error.strerror}); make "
                            "it and its folder writable, or pass another with "
                            "--perf-baseline-file") from None


def sort_key(case_id: str):
    case = Case.parse(case_id)
    return (case.precision, case.batch_per_device, case.devices, case.nodes)


def measured_entry(runs_ips: list[float], *, tolerance: float | str | None,
                   speedup: float | None,
                   environment: dict, settings: dict, source: str,
                   op_profile: dict | None = None, figures: dict | None = None) -> dict:
    """A baseline entry for measured runs, with its provenance (time, source, environment) and
    the `figures` beside their speed (footprint.entry_figures: peak memory, energy, bus
    bandwidth)."""
    summary = summarize(runs_ips)
    entry = {"median_ips": round(summary.median, 3),
             "runs_ips": [round(float(value), 3) for value in runs_ips],
             "cv": round(summary.cv, 5),
             "speedup": round(speedup, 4) if speedup is not None else None,
             "tolerance": round(tolerance, 4) if isinstance(tolerance, float) else tolerance,
             "recorded_at": utc_now(), "source": source, "environment": environment,
             "settings": settings, "op_profile": op_profile, **(figures or {})}
    return {key: value for key, value in entry.items() if value is not None}
