"""The lines and tables a bisection prints: each probe's figures, the estimate of how many probes
and how long, a subset of the changes in words, and what a finding explains of the slowdown."""
from __future__ import annotations

import math

from perf_tests.core.text import aligned
from tools.bisect.rounds import (MARKED_ROUNDS_FACTOR, first_rounds)
from tools.bisect.search import (Finding)

# An inconclusive probe is run again with the A/B protocol's own sequential rule: from 8 pairs
# (the 99% interval's fewest) up to this cap.
RERUN_PAIRS = 8

# What the estimate before the first probe assumes (the 2-core VM, smoke 1n1g_fp32_b8): a run
# (a fresh launch, mostly start-up) and a session's own start and end.
RUN_SECONDS, SESSION_SECONDS = 10.0, 25.0


# A run of a component probe's rounds, which one process runs (a fresh launch each, no session
# of its own): the 22 probes of docs/bisect.md's quiet repeats took 150-160 s for 7 rounds of 4
# runs where no round was set aside, about 5.5 s a run.
ROUND_RUN_SECONDS = 6.0


def figures_text(record: dict) -> str:
    ci = record.get("ratio_ci")
    ratio = record.get("ratio")
    return (f"ratio {ratio:.3f}" if ratio is not None else "no ratio") + \
        (f" (95% CI {ci[0]:.3f}-{ci[1]:.3f})" if ci else "") + f", {record.get('pairs')} pairs"


def probe_table(records: list[dict]) -> list[str]:
    header = ("probe", "subset", "pairs", "ratio", "95% CI", "verdict", "seconds")
    rows = [(str(r["probe"]), r["subject"], str(r.get("pairs") or "-"),
             f"{r['ratio']:.3f}" if r.get("ratio") is not None else "-",
             "{:.3f}-{:.3f}".format(*r["ratio_ci"]) if r.get("ratio_ci") else "-",
             str(r.get("verdict") or "-")
             + (f" ({len(r['attempts'])} tries)" if len(r["attempts"]) > 1 else ""),
             f"{r['seconds']:.0f}") for r in records]
    return aligned([header, *rows], {1, 5})


def rounds_estimate_line(changes: int, count_low: int, count_high: int, rounds: int,
                         max_rounds: int) -> str:
    """What a component bisection's probes take: a stack per arm each round."""
    arms = ("the reference, the whole and its two parts" if changes > 1
            else "the reference and the change")
    count = 4 if changes > 1 else 2
    rounds = first_rounds(rounds)
    each = count * rounds * ROUND_RUN_SECONDS
    return (f"estimate: {changes} changes, {count_low}-{count_high} probes of {count} stacks a "
            f"round ({arms}), {rounds} rounds at least: about {each / 60:.0f} min a probe here "
            f"(runs of ~{ROUND_RUN_SECONDS:.0f} s), {count_low * each / 60:.0f}-"
            f"{count_high * each / 60:.0f} min; an undecided probe runs more rounds, up to "
            f"{max(max_rounds, rounds)} ({MARKED_ROUNDS_FACTOR * max(max_rounds, rounds)} in all "
            "with those the host marks)")


def estimate_line(probes: str, count_low: int, count_high: int, pairs: int,
                  max_pairs: int) -> str:
    each = SESSION_SECONDS + 2 * pairs * RUN_SECONDS
    return (f"estimate: {probes}, {count_low}-{count_high} probes of {pairs} pairs, about "
            f"{each / 60:.0f} min each here ({2 * pairs} runs of ~{RUN_SECONDS:.0f} s and "
            f"~{SESSION_SECONDS:.0f} s of session): {count_low * each / 60:.0f}-"
            f"{count_high * each / 60:.0f} min; an inconclusive probe runs again with "
            f"{RERUN_PAIRS}-{max_pairs} pairs")


def subset_text(members: list[str], total: int) -> str:
    if total > 1 and len(members) == total:
        return f"all {total} changes"
    shown = ", ".join(members) if len(members) <= 3 else \
        f"{', '.join(members[:2])} and {len(members) - 2} more"
    return f"{shown} ({len(members)} of {total})" if total > 1 else shown


def ratio_of(value: float | None, digits: int = 2) -> str:
    return f"ratio {value:.{digits}f}" if value is not None else "ratio not measured"


def finding_line(finding: Finding, k: int) -> str:
    """`the slowdown follows GOMP_SPINCOUNT=300 (ratio 0.79); the other 3 changes: ratio 1.00`."""
    if not finding.groups:
        return (f"no change is slower: all {k} layered together, "
                f"{ratio_of(finding.others_ratio)} (not a regression)")
    parts = []
    for group, ratio in zip(finding.groups, finding.group_ratios):
        if len(group) == 1:
            parts.append(f"{group[0]} ({ratio_of(ratio)})")
        else:
            alone = ", ".join(f"{name} alone {ratio_of(finding.alone_ratios.get(name))}"
                              for name in group)
            parts.append(f"the interaction of {' and '.join(group)} (together "
                         f"{ratio_of(ratio)}; {alone})")
    others = len(finding.others)
    rest = (f"the other {others} change{'s' if others != 1 else ''}: "
            f"{ratio_of(finding.others_ratio)}" if others else "no other change")
    if finding.others_undecided:
        rest += f", not shown to be harmless ({finding.others_undecided})"
    part = (f" in part: all {k} changes together, {ratio_of(finding.whole_ratio)}"
            if explains_part(finding) else "")
    return f"the slowdown follows {' and '.join(parts)}{part}; {rest}"


# A culprit is named as explaining part of the slowdown below this share of the whole's.
PART_SHARE = 0.75


def explains_part(finding: Finding) -> bool:
    """Whether the groups found explain less than three quarters of the whole candidate's
    slowdown (their ratios multiplied, as independent slowdowns would be): the answer then says
    the whole's ratio beside theirs, so a partial culprit does not read as the whole story."""
    if finding.whole_ratio is None or None in finding.group_ratios:
        return False
    explained = math.prod(finding.group_ratios)
    return 1 - explained < PART_SHARE * (1 - finding.whole_ratio)
