"""A baseline entry's lineage: the entries that refreshes replaced, each kept in one line, and the
drift a gate finds against them.

Each accepted refresh (`--perf-update-baselines`, `rn50-perf promote`) replaces an entry, and
with it the figure the next gate compares with: five refreshes of -2% each are -10% that no gate
failed. So an entry keeps, oldest first, up to `LINEAGE_LENGTH` of the entries it replaced (their
figures: its median and every measure beside it: speedup, peak memory, energy, bus bandwidth, a
time to train...; when, how many runs, their band, and what changed in the environment from each
to the next, in the gate's words). A gate whose case passes against the current entry but lies
beyond its band below an earlier one recorded within its window says so: a warning, or a failure
under `--perf-drift fail`. An entry recorded under other comparable settings (image size,
iterations...) starts a lineage of its own: its figures do not compare with the old ones.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from perf_tests.baselines.host_shift import HOST_SHIFT
from perf_tests.core.text import ips
from perf_tests.environment.differences import NO_CHANGE, environment_diff

LINEAGE_LENGTH = 10
# What a forced refresh accepted (the measures its runs failed the gate on, with their figures):
# handed to `extended` with the new entry, kept in the lineage item of the entry it replaced.
ACCEPTED = "accepted"
# What a lineage item keeps of the entry it stands for beside its figures (every number the entry
# holds, `figures`): what its peak memory spans.
KEPT_TEXTS = ("peak_memory_covers",)
# A number an entry holds that is no measure: its band, which an item keeps as `tolerance`.
NOT_FIGURES = ("tolerance",)
UNKNOWN_CHANGE = "unknown (the older entry records no environment)"
CLAUSE = re.compile(r"^(?P<name>\S+) (?P<before>.+?) -> (?P<after>.+)$")


def figures(entry: dict) -> dict:
    """Every measure an entry holds as one number (its median img/s, speedup, peak memory, energy,
    bus bandwidth, time to train, top-1...; not its per-run lists, its band or a flag): a measure
    an entry starts keeping (perf_tests/results/measures.py reads them by key) is kept in the
    lineage without naming it here."""
    return {name: value for name, value in entry.items() if name not in NOT_FIGURES
            and isinstance(value, (int, float)) and not isinstance(value, bool)}


def lineage_item(old: dict, new: dict) -> dict:
    """The replaced entry `old` in its replacement's lineage: its median and every figure beside
    it (speedup, peak memory and what it spans, ...), when and from how many runs it was
    recorded, its band, its source, what changed from it to `new`, and what a forced `new`
    accepted against it."""
    before, after = old.get("environment") or {}, new.get("environment") or {}
    changed = environment_diff(before, after) if before else UNKNOWN_CHANGE
    item = {"median_ips": old["median_ips"], **figures(old),
            **{name: old.get(name) for name in KEPT_TEXTS},
            "recorded_at": old.get("recorded_at"),
            "runs": len(old.get("runs_ips") or []) or None, "tolerance": old.get("tolerance"),
            "source": old.get("source"), "changed": changed,
            ACCEPTED: new.get(ACCEPTED) or None}
    return {key: value for key, value in item.items() if value is not None}


def extended(old: dict | None, new: dict, comparable: bool = True) -> dict:
    """`new` as it replaces `old`: with `old`'s lineage and `old` itself at its end, the oldest
    dropped beyond LINEAGE_LENGTH, and `old`'s host shift (the host's, not the software's).
    Where there is no `old`, or it is not `comparable` (other settings), `new` starts a lineage
    of its own."""
    entry = {key: value for key, value in new.items() if key not in ("lineage", ACCEPTED)}
    if not old or not comparable:
        return entry
    lineage = [*(old.get("lineage") or []), lineage_item(old, new)][-LINEAGE_LENGTH:]
    kept = {HOST_SHIFT: old[HOST_SHIFT]} if HOST_SHIFT in old and HOST_SHIFT not in new else {}
    return {**entry, **kept, "lineage": lineage}


def lineage_problem(lineage) -> str | None:
    """Why a stored lineage cannot be read (a baseline file's check), else None."""
    if lineage is None:
        return None
    if not isinstance(lineage, list) or not all(isinstance(item, dict) for item in lineage):
        return "is not a list of objects"
    for item in lineage:
        median = item.get("median_ips")
        if isinstance(median, bool) or not isinstance(median, (int, float)) or not median > 0:
            return f"holds an entry without a positive median_ips (got {median!r})"
    return None


def day(recorded_at: str | None) -> str:
    """'2026-11-25' of '2026-11-25T10:00:00Z'; '?' where unknown."""
    return (recorded_at or "?")[:10]


def lineage_text(old: dict | None, new_median: float) -> str:
    """'6,200 (2026-11-20) -> 6,128 (2026-11-25) -> 6,000 img/s': the medians a refresh extends,
    oldest first, ending with the new one; '' where it replaces nothing."""
    if not old:
        return ""
    chain = [*(old.get("lineage") or []), old][-(LINEAGE_LENGTH + 1):]
    return " -> ".join([f"{ips(item['median_ips'])} ({day(item.get('recorded_at'))})"
                        for item in chain] + [f"{ips(new_median)} img/s"])


def lineage_summary(case_id: str, entry: dict) -> str | None:
    """'1n1g_amp_b256: 6,200 (2026-11-20) -> 6,128 (2026-11-25) -> 6,000 (2026-11-28) img/s,
    -3.2% across 2 refreshes: torch 2.11 -> 2.13': an entry's lineage and where it has led
    (tools.history.command prints it); None for an entry without one."""
    lineage = entry.get("lineage") or []
    if not lineage:
        return None
    chain = " -> ".join(f"{ips(item['median_ips'])} ({day(item.get('recorded_at'))})"
                        for item in [*lineage, entry])
    first = lineage[0]
    return (f"{case_id}: {chain} img/s, {entry['median_ips'] / first['median_ips'] - 1:+.1%} "
            f"across {len(lineage)} refresh{'es' if len(lineage) != 1 else ''}: "
            f"{merged_changes([item.get('changed', UNKNOWN_CHANGE) for item in lineage])}")


def merged_changes(changes: list[str]) -> str:
    """What changed across several refreshes, one clause a thing: `torch 2.11 -> 2.12` then
    `torch 2.12 -> 2.13` read `torch 2.11 -> 2.13`; a thing changed and changed back drops out;
    clauses that name no change, or that are not `name before -> after`, are kept as they are."""
    firsts: dict[str, str] = {}
    lasts: dict[str, str] = {}
    others: list[str] = []
    for change in changes:
        if change.startswith(NO_CHANGE) or change == UNKNOWN_CHANGE:
            others += [] if change.startswith(NO_CHANGE) else [change]
            continue
        for clause in change.split(", "):
            match = CLAUSE.match(clause)
            if not match:
                others.append(clause)
                continue
            firsts.setdefault(match["name"], match["before"])
            lasts[match["name"]] = match["after"]
    clauses = [f"{name} {firsts[name]} -> {lasts[name]}" for name in firsts
               if firsts[name] != lasts[name]]
    return ", ".join(dict.fromkeys(clauses + others)) or "no change recorded"


@dataclass(frozen=True)
class Drift:
    """The case's median against an earlier entry of its lineage."""
    delta: float            # median / the earlier entry's median - 1
    since: str              # when the earlier entry was recorded
    refreshes: int          # how many refreshes replaced it since
    changed: str            # what changed across them
    median_ips: float       # the earlier entry's median

    @property
    def text(self) -> str:
        """'-6.8% since 2026-11-25 across 3 refreshes: torch 2.11 -> 2.13, image ...'."""
        plural = "es" if self.refreshes != 1 else ""
        return (f"{self.delta:+.1%} since {day(self.since)} across {self.refreshes} "
                f"refresh{plural}: {self.changed}")

    def to_dict(self) -> dict:
        return {"delta": self.delta, "since": self.since, "refreshes": self.refreshes,
                "changed": self.changed, "median_ips": self.median_ips}


def recorded_time(item: dict) -> datetime | None:
    try:
        when = datetime.fromisoformat(str(item.get("recorded_at")).replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def drift(median_ips: float, lineage: list[dict], tolerance: float, window_days: int,
          now: datetime | None = None) -> Drift | None:
    """The largest drop of `median_ips` beyond `tolerance` below an entry of `lineage` recorded
    within `window_days` of `now`, or None where there is none."""
    now = now or datetime.now(timezone.utc)
    worst = None
    for index, item in enumerate(lineage):
        when = recorded_time(item)
        if when is None or now - when > timedelta(days=window_days):
            continue
        delta = median_ips / item["median_ips"] - 1
        if delta < -tolerance and (worst is None or delta < worst[1]):
            worst = (index, delta)
    if worst is None:
        return None
    index, delta = worst
    later = lineage[index:]
    return Drift(delta, lineage[index].get("recorded_at") or "?", len(later),
                 merged_changes([item.get("changed", UNKNOWN_CHANGE) for item in later]),
                 lineage[index]["median_ips"])
