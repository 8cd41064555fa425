"""The max batch search: the largest batch per device that trains without running out of
memory, as a pure function over `probe(batch) -> Probe` (no session, no launcher: the mode in
perf_tests/modes/max_batch/mode.py makes each probe a short real run). Grow geometrically from the
starting batch until the first out-of-memory, then bisect, on multiples of the step.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Probe:
    """One real run at one batch per device: `ok`, `oom` (a rank ran out of memory) or `error`."""
    batch: int
    outcome: str
    peak_memory_bytes: int | None = None   # the largest over the ranks; None when it failed
    ips: float | None = None
    message: str = ""
    seconds: float | None = None
    stderr_tail: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        values = {"batch": self.batch, "outcome": self.outcome,
                  "peak_memory_bytes": self.peak_memory_bytes,
                  "ips": round(self.ips, 3) if self.ips is not None else None,
                  "seconds": round(self.seconds, 2) if self.seconds is not None else None,
                  "message": self.message or None}
        return {key: value for key, value in values.items() if value is not None}


@dataclass
class Search:
    """The probes of one search, in the order they ran, and what they add up to."""
    step: int
    limit: int
    probes: list[Probe] = field(default_factory=list)

    @property
    def max_batch(self) -> int | None:
        """The largest batch that ran; None where none did."""
        return max((p.batch for p in self.probes if p.outcome == "ok"), default=None)

    @property
    def oom_batch(self) -> int | None:
        """The smallest batch that ran out of memory; None where none did."""
        return min((p.batch for p in self.probes if p.outcome == "oom"), default=None)

    @property
    def error(self) -> Probe | None:
        return next((p for p in self.probes if p.outcome == "error"), None)

    @property
    def limit_reached(self) -> bool:
        return self.error is None and self.max_batch == self.limit

    def probe_at(self, batch: int | None) -> Probe | None:
        return next((p for p in self.probes if p.batch == batch), None)


def run_outcome(rank_outcomes: dict[int, str]) -> str:
    """The outcome of one run over its ranks: a batch fits only where it fits on every rank. A
    rank out of memory makes the batch too large even where its peers then fail on the broken
    link (their errors are its echo)."""
    outcomes = set(rank_outcomes.values())
    return "oom" if "oom" in outcomes else "error" if "error" in outcomes else "ok"


def search_bounds(start: int, step: int, limit: int) -> tuple[int, int]:
    """(the first batch probed, the largest allowed): multiples of `step`, the start rounded up
    to one and the limit down to one."""
    top = limit // step * step
    if top < step:
        raise ValueError(f"the batch limit {limit} is below the batch step {step}")
    return min(max(step, math.ceil(start / step) * step), top), top


def find_max_batch(probe: Callable[[int], Probe], start: int, step: int, limit: int) -> Search:
    """The largest multiple of `step` up to `limit` at which `probe` runs: double from `start`
    until the first out-of-memory (or the limit), then bisect between the largest batch that ran
    and the smallest that did not. A probe that fails otherwise ends the search there."""
    first, top = search_bounds(start, step, limit)
    search = Search(step=step, limit=top)

    def outcome_at(batch: int) -> str:
        result = probe(batch)
        search.probes.append(result)
        return result.outcome

    fits, too_large, batch = 0, None, first
    while too_large is None:
        outcome = outcome_at(batch)
        if outcome == "error":
            return search
        if outcome == "oom":
            too_large = batch
        elif batch == top:
            return search
        else:
            fits, batch = batch, min(2 * batch, top)
    while too_large - fits > step:
        middle = fits + (too_large - fits) // step // 2 * step
        outcome = outcome_at(middle)
        if outcome == "error":
            return search
        if outcome == "ok":
            fits = middle
        else:
            too_large = middle
    return search
