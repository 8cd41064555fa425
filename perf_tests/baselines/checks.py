"""Whether measured runs may become a baseline entry: the one rule `--perf-update-baselines` and
`tools/promote_baseline.py` both apply.

Every later verdict leans on a baseline's median, its runs and its speedup, so runs that cannot
be true or cannot be trusted are refused (recorded only with --perf-update-baselines=force, or the
promotion tool's --force, and a line that says so):
- fewer runs than the profile records a baseline from;
- more than `OUTLYING_SHARE` of the runs over `SPREAD_LIMIT` times the profile's tolerance from
  their median, as on a host busy with other work part of the time (one outlying run in ten does
  not count; ordinary noise, 14% cv on a shared 2-core VM, puts about 3% of runs that far);
- a speedup over a 1n1g median that was itself refused.

And one that is never recorded, not even forced (`impossible`): a scaling efficiency over
`MAX_EFFICIENCY`. Data-parallel training does not scale better than linearly, so such a speedup
means its 1n1g reference ran slow; stored, it would fail every later session of the case.

The runs a busy host marked (other load, throttling: `marked_runs` in the case's row) never
become part of an entry: `--perf-update-baselines` runs them again, and the entry is made of the
unmarked ones (`recordable_runs`); it stops running them again once the runs --perf-set max-runs
leaves cannot make up the unmarked ones a recording needs (`out_of_reach`), and a session that
starts on a host the preflight finds busy says so first (`busy_recording_line`).

Where an entry is not written, `kept_runs` ends the line with where its runs are kept and the
command that promotes them later (or, for an impossible speedup, what to measure again).
"""
from __future__ import annotations

from collections.abc import Mapping

from perf_tests.core.cases import Case
from perf_tests.core.rows import Row
from perf_tests.core.row_values import row_of
from perf_tests.core.stats import summarize
from perf_tests.core.text import ips, marked_runs_text, runs_text

MAX_EFFICIENCY = 1.10
SPREAD_LIMIT = 2.0
OUTLYING_SHARE = 0.2


def refused_reference(case_id: str, rows: Mapping[str, Row | Mapping]) -> str | None:
    """The 1n1g case `case_id`'s speedup is taken over, where its row in `rows` (results.json's
    cases) says its runs were refused as a baseline; else None."""
    single = Case.parse(case_id).single_device.case_id
    row = rows.get(single)
    return single if row is not None and row_of(single, row).baseline_refused else None


def recordable_runs(runs_ips: list[float], marked: dict | None) -> list[float]:
    """The runs an entry is made of: those the host did not mark (`marked`: run number, from 1,
    -> why; JSON's string keys too), or every run where none is unmarked (forced)."""
    return unmarked_runs(runs_ips, marked) or list(runs_ips)


def recordable_speedup(speedup: float | None, runs_ips: list[float], recorded: list[float],
                       devices: int) -> float | None:
    """The speedup of the recorded runs' median, over the same 1n1g reference as `speedup`
    (one device: 1.0 as it was)."""
    if not speedup or devices == 1 or recorded == runs_ips:
        return speedup
    return speedup * summarize(recorded).median / summarize(runs_ips).median


def unmarked_needed(baseline_runs: int, runs: int) -> int:
    """The unmarked runs below which a recording is refused (`marked_refusal`): the runs asked
    for (--perf-runs), at most what the profile records a baseline from."""
    return min(baseline_runs, runs)


def out_of_reach(unmarked: int, done: int, max_runs: int, needed: int) -> bool:
    """Whether `needed` unmarked runs can no longer be had: `unmarked` of the `done` runs so
    far, and even were every run the cap (`max_runs`) leaves unmarked, too few."""
    return unmarked + max(max_runs - done, 0) < needed


def busy_recording_line(off: list[str]) -> str | None:
    """The line a recording session starts with where the preflight found the host busy
    (`off`: what it found, `load average 3.1 on 2 cores`); None where it found nothing."""
    if not off:
        return None
    return (f"recording baselines on a busy host ({'; '.join(off)}): the runs it slows are "
            "marked, run again and never recorded, and a case left short of unmarked runs is "
            "refused; wait for a quiet host, or record anyway with --perf-update-baselines=force "
            "(--perf-ignore-host-state where this load belongs in the baseline)")


def marked_refusal(marked: dict | None, runs: int, needed: int) -> list[str]:
    """Where the host marked so many of the `runs` that fewer than `needed` unmarked ones are
    left (`needed`: the runs asked for, at most what a baseline is recorded from)."""
    unmarked = runs - len(marked or {})
    if not marked or unmarked >= needed:
        return []
    return [f"the host was unfit in {marked_runs_text({int(k): v for k, v in marked.items()})}"
            f", leaving {unmarked} unmarked run{'s' if unmarked != 1 else ''} of the {needed} "
            "needed (where this load belongs in the baseline, --perf-ignore-host-state records "
            "it)"]


def impossible(speedup: float | None, devices: int) -> list[str]:
    """Why a speedup can never be a baseline's, forced or not: one over MAX_EFFICIENCY x the
    devices; empty where it can."""
    if speedup and devices > 1 and speedup / devices > MAX_EFFICIENCY:
        return [f"speedup {speedup:.2f} on {devices} devices is a scaling efficiency of "
                f"{speedup / devices:.0%}, which cannot be true: its 1n1g reference ran slow"]
    return []


def refusals(runs_ips: list[float], *, wanted_runs: int, tolerance: float | None = None,
             speedup: float | None = None, devices: int = 1,
             refused_reference: str | None = None) -> list[str]:
    """Why these runs cannot be a baseline entry unless forced, one clause each; empty where
    they can. The spread is judged where a `tolerance` is given; a speedup taken over a 1n1g
    case whose runs were refused (`refused_reference`) is refused with it. An impossible
    speedup is `impossible`'s, which no force records."""
    reasons = []
    if len(runs_ips) < wanted_runs:
        reasons.append(f"{len(runs_ips)} run{'s' if len(runs_ips) != 1 else ''}, fewer than "
                       f"the {wanted_runs} a baseline is recorded from (leave --perf-runs out "
                       f"or give {wanted_runs})")
    if tolerance and len(runs_ips) >= 3:
        median, far = summarize(runs_ips).median, SPREAD_LIMIT * tolerance
        outlying = [value for value in runs_ips if abs(value / median - 1) > far]
        if len(outlying) > OUTLYING_SHARE * len(runs_ips):
            reasons.append(f"{len(outlying)} of its {len(runs_ips)} runs lie over {far:.0%} from "
                           f"their median {ips(median)} img/s ({runs_text(runs_ips)}): was the "
                           f"host busy with other work?")
    if speedup and devices > 1 and refused_reference:
        reasons.append(f"its speedup {speedup:.2f} is over {refused_reference}'s median, whose "
                       f"runs were refused as a baseline")
    return reasons


def unmarked_runs(runs_ips: list[float], marked: dict | None) -> list[float]:
    """The runs the host did not mark (`marked`: run number, from 1, -> why, as a results row's
    `marked_runs` keeps it, JSON's string keys too); none where it marked every one."""
    numbers = {int(number) for number in marked or {}}
    return [value for number, value in enumerate(runs_ips, 1) if number not in numbers]
