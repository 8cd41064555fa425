"""The verdict of a max batch search (perf_tests/modes/max_batch/search.py) against the baseline's
boundary (the baseline file's `max_batch` section, `MaxBatchEntry`): a max batch that shrank is a
regression, one that grew an improvement; the line names how the peak memory moved.
"""
from __future__ import annotations

from dataclasses import dataclass

from perf_tests.core.text import ips
from perf_tests.judging.verdicts import ERROR, IMPROVEMENT, NO_BASELINE, OOM, PASS, REGRESSION
from perf_tests.modes.max_batch.search import Search

GIB = 2**30


@dataclass(frozen=True)
class MaxBatchEntry:
    """A baseline's boundary for one search (the file's `max_batch` section)."""
    case_id: str
    max_batch: int
    oom_batch: int | None
    probes: list[dict]
    environment: dict
    settings: dict

    @classmethod
    def from_dict(cls, case_id: str, raw: dict) -> "MaxBatchEntry":
        return cls(case_id, int(raw["max_batch"]), raw.get("oom_batch"),
                   list(raw.get("probes") or []), raw.get("environment") or {},
                   raw.get("settings") or {})

    def peak_memory_at(self, batch: int) -> int | None:
        return next((p.get("peak_memory_bytes") for p in self.probes
                     if p.get("batch") == batch and p.get("outcome") == "ok"), None)


def peak_memory_note(search: Search, entry: MaxBatchEntry) -> str:
    """'peak memory at 224: 71.2 -> 77.9 GiB', at the new max batch where the baseline ran it,
    else at the largest batch both ran: how the footprint moved."""
    ran = {p.batch: p.peak_memory_bytes for p in search.probes
           if p.outcome == "ok" and p.peak_memory_bytes}
    shared = [batch for batch in ran if entry.peak_memory_at(batch)]
    if not shared:
        return ""
    batch = search.max_batch if search.max_batch in shared else max(shared)
    before, now = entry.peak_memory_at(batch), ran[batch]
    unit = GIB if max(before, now) >= GIB else 2**20
    name = "GiB" if unit == GIB else "MiB"
    precision = 1 if unit == GIB else 0
    return (f" (peak memory at {batch}: {before / unit:.{precision}f} -> "
            f"{now / unit:.{precision}f} {name})")


def summary_text(search: Search, seconds: float) -> str:
    """'max batch 96 (112 ran out of memory); 6 probes in 48 s, 52.1 img/s at 96'."""
    found = search.max_batch
    at = search.probe_at(found)
    if search.limit_reached:
        head = (f"max batch {found}, the limit (--perf-set max-batch-limit): no batch ran out of "
                "memory")
    else:
        head = f"max batch {found} ({search.oom_batch} ran out of memory)"
    speed = f", {ips(at.ips)} img/s at {found}" if at and at.ips else ""
    return f"{head}; {len(search.probes)} probes in {seconds:.0f} s{speed}"


def judge_max_batch(case_id: str, search: Search, seconds: float, entry: MaxBatchEntry | None,
                    no_entry_reason: str) -> tuple[str, str]:
    """(verdict, one line) of a finished search against the baseline's boundary."""
    if search.error is not None:
        failed = search.error
        return ERROR, (f"{case_id}: the search stopped at batch {failed.batch}: "
                       f"{failed.message}")
    if search.max_batch is None:
        line = (f"{case_id}: batch {search.oom_batch} ran out of memory, the smallest on steps "
                f"of {search.step}")
        return OOM, line + (f"; the baseline's max batch is {entry.max_batch}" if entry else "")
    if entry is None:
        return NO_BASELINE, f"{case_id}: {summary_text(search, seconds)}; {no_entry_reason}"
    found, before = search.max_batch, entry.max_batch
    change = f"max batch {before} -> {found}{peak_memory_note(search, entry)}"
    if found < before:
        return REGRESSION, f"{case_id}: {change}"
    if found > before:
        return IMPROVEMENT, (f"{case_id}: {change}; refresh the baseline with "
                             "--perf-update-baselines")
    return PASS, f"{case_id}: max batch {found}, as the baseline{peak_memory_note(search, entry)}"
