"""The search of a stack bisection: which of a candidate's changes makes it slower, asked of a
probe per step (`tools/bisect/command.py` supplies the prober; the tests a recorded one).

Two searches:

- `find_components`: each probe is a *split*: the reference, a set of changes layered over it
  (the whole) and two parts of that set, measured in the same rounds and judged by
  `tools/bisect/rule.py`: the whole not slow, or which part carries its slowdown (FIRST,
  SECOND), both (each holds part of it: two causes) or neither (they are slow only together:
  an interaction). First the whole candidate, split in halves: not slow, no change is at fault
  and the search ends there. Then a binary search that assumes one culprit: keep the part that
  carries the slowdown and split its first half from the rest of the whole (so that the last
  probe measures the culprit and the other changes, each against the reference, in the same
  rounds). A single culprit among k changes takes ceil(log2 k) probes, one more where the
  search ends on a change that was only measured among others. Where a split says both, each
  part is searched for its own cause; where it says neither, the smallest set that is slow
  together is found (the part of each half it needs, with the other half present, as delta
  debugging does), and its members measured alone and together in one probe.
- `first_slower`: the first of an ordered list of stacks that is slower than the first stack,
  by binary search over the positions, assuming that once slower the later ones stay slower:
  n stacks take at most ceil(log2 n) probes; each probe answers slow (a regression) or not.

Probes are memoized, so no split is measured twice. A probe that stays undecided at its cap (or
fails) raises, and the bisection says so: never a guess.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tools.bisect.rule import BOTH, FIRST, NOT_SLOW, SECOND


@dataclass(frozen=True)
class ProbeAnswer:
    """What one probe of a list of stacks decided: `slow` (the A/B verdict was a regression) or
    not, with the figures the tables show."""
    slow: bool
    ratio: float | None = None
    detail: dict = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class Split:
    """A component probe's question: the `whole` set of changes layered over the reference, and
    two parts of it (none where the whole is one change)."""
    whole: frozenset
    first: frozenset = frozenset()
    second: frozenset = frozenset()


@dataclass(frozen=True)
class SplitAnswer:
    """A split's answer (`tools/bisect/rule.py`: NOT_SLOW, SLOW, FIRST, SECOND, BOTH, NEITHER)
    and each measured set's median ratio to the reference."""
    answer: str
    ratios: dict = field(default_factory=dict, compare=False)   # frozenset -> ratio
    # the parts slower than the reference on their own (a regression, whatever their share)
    slow: frozenset = field(default=frozenset(), compare=False)
    detail: dict = field(default_factory=dict, compare=False)


class Undecided(Exception):
    """A probe that stayed undecided (or failed) at the most rounds allowed; carries the set
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
    # per member of an interaction group: its own ratio, measured alone
    alone_ratios: dict[str, float | None] = field(default_factory=dict)
    # why the changes left over were not shown to hold less than half the slowdown
    others_undecided: str | None = None

    @property
    def interactions(self) -> list[tuple[str, ...]]:
        return [group for group in self.groups if len(group) > 1]


class MemoSplit:
    """The prober, asked once per split (a split and its mirror image are one); every answer kept
    in the order asked."""
    def __init__(self, probe: Callable[[Split], SplitAnswer]):
        self._probe = probe
        self.answers: dict[Split, SplitAnswer] = {}

    def __call__(self, whole, first=(), second=()) -> SplitAnswer:
        split = Split(frozenset(whole), frozenset(first), frozenset(second))
        mirror = Split(split.whole, split.second, split.first)
        if mirror in self.answers and split not in self.answers:
            answer = self.answers[mirror]
            swapped = {FIRST: SECOND, SECOND: FIRST}.get(answer.answer, answer.answer)
            return SplitAnswer(swapped, answer.ratios, answer.slow, answer.detail)
        if split not in self.answers:
            self.answers[split] = self._probe(split)
        return self.answers[split]

    def carrier(self, whole, first, second) -> str:
        """Which part carries the slowdown of `whole`, as the search asks below its first probe,
        where `whole` was slow: one no longer slow on its own leaves no culprit to follow."""
        answer = self(whole, first, second)
        if answer.answer == NOT_SLOW:
            raise Undecided(frozenset(whole), f"{', '.join(sorted(whole))}: part of the "
                            f"slowdown among more changes, but not slow on their own (ratio "
                            f"{self.ratio(whole):.3f}): a slowdown spread over changes each "
                            "below 10% is not bisected", self.ratio(whole))
        return answer.answer

    def ratio(self, subset) -> float | None:
        """`subset`'s ratio to the reference, from the last probe that measured it."""
        subset = frozenset(subset)
        found = [answer.ratios[subset] for answer in self.answers.values()
                 if subset in answer.ratios]
        return found[-1] if found else None


def halves(items: Sequence[str]) -> tuple[list[str], list[str]]:
    middle = (len(items) + 1) // 2
    return list(items[:middle]), list(items[middle:])


def without(items: Sequence[str], left_out) -> list[str]:
    return [item for item in items if item not in left_out]


def causes(items: Sequence[str], probe: MemoSplit) -> list[tuple[str, ...]]:
    """The groups that carry the slowdown of `items` (slow against the reference): one culprit
    by binary search where one is at fault, else the causes of each part, or an interaction."""
    if len(items) == 1:
        return [tuple(items)]
    candidates = list(items)
    while True:
        first = halves(candidates)[0]
        rest = without(items, first)
        answer = probe.carrier(items, first, rest)
        if answer == FIRST and len(first) == 1:
            return [tuple(first)]
        if answer == FIRST:
            candidates = first
        elif answer == SECOND and len(first) < len(candidates):
            candidates = without(candidates, first)
        elif answer == SECOND:
            # the one change left holds less than half, the rest more: the cause is in the rest
            return causes(rest, probe)
        elif answer == BOTH:
            return causes(first, probe) + causes(rest, probe)
        else:
            return [tuple(minimal_set(first, rest, probe))]


def minimal_set(first: Sequence[str], second: Sequence[str], probe: MemoSplit,
                base: frozenset = frozenset()) -> list[str]:
    """The smallest part of `first` + `second` that, layered with `base`, is slow; given that
    base + first + second is slow and neither base + first nor base + second holds half of it:
    the part of each needed, found with the other present (the interaction)."""
    needed_first = needed(first, probe, base | set(second))
    return needed_first + needed(second, probe, base | set(needed_first))


def needed(items: Sequence[str], probe: MemoSplit, base: frozenset) -> list[str]:
    """The smallest part of `items` that, with `base`, is slow (base + items is)."""
    if len(items) == 1:
        return list(items)
    first, second = halves(items)
    answer = probe.carrier(base | set(items), base | set(first), base | set(second))
    if answer in (FIRST, BOTH):
        return needed(first, probe, base)
    if answer == SECOND:
        return needed(second, probe, base)
    return minimal_set(first, second, probe, base)


def find_components(components: Sequence[str], probe: Callable[[Split], SplitAnswer]
                    ) -> Finding:
    """The culprit groups among `components` (names, in the order they are halved)."""
    memo = probe if isinstance(probe, MemoSplit) else MemoSplit(probe)
    everything = list(components)
    whole = memo(everything, *(halves(everything) if len(everything) > 1 else ()))
    whole_ratio = memo.ratio(everything)
    if whole.answer == NOT_SLOW:
        return Finding([], [], tuple(everything), whole_ratio, len(memo.answers),
                       whole_ratio=whole_ratio)
    groups = causes(everything, memo)
    others = without(everything, {name for group in groups for name in group})
    others_ratio, others_undecided, unanswered = None, None, 0
    while others:
        # the culprits against the other changes, in one probe (the search's last, where it
        # ended on one culprit): the others' ratio, and that they hold less than half
        try:
            last = memo(everything, without(everything, others), others)
        except Undecided as undecided:
            others_undecided, others_ratio, unanswered = str(undecided), undecided.ratio, 1
            break
        others_ratio = memo.ratio(others)
        if frozenset(others) in last.slow and last.answer in (FIRST, BOTH):
            # slow on their own too, if less than half of the whole: a second cause
            groups += causes(others, memo)
            others = without(others, {name for group in groups for name in group})
            continue
        if last.answer != FIRST:
            others_undecided = (f"the culprits found against the other changes answered "
                                f"'{last.answer}', not that the others hold less than half")
        break
    # an interaction's members, alone and together in one probe: slow only together
    for group in groups:
        if len(group) > 1:
            for name in group:
                memo(group, [name], without(group, [name]))
    alone = {name: memo.ratio([name]) for group in groups if len(group) > 1 for name in group}
    return Finding([tuple(group) for group in groups], [memo.ratio(group) for group in groups],
                   tuple(others), others_ratio, len(memo.answers) + unanswered, whole_ratio,
                   alone, others_undecided)


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
