"""The search of a stack bisection: which of a candidate's changes makes it slower, asked of an
A/B verdict per probe (`tools/bisect_stack.py` supplies the prober; the tests a recorded one).

Two searches, both on a probe that answers slow (a regression) or not for a set of changes
layered over the reference, or for one stack of an ordered list:

- `find_components`: group testing. First the whole candidate: not slow, no change is at
  fault and the search ends there; slow, its ratio is the slowdown being bisected (the prober
  asks the later probes to rule out half of it before they answer "not slow"). Then a plain
  binary search that assumes one culprit: probe half the changes; slow, keep that half; not
  slow, keep the other half without probing it. A single culprit among k changes takes
  ceil(log2 k) probes, one more where its last half was never probed itself. Where that
  assumption fails (the change it ends on is not slow alone), a search that probes both
  halves finds the smallest set that is slow together (an interaction: neither half alone
  slow, both together slow; `minimal_set`), and each of its members is probed alone. Then
  the changes left over are probed together for the "other changes" ratio, and searched in
  turn where they are slow too.
- `first_slower`: the first of an ordered list of stacks that is slower than the first stack,
  by binary search over the positions, assuming that once slower the later ones stay slower:
  n stacks take at most ceil(log2 n) probes.

Probes are memoized by their set, so no set is measured twice. A probe that stays undecided
(inconclusive after its re-run) or fails raises, and the bisection says so: never a guess.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

SLOW, NOT_SLOW = "slow", "not slow"


@dataclass(frozen=True)
class ProbeAnswer:
    """What one probe decided: `slow` (the A/B verdict was a regression) or not, with the
    figures the tables show."""
    slow: bool
    ratio: float | None = None
    detail: dict = field(default_factory=dict, compare=False)


class Undecided(Exception):
    """A probe that stayed inconclusive (or failed) at the most pairs allowed; carries the set
    and the ratio it measured, if any."""
    def __init__(self, subset: frozenset, message: str, ratio: float | None = None):
        super().__init__(message)
        self.subset = subset
        self.ratio = ratio


@dataclass
class Finding:
    """The answer of a component search: the culprit groups (one change each, or several that are
    slow only together), the ratio of each group alone and of the changes left over."""
    groups: list[tuple[str, ...]]
    group_ratios: list[float | None]
    others: tuple[str, ...]
    others_ratio: float | None
    probes: int
    # the whole candidate, all changes layered together: the slowdown the search follows
    whole_ratio: float | None = None
    # per member of an interaction group: its own ratio, probed alone
    alone_ratios: dict[str, float | None] = field(default_factory=dict)
    # why the changes left over were not shown to be slow or not (their probe stayed undecided)
    others_undecided: str | None = None

    @property
    def interactions(self) -> list[tuple[str, ...]]:
        return [group for group in self.groups if len(group) > 1]


class MemoProbe:
    """The prober, asked once per set; every answer kept in the order asked."""
    def __init__(self, probe: Callable[[frozenset], ProbeAnswer]):
        self._probe = probe
        self.answers: dict[frozenset, ProbeAnswer] = {}

    def __call__(self, subset) -> ProbeAnswer:
        subset = frozenset(subset)
        if subset not in self.answers:
            self.answers[subset] = self._probe(subset)
        return self.answers[subset]

    def slow(self, subset) -> bool:
        return self(subset).slow

    def known(self, subset) -> ProbeAnswer | None:
        return self.answers.get(frozenset(subset))


def halves(items: Sequence[str]) -> tuple[list[str], list[str]]:
    middle = (len(items) + 1) // 2
    return list(items[:middle]), list(items[middle:])


def single_culprit(items: Sequence[str], probe: MemoProbe) -> str | None:
    """The binary search that assumes one culprit among `items`: the change it ends on where that
    change is slow alone, else None (no culprit, or several that act only together)."""
    remaining, proven = list(items), False
    while len(remaining) > 1:
        first, second = halves(remaining)
        if probe.slow(first):
            remaining, proven = first, True
        else:
            remaining, proven = second, False
    if proven or probe.slow(remaining):
        return remaining[0]
    return None


def minimal_set(items: Sequence[str], probe: MemoProbe, base: frozenset = frozenset()
                ) -> list[str]:
    """The smallest part of `items` that, layered with `base`, is slow; given that `base` plus
    all of `items` is slow and `base` alone is not. Where neither half is slow with `base`, the
    part of each half needed is found with the other half present (the interaction)."""
    if len(items) == 1:
        return list(items)
    first, second = halves(items)
    if probe.slow(base | set(first)):
        return minimal_set(first, probe, base)
    if probe.slow(base | set(second)):
        return minimal_set(second, probe, base)
    needed_first = minimal_set(first, probe, base | set(second))
    needed_second = minimal_set(second, probe, base | set(needed_first))
    return needed_first + needed_second


def find_components(components: Sequence[str], probe: Callable[[frozenset], ProbeAnswer]
                    ) -> Finding:
    """The culprit groups among `components` (names, in the order they are halved)."""
    memo = probe if isinstance(probe, MemoProbe) else MemoProbe(probe)
    everything = list(components)
    whole = memo(everything)
    if not whole.slow:
        return Finding([], [], tuple(everything), whole.ratio, len(memo.answers),
                       whole_ratio=whole.ratio)
    groups: list[list[str]] = []
    culprit = single_culprit(everything, memo)
    groups.append([culprit] if culprit is not None else minimal_set(everything, memo))
    others = [name for name in everything if not any(name in group for group in groups)]
    others_undecided, others_ratio = None, None
    while others:
        try:
            if not memo.slow(others):
                others_ratio = memo.known(others).ratio
                break
        except Undecided as undecided:
            # the culprit found stands; only the second figure is left open, and says so
            others_undecided, others_ratio = str(undecided), undecided.ratio
            break
        # the changes left over are slow too: a second cause among them
        group = single_culprit(others, memo)
        groups.append([group] if group is not None else minimal_set(others, memo))
        others = [name for name in others if name not in groups[-1]]
    ratios = [memo(group).ratio for group in groups]
    # an interaction's members, each alone (probed where the search never did): slow only together
    alone = {name: memo([name]).ratio for group in groups if len(group) > 1 for name in group}
    return Finding([tuple(group) for group in groups], ratios, tuple(others), others_ratio,
                   len(memo.answers) + (1 if others_undecided else 0), whole.ratio, alone,
                   others_undecided)


def first_slower(count: int, probe: Callable[[int], ProbeAnswer]) -> int | None:
    """The first of stacks 1..count-1 (0 is the reference) whose probe is slow, None where none
    is; once a stack is slow the later ones are taken to be slow too."""
    low, high = 1, count       # the answer lies in [low, high]; `count` stands for none
    while low < high:
        middle = (low + high) // 2
        if probe(middle).slow:
            high = middle
        else:
            low = middle + 1
    return low if low < count else None


def most_probes(count: int) -> int:
    """The probes `first_slower` takes at most: one answer of `count` (stacks 1..count-1, or
    none) per halving."""
    return math.ceil(math.log2(count)) if count > 1 else 0
