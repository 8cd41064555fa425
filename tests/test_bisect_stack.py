"""tools/bisect/command.py: the search on recorded probe outcomes (one culprit among 1 to 16
changes, an interaction, nothing at fault, an inconclusive probe), the components of two stacks
and their layering (two real virtual environments among them), the stacks file, bad input in
one line; and real bisections driving real A/B sessions of the smoke case."""
from __future__ import annotations

import itertools
import json
import math
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT, run_tool
from perf_tests.core.cases import Case
from perf_tests.runs.host import worker_environment
from perf_tests.runs.launch import Stack
from tools.bisect.command import listed_candidate
from tools.bisect.components import (DISTRIBUTION, ENV, NO_RECORD, ONLY_IN_REFERENCE, PREFIX,
                                     Component, NotLayered, distribution_components,
                                     environment_components, layered_stack, not_layered_lines,
                                     stack_components)
from tools.bisect.lines import explains_part, finding_line, probe_table
from tools.bisect.prober import Prober
from tools.bisect.rounds import round_marks, session_settings
from tools.bisect.rule import FIRST, NOT_SLOW, REFERENCE, SECOND, SLOW, WHOLE, judge_rounds
from tools.bisect.search import (Finding, ProbeAnswer, Split, SplitAnswer, Undecided,
                                 find_components, first_slower, halves, most_probes)
from tools.bisect.stacks import read_stack, read_stacks_file
from tools.inputs import InputError

DATA = Path(__file__).parent / "data" / "bisect"


def names(k: int) -> list[str]:
    return [f"C{i:02d}=1" for i in range(k)]


class Model:
    """A prober whose stacks run at `ratio_of(changes layered)` of the reference's speed in every
    round (no noise), judged by the real rule; every split asked kept in order."""
    def __init__(self, ratio_of):
        self.ratio_of, self.asked = ratio_of, []

    def __call__(self, split: Split) -> SplitAnswer:
        self.asked.append(split)
        arms = {REFERENCE: frozenset(), WHOLE: split.whole}
        if split.first:
            arms.update({FIRST: split.first, SECOND: split.second})
        judged = judge_rounds({arm: [20.0 * self.ratio_of(changes)] * 7
                               for arm, changes in arms.items()})
        assert judged.answer is not None, judged.why
        return SplitAnswer(judged.answer, {arms[arm]: ratio for arm, ratio in
                                           judged.ratios().items()},
                           frozenset(arms[arm] for arm in judged.slow_arms()))


def culprits(*slow: str, ratio: float = 0.79):
    """Independent slowdowns: each change of `slow` layered multiplies the speed by `ratio`."""
    return lambda changes: ratio ** len(set(slow) & changes)


# -- the search ------------------------------------------------------------------------------------

@pytest.mark.parametrize("k", range(1, 17))
def test_one_culprit_among_k_changes_takes_about_log2_k_probes(k):
    for culprit in names(k):
        prober = Model(culprits(culprit))
        finding = find_components(names(k), prober)
        assert finding.groups == [(culprit,)]
        assert finding.group_ratios == [0.79]
        assert finding.others == tuple(name for name in names(k) if name != culprit)
        assert finding.others_ratio == (1.0 if k > 1 else None)
        # the whole split in halves first; a probe a halving, the last one measuring the culprit
        # against the other changes; one more where the halving ended on a change measured only
        # among others
        assert prober.asked[0] == Split(frozenset(names(k)), *map(frozenset, halves(names(k)))
                                        ) if k > 1 else Split(frozenset(names(1)))
        assert len(prober.asked) <= (1 if k <= 2 else math.ceil(math.log2(k)) + 1), culprit
        assert len(set(prober.asked)) == len(prober.asked)   # no split measured twice
        assert finding.probes == len(prober.asked)


def test_four_changes_take_two_probes_or_three():
    counts = []
    for culprit in names(4):
        prober = Model(culprits(culprit))
        find_components(names(4), prober)
        counts.append(len(prober.asked))
    assert counts == [2, 3, 2, 3]


@pytest.mark.parametrize("k", range(2, 17))
def test_an_interaction_is_found_and_reported_as_one(k):
    for first, second in itertools.combinations(names(k), 2):
        prober = Model(lambda changes, pair=frozenset((first, second)):
                       0.55 if pair <= changes else 1.0)
        finding = find_components(names(k), prober)
        assert finding.groups == [(first, second)], (first, second, prober.asked)
        assert finding.interactions == [(first, second)]
        assert finding.group_ratios == [0.55]
        # each alone, measured in the same rounds as both together, is not slow
        assert finding.alone_ratios == {first: 1.0, second: 1.0}
        assert Split(frozenset({first, second}), frozenset({first}), frozenset({second})) in \
            prober.asked or Split(frozenset({first, second}), frozenset({second}),
                                  frozenset({first})) in prober.asked
        # 4 probes among 3 changes, 5 among 4, 8 among 8, 10 among 16 (docs/bisect.md)
        assert len(prober.asked) <= 2 * math.ceil(math.log2(k)) + 2


def test_the_interaction_line_names_both_and_each_alone():
    prober = Model(lambda changes: 0.52 if {"OMP_PLACES={0}", "OMP_PROC_BIND=true"} <= changes
                   else 1.0)
    changes = ["MALLOC_ARENA_MAX=1", "OMP_DISPLAY_ENV=FALSE", "OMP_PLACES={0}",
               "OMP_PROC_BIND=true"]
    finding = find_components(changes, prober)
    assert finding_line(finding, 4) == (
        "the slowdown follows the interaction of OMP_PLACES={0} and OMP_PROC_BIND=true "
        "(together ratio 0.52; OMP_PLACES={0} alone ratio 1.00, OMP_PROC_BIND=true alone "
        "ratio 1.00); the other 2 changes: ratio 1.00")


@pytest.mark.parametrize("k", range(1, 17))
def test_nothing_at_fault_is_said_so_after_one_probe(k):
    prober = Model(lambda changes: 1.01 if changes else 1.0)
    finding = find_components(names(k), prober)
    assert finding.groups == [] and finding.others == tuple(names(k))
    assert finding.others_ratio == finding.whole_ratio == pytest.approx(1.01)
    assert len(prober.asked) == 1 and prober.asked[0].whole == frozenset(names(k))
    assert finding_line(finding, k) == (f"no change is slower: all {k} layered together, "
                                        "ratio 1.01 (not a regression)")


@pytest.mark.parametrize("ratios", [(0.79, 0.79), (0.79, 0.72)])
def test_two_independent_culprits_are_both_found(ratios):
    """Equal ones lie each at the midpoint (each part holds part); unequal ones, the smaller is
    found among the others, slow on their own though less than half the whole."""
    changes = names(8)
    prober = Model(lambda layered: (ratios[0] if changes[1] in layered else 1.0)
                   * (ratios[1] if changes[6] in layered else 1.0))
    finding = find_components(changes, prober)
    assert sorted(finding.groups) == [(changes[1],), (changes[6],)]
    assert finding.others_ratio == 1.0 and len(finding.others) == 6
    assert len(prober.asked) <= 8


def test_the_single_culprit_line_is_the_issues():
    changes = ["DNNL_VERBOSE=0", "MALLOC_ARENA_MAX=1", "OMP_DISPLAY_ENV=FALSE",
               "ONEDNN_PRIMITIVE_CACHE_CAPACITY=0"]
    prober = Model(culprits("ONEDNN_PRIMITIVE_CACHE_CAPACITY=0", ratio=0.70))
    finding = find_components(changes, prober)
    assert finding_line(finding, 4) == ("the slowdown follows ONEDNN_PRIMITIVE_CACHE_CAPACITY=0 "
                                        "(ratio 0.70); the other 3 changes: ratio 1.00")
    assert len(prober.asked) == 3   # the whole; the second half's first; the culprit alone


def test_a_culprit_that_explains_part_of_the_slowdown_says_so():
    # The OMP pair measured on the VM: binding alone 0.737, both together 0.608.
    changes = ["OMP_PLACES={0}", "OMP_PROC_BIND=true"]
    measured = {frozenset(changes): 0.608, frozenset(changes[1:]): 0.737,
                frozenset(changes[:1]): 0.961, frozenset(): 1.0}
    finding = find_components(changes, Model(measured.__getitem__))
    assert finding_line(finding, 2) == (
        "the slowdown follows OMP_PROC_BIND=true (ratio 0.74) in part: all 2 changes together, "
        "ratio 0.61; the other 1 change: ratio 0.96")


@pytest.mark.parametrize("whole, groups, part", [
    (0.49, [0.46], False),          # SSE41: the culprit is the whole story
    (0.608, [0.737], True),         # 26% of 39%
    (0.70, [0.80], True),           # 20% of 30%: below three quarters
    (0.70, [0.77], False),          # 23% of 30%
    (0.60, [0.80, 0.80], False),    # two culprits, 36% together of 40%
    (0.60, [0.80, None], False),    # a ratio not measured: nothing to weigh
])
def test_a_culprit_is_partial_below_three_quarters_of_the_whole(whole, groups, part):
    finding = Finding(groups=[(f"X{i}=1",) for i in range(len(groups))], group_ratios=groups,
                      others=(), others_ratio=None, probes=3, whole_ratio=whole)
    assert explains_part(finding) is part


def test_an_undecided_probe_stops_the_search():
    model = Model(culprits(names(4)[3]))

    def prober(split):
        if len(split.whole) == 4 and len(split.first) == 2:
            return model(split)
        raise Undecided(split.whole, "probe 2 stayed undecided")
    with pytest.raises(Undecided, match="probe 2 stayed undecided"):
        find_components(names(4), prober)


def test_a_part_no_longer_slow_on_its_own_stops_the_search_and_says_why():
    """Two 4% slowdowns, one a half: the whole (8%) is slow and each half holds part of it, but
    each half alone is within the 10% a probe calls not slow."""
    changes = names(4)
    prober = Model(lambda layered: 0.96 ** len({changes[0], changes[2]} & layered))
    with pytest.raises(Undecided, match=r"C00=1, C01=1: part of the slowdown among more changes, "
                       r"but not slow on their own \(ratio 0.960\): a slowdown spread over "
                       r"changes each below 10% is not bisected"):
        find_components(changes, prober)


def test_the_culprits_stand_where_the_other_changes_stay_undecided():
    """An interaction across the halves: the last probe, the pair against the other changes,
    is new, and stays undecided: the pair stands, the line says the rest was not shown."""
    changes = ["DNNL_VERBOSE=0", "OMP_PLACES={0}", "MALLOC_ARENA_MAX=1", "OMP_PROC_BIND=true"]
    pair = frozenset({"OMP_PLACES={0}", "OMP_PROC_BIND=true"})
    model = Model(lambda layered: 0.55 if pair <= layered else 1.0)

    def prober(split):
        if split.whole == frozenset(changes) and pair in (split.first, split.second):
            raise Undecided(split.whole, "probe 5 (the other 2) stayed undecided after 16 rounds",
                            0.97)
        return model(split)
    finding = find_components(changes, prober)
    assert finding.groups == [("OMP_PLACES={0}", "OMP_PROC_BIND=true")]
    assert finding.others_ratio == 0.97 and finding.probes == len(model.asked) + 1
    assert finding_line(finding, 4).endswith(
        "the other 2 changes: ratio 0.97, not shown to be harmless (probe 5 (the other 2) stayed "
        "undecided after 16 rounds)")


@pytest.mark.parametrize("count", range(2, 9))
def test_the_first_slower_stack_takes_at_most_log2_n_probes(count):
    for first in [*range(1, count), None]:
        asked = []

        def probe(index, asked=asked, first=first):
            asked.append(index)
            return ProbeAnswer(first is not None and index >= first)
        assert first_slower(count, probe) == first
        assert len(asked) <= most_probes(count) == math.ceil(math.log2(count))


def test_six_stacks_whose_fourth_is_slower_take_at_most_three_probes():
    asked = []
    answer = first_slower(6, lambda index: asked.append(index) or ProbeAnswer(index >= 3))
    assert answer == 3 and len(asked) <= 3


def pair_records() -> list[str]:
    """The bisections recorded under the earlier component rule (an A/B session per set)."""
    return sorted(path.name for path in DATA.glob("*.json")
                  if all("attempts" in probe for probe in json.loads(path.read_text())["probes"]))


@pytest.mark.parametrize("recording", pair_records())
def test_a_recorded_pair_probe_is_decided_again_as_it_was(recording, tmp_path):
    """The probes of real bisections run here before the split probes (docs/bisect.md), each an
    A/B session of one set: their rows decided again by the pair rule a list's probes still use,
    the first slow one setting the line, to the answer recorded (slow, not slow, undecided)."""
    recorded = json.loads((DATA / recording).read_text())
    prober = Prober("1n1g_fp32_b8", Stack(), [], tmp_path, 6, 16, {})
    for probe in recorded["probes"]:
        slow, _ = prober.decide(probe)
        expected = probe.get("answer") or {"regression": SLOW, "pass": NOT_SLOW}.get(
            probe["verdict"], probe["verdict"])
        assert {True: SLOW, False: NOT_SLOW, None: "undecided"}[slow] == expected, probe
        if slow and prober.bisected_ratio is None:
            prober.slowdown_found(ProbeAnswer(True, probe["ratio"]))


@pytest.mark.parametrize("recording", sorted(path.name for path in DATA.glob("*.json")
                                             if path.name not in pair_records()))
def test_a_recorded_split_bisection_replays_to_its_answer(recording):
    """The split probes of real bisections (tests/data/bisect/), replayed: each recorded answer
    given back, the same splits are asked in the same order and the answer is the one printed,
    or the search stops at the same undecided probe."""
    recorded = json.loads((DATA / recording).read_text())
    outcomes = {Split(*(frozenset(probe["arms"].get(arm, ())) for arm in (WHOLE, FIRST, SECOND))):
                probe for probe in recorded["probes"]}
    labels = [component["label"] for component in recorded["components"]]
    asked = []

    def replay(split):
        asked.append(split)
        probe = outcomes[split]
        if probe["answer"] is None:
            raise Undecided(split.whole, "undecided")
        by_set = {arm: frozenset(names) for arm, names in probe["arms"].items()}
        return SplitAnswer(probe["answer"], {by_set[arm]: probe["figures"][arm]["ratio"]
                                             for arm in by_set},
                           frozenset(by_set[arm] for arm in (FIRST, SECOND)
                                     if probe["figures"].get(arm, {}).get("slow")))
    try:
        answer = finding_line(find_components(labels, replay), len(labels))
    except Undecided:
        assert recorded["answer"].startswith("undecided: ")
    else:
        assert answer == recorded["answer"]
    assert asked == list(outcomes)


# -- probes: an inconclusive one runs again, then is reported --------------------------------------

def fake_sessions(verdicts: list, ratio: float = 0.9):
    """A session runner that writes the results.json an A/B session would, one verdict each
    (with the low end of its interval: `(verdict, low)`, else 0.8)."""
    calls = []

    def run(command, settings):
        folder = Path(command[command.index("--perf-results") + 1])
        pairs = int(command[command.index("--perf-runs") + 1])
        verdict, low = (verdicts[len(calls)] if isinstance(verdicts[len(calls)], tuple)
                        else (verdicts[len(calls)], 0.8))
        calls.append(command)
        folder.mkdir(parents=True)
        (folder / "results.json").write_text(json.dumps({"cases": {"1n1g_fp32_b8": {
            "verdict": verdict, "ratio": ratio, "ratio_ci": [low, 1.02], "pairs": pairs,
            "message": f"1n1g_fp32_b8: {verdict}"}}}))
        return ""
    return run, calls


def prober_with(tmp_path, verdicts):
    run, calls = fake_sessions(verdicts)
    log = {}
    return Prober("1n1g_fp32_b8", Stack(), [], tmp_path, 6, 16, log, run), calls, log


def test_an_inconclusive_probe_runs_again_with_more_pairs(tmp_path):
    prober, calls, log = prober_with(tmp_path, ["inconclusive", "regression"])
    answer = prober("A=1", Stack(env=(("A", "1"),)), ["A=1"])
    assert answer.slow and len(calls) == 2
    first, second = calls
    assert first[first.index("--perf-runs") + 1:first.index("--perf-runs") + 4] == \
        ["6", "--perf-set", "max-runs=6"]
    assert second[second.index("--perf-runs") + 1:second.index("--perf-runs") + 4] == \
        ["8", "--perf-set", "max-runs=16"]
    assert "--perf-candidate-env=A=1" in first
    saved = json.loads((tmp_path / "bisection.json").read_text())
    assert [a["verdict"] for a in saved["probes"][0]["attempts"]] == ["inconclusive",
                                                                      "regression"]
    assert "(2 tries)" in "\n".join(probe_table(prober.records))


def test_a_probe_inconclusive_twice_is_reported_not_guessed(tmp_path):
    prober, calls, _ = prober_with(tmp_path, ["inconclusive", "inconclusive"])
    with pytest.raises(Undecided, match=r"probe 1 \(A=1\) stayed inconclusive"):
        prober("A=1", Stack(env=(("A", "1"),)), ["A=1"])
    assert len(calls) == 2


def test_a_pass_that_does_not_rule_out_a_slowdown_runs_again(tmp_path):
    prober, calls, _ = prober_with(tmp_path, [("pass", 0.57), ("pass", 0.952)])
    answer = prober("A=1", Stack(env=(("A", "1"),)), ["A=1"])
    assert not answer.slow and len(calls) == 2


def test_a_pass_too_noisy_twice_is_reported_not_guessed(tmp_path):
    prober, calls, _ = prober_with(tmp_path, [("pass", 0.57), ("pass", 0.85)])
    with pytest.raises(Undecided, match=r"probe 1 \(A=1\) stayed a pass after 8 pairs that does "
                       r"not rule out a slowdown of 10.0% \(its 95% interval reaches 0.850\)"):
        prober("A=1", Stack(env=(("A", "1"),)), ["A=1"])
    assert prober.records[0]["verdict"] == "undecided"


def test_a_probe_that_measures_nothing_says_so(tmp_path):
    prober, _, _ = prober_with(tmp_path, ["error"])
    with pytest.raises(Exception, match=r"probe 1 \(A=1\) measured nothing: 1n1g_fp32_b8: error"):
        prober("A=1", Stack(env=(("A", "1"),)), ["A=1"])


def test_a_pass_rules_out_half_the_slowdown_bisected(tmp_path):
    # before any probe was slow: 10%; a pass reaching 0.85 is run again
    prober, calls, _ = prober_with(tmp_path, [("pass", 0.85), ("pass", 0.85)])
    assert prober.pass_precision == pytest.approx(0.10)
    with pytest.raises(Undecided):
        prober("A=1", Stack(env=(("A", "1"),)), ["A=1"])
    # once a 33% slowdown is measured, a pass need rule out 16.5%: 0.85 answers "not slow"
    prober, calls, log = prober_with(tmp_path / "tied", [("pass", 0.85)])
    prober.slowdown_found(ProbeAnswer(True, 0.67))
    assert prober.pass_precision == pytest.approx(0.165) and log["bisected_ratio"] == 0.67
    assert not prober("A=1", Stack(env=(("A", "1"),)), ["A=1"]).slow and len(calls) == 1
    # a probe that was not slow sets nothing
    prober.slowdown_found(ProbeAnswer(False, 1.02))
    assert prober.bisected_ratio == 0.67


@pytest.mark.parametrize("row, answer", [
    # before a slowdown is measured: A/B's own verdict, a pass needing a 10% precision
    ({"verdict": "regression", "ratio": 0.93, "ratio_ci": [0.88, 0.96]}, True),
    ({"verdict": "pass", "ratio": 1.0, "ratio_ci": [0.91, 1.1]}, False),
    ({"verdict": "pass", "ratio": 1.0, "ratio_ci": [0.85, 1.1]}, None),
    ({"verdict": "inconclusive", "ratio": 0.94, "ratio_ci": [0.91, 0.97]}, None),
])
def test_a_probe_before_the_slowdown_is_known_goes_by_ab(tmp_path, row, answer):
    prober, _, _ = prober_with(tmp_path, [])
    assert prober.decide({**row, "pairs": 8})[0] is answer


@pytest.mark.parametrize("row, answer, why", [
    # which side of half a 30% slowdown (the line 0.85) the probe lies
    ({"verdict": "inconclusive", "ratio": 0.94, "ratio_ci": [0.90, 0.97]}, False, ""),
    ({"verdict": "pass", "ratio": 1.0, "ratio_ci": [0.86, 1.3]}, False, ""),
    ({"verdict": "regression", "ratio": 0.72, "ratio_ci": [0.66, 0.86]}, True, ""),
    ({"verdict": "regression", "ratio": 0.90, "ratio_ci": [0.84, 0.93]}, None,
     "a regression after 8 pairs of ratio 0.900, less than half the slowdown bisected (0.700), "
     "and its 95% interval reaches 0.840"),
    ({"verdict": "inconclusive", "ratio": 0.94, "ratio_ci": [0.80, 1.03]}, None,
     "inconclusive after 8 pairs (its 95% interval reaches 0.800)"),
    ({"verdict": "pass", "ratio": 1.0, "ratio_ci": [0.80, 1.3]}, None,
     "a pass after 8 pairs that does not rule out a slowdown of 15.0% (its 95% interval "
     "reaches 0.800)"),
])
def test_a_later_probe_is_asked_which_side_of_half_the_slowdown_it_lies(tmp_path, row, answer,
                                                                         why):
    prober, _, _ = prober_with(tmp_path, [])
    prober.slowdown_found(ProbeAnswer(True, 0.70))
    assert prober.decide({**row, "pairs": 8}) == (answer, why)


class SyntheticRuns:
    """Stands for `SuiteRuns`: each stack's img/s in a round is the host's level (wandering 10%
    from round to round) times 0.70 where the stack layers `slow` (the primitive cache off),
    times 4% noise a run; as the suite's loop, rounds until not wanted or the cap."""
    slow = "ONEDNN_PRIMITIVE_CACHE_CAPACITY"
    probes: list[dict] = []

    def __init__(self, case_id, pytest_args, work):
        assert case_id == "1n1g_fp32_b8" and pytest_args == []
        SyntheticRuns.probes = []

    def __call__(self, stacks, folder, rounds, max_rounds, more_wanted, report_run):
        rng = random.Random(len(SyntheticRuns.probes))
        SyntheticRuns.probes.append(stacks)
        measured, level = {side: [] for side in stacks}, 20.0
        for number in range(1, max_rounds + 1):
            level *= math.exp(rng.gauss(0, 0.10))
            for side, stack in stacks.items():
                measured[side].append(level * self.ratio_of(stack) * math.exp(rng.gauss(0, 0.04)))
            if number >= rounds and not more_wanted(measured):
                break
        return measured, [side for _ in measured[REFERENCE] for side in stacks], {}

    def ratio_of(self, stack: Stack) -> float:
        return 0.70 if self.slow in dict(stack.env) else 1.0


def test_a_round_the_host_marked_is_set_aside_and_run_again(tmp_path, monkeypatch):
    """The run loop with `counts`: the rounds whose runs the worker marked (host_busy) are
    left out of the rounds judged and run again, up to `most_rounds` in all."""
    from perf_tests.runs import protocol
    from perf_tests.runs.outcome import RunOutcome
    marked_rounds = {2, 3}

    def run_once(case, launcher, request, index, labels, relaunch_allowed):
        busy = ["other processes used 1.0 of 2 cores"] if labels["pair"] in marked_rounds and \
            labels["side"] == WHOLE else []
        ips = 3.0 if busy else 20.0 * (0.7 if labels["side"] == WHOLE else 1.0)
        return RunOutcome(index, "ok", ips, "", record={"host_busy": busy})
    monkeypatch.setattr(protocol, "run_once", run_once)
    stacks = {REFERENCE: Stack(), WHOLE: Stack(env=(("A", "1"),))}
    judged_on = []

    def more_wanted(rounds):
        judged_on.append(len(rounds[REFERENCE]))
        return len(rounds[REFERENCE]) < 4
    runs = protocol.run_rounds(Case.parse("1n1g_fp32_b8"), None, lambda folder, stack: None,
                               lambda index: tmp_path / f"run-{index}", 3, 16, stacks=stacks,
                               more_wanted=lambda runs: more_wanted(runs.complete_rounds()),
                               counts=lambda in_round: not round_marks(in_round), most_rounds=32)
    assert runs.set_aside == [2, 3] and len(runs.order) == 2 * 6
    assert runs.complete_rounds() == {REFERENCE: [20.0] * 4, WHOLE: [14.0] * 4}
    assert judged_on == [3, 4]     # looked at from the 3rd round kept
    assert round_marks({WHOLE: runs.by_side[WHOLE][1]}) == [
        "whole: other processes used 1.0 of 2 cores"]
    # every round marked: it stops at `most_rounds` in all, none judged
    marked_rounds = set(range(1, 100))
    runs = protocol.run_rounds(Case.parse("1n1g_fp32_b8"), None, lambda folder, stack: None,
                               lambda index: tmp_path / f"all-{index}", 3, 16, stacks=stacks,
                               more_wanted=lambda runs: more_wanted(runs.complete_rounds()),
                               counts=lambda in_round: not round_marks(in_round), most_rounds=32)
    assert len(runs.set_aside) == 32 and runs.complete_rounds() == {REFERENCE: [], WHOLE: []}


def test_a_component_bisection_end_to_end_on_synthetic_rounds(tmp_path, monkeypatch, capsys):
    """The tool end to end, its runs replaced by synthetic rounds: the issue's four settings,
    the primitive cache off 30% slower. The whole candidate first, split in halves; the culprit
    (last in order) named in 3 probes of 7 rounds, the other three changes measured beside it."""
    from tools.bisect import command as bisect_stack
    monkeypatch.setattr(bisect_stack, "SuiteRuns", SyntheticRuns)
    options = [f"--perf-candidate-env={setting}" for setting in CACHE_SETTINGS]
    status = bisect_stack.main(["-k", "1n1g_fp32_b8", "--work-dir", str(tmp_path / "work"),
                                *options])
    printed = capsys.readouterr().out
    assert status == 0, printed
    first = SyntheticRuns.probes[0]
    assert list(first) == [REFERENCE, WHOLE, FIRST, SECOND]
    assert {key for key, _ in first[WHOLE].env} >= {setting.split("=")[0]
                                                    for setting in CACHE_SETTINGS}
    assert "estimate: 4 changes, 2-3 probes of 4 stacks a round (the reference, the whole and " \
           "its two parts), 7 rounds at least" in printed
    answer = [line for line in printed.splitlines() if line.startswith("the slowdown follows")]
    assert len(answer) == 1 and re.fullmatch(
        rf"the slowdown follows {SLOW_SETTING} \(ratio 0\.[67]\d\); the other 3 changes: ratio "
        r"(0\.9\d|1\.0\d)", answer[0]), answer
    assert "probe 1: the second part carries it after 7 rounds; whole ratio 0." in printed
    log = json.loads((tmp_path / "work" / "bisection.json").read_text())
    assert len(log["probes"]) == 3 and log["finding"]["groups"] == [[SLOW_SETTING]]
    assert log["probes"][-1]["arms"] == {
        WHOLE: sorted(CACHE_SETTINGS), FIRST: [SLOW_SETTING],
        SECOND: sorted(set(CACHE_SETTINGS) - {SLOW_SETTING})}
    for probe in log["probes"]:   # each record judged again from its rounds
        assert judge_rounds(probe["rounds"]).answer == probe["answer"]
        assert probe["judged_rounds"] == 7 and len(probe["run_order"]) == 4 * 7
    table = printed.split(answer[0], 1)[1].splitlines()[1:]
    assert table[0].split() == ["probe", "stack", "rounds", "ratio", "97%", "CI", "of", "the",
                                "slowdown", "answer", "seconds"]
    assert len(table) == 2 + 3 * 3 + 1   # header, rule, a row per stack, the closing line


# -- components ------------------------------------------------------------------------------------

def test_environment_components_are_every_variable_set_differently():
    components = environment_components({"A": "1", "B": "2", "C": "3"},
                                        {"A": "1", "B": "9", "D": "4"})
    assert [(c.label, c.change) for c in components] == [
        ("B=9", "B: 2 -> 9"), ("C unset", "C: 3 -> unset"), ("D=4", "D: unset -> 4")]


def distribution(name, version, location, entries, listed=True):
    return {"name": name, "version": version, "location": str(location),
            "entries": entries, "listed_files": listed}


def test_distribution_components_and_what_cannot_be_layered(tmp_path):
    (tmp_path / "six.py").write_text("")
    (tmp_path / "six-1.16.0.dist-info").mkdir()
    reference = {"six": distribution("six", "1.17.0", "/ref", ["six.py"]),
                 "same": distribution("same", "1", "/ref", ["same"]),
                 "gone": distribution("gone", "2", "/ref", ["gone"])}
    candidate = {"six": distribution("six", "1.16.0", tmp_path,
                                     ["six-1.16.0.dist-info", "six.py"]),
                 "same": distribution("same", "1", tmp_path, ["same"]),
                 "hidden": distribution("hidden", "3", "/inside/a/container", ["hidden"]),
                 "norecord": distribution("norecord", "1", tmp_path, [], listed=False)}
    components, left_out = distribution_components(reference, candidate)
    assert [(c.label, c.change) for c in components] == [("six==1.16.0", "six: 1.17.0 -> 1.16.0")]
    assert not_layered_lines(left_out) == [
        "gone 2: only in the reference (an overlay adds files; it cannot hide the reference's)",
        "hidden: absent -> 3 (/inside/a/container/hidden): its files are not visible from this "
        "host, e.g. inside a container",
        "norecord: absent -> 1: its installation lists no files (no RECORD) to layer"]


def test_not_layered_lines_are_one_per_reason():
    """The issue's upgrade printed 40 `only in the reference` lines: one line now, the names
    cut at eight with a count."""
    gone = [NotLayered(f"nvidia-lib{i:02d} 12.{i}", ONLY_IN_REFERENCE) for i in range(40)]
    lines = not_layered_lines([gone[0], NotLayered("x: absent -> 1", NO_RECORD), *gone[1:],
                               NotLayered("y: absent -> 2", NO_RECORD)])
    assert lines == [
        f"{ONLY_IN_REFERENCE} (40): " + ", ".join(f"nvidia-lib{i:02d} 12.{i}" for i in range(7))
        + " and 33 more",
        f"{NO_RECORD} (2): x: absent -> 1, y: absent -> 2"]


def test_stack_components_add_the_prefix_and_name_another_interpreter():
    reference = {"python": "/a/python", "python_version": "3.11.2", "environ": {"X": "1"},
                 "distributions": {}}
    candidate = {"python": "/b/python", "python_version": "3.12.1", "environ": {"X": "2"},
                 "distributions": {}}
    components, left_out = stack_components(reference, candidate,
                                            Stack(python="/b/python", prefix=("taskset", "-c 0")))
    assert [c.label for c in components] == ["X=2", "prefix \"taskset '-c 0'\""]
    assert not_layered_lines(left_out)[0].startswith(
        "python 3.11.2 -> 3.12.1: the interpreter itself")


def test_a_layered_group_sets_unsets_wraps_and_overlays(tmp_path):
    site = tmp_path / "site"
    (site / "pkg").mkdir(parents=True)
    (site / "pkg" / "__init__.py").write_text("VERSION = 'candidate'\n")
    (site / "pkg-2.0.dist-info").mkdir()
    (site / "pkg-2.0.dist-info" / "METADATA").write_text("Name: pkg\nVersion: 2.0\n")
    (site / "nspace" / "member").mkdir(parents=True)
    (site / "nspace" / "member" / "__init__.py").write_text("")
    group = [Component(ENV, "A", None, "1"), Component(ENV, "B", "2", None),
             Component(PREFIX, "prefix", None, "nice -n 0"),
             Component(DISTRIBUTION, "pkg", "1.0", "2.0", str(site),
                       ("nspace/member", "pkg", "pkg-2.0.dist-info"))]
    stack = layered_stack(group, tmp_path / "overlay")
    assert stack.python == sys.executable
    assert stack.prefix == ("env", "-u", "B", "nice", "-n", "0")
    settings = dict(stack.env)
    assert settings["A"] == "1"
    assert settings["PYTHONPATH"].split(os.pathsep)[:2] == [str(tmp_path / "overlay"),
                                                          str(REPO_ROOT)]
    assert (tmp_path / "overlay" / "pkg").resolve() == site / "pkg"
    assert (tmp_path / "overlay" / "nspace").is_dir() and \
        not (tmp_path / "overlay" / "nspace").is_symlink()
    done = subprocess.run(stack.wrap([sys.executable, "-c",
                                      "import importlib.metadata as m, pkg, os; "
                                      "print(pkg.VERSION, m.version('pkg'), os.environ.get('B'))"]),
                          env=dict(os.environ, B="2"), capture_output=True, text=True,
                          check=True)
    assert done.stdout.split() == ["candidate", "2.0", "None"]


def test_a_listed_stack_unsets_what_only_the_reference_sets():
    reference = Stack(env=(("OMP_PROC_BIND", "false"), ("KEEP", "1")))
    candidate = Stack(prefix=("nice",), env=(("KEEP", "2"),))
    assert listed_candidate(reference, candidate) == Stack(
        prefix=("env", "-u", "OMP_PROC_BIND", "nice"), env=(("KEEP", "2"),))


# -- the stacks file -------------------------------------------------------------------------------

def test_the_stacks_file_names_its_stacks(tmp_path):
    path = tmp_path / "stacks.txt"
    path.write_text("# nightlies, oldest first\n\ngood:\n"
                    "n2: --perf-candidate-env A=1   # one setting\n"
                    f"--perf-candidate-env A=1 --perf-candidate-python {sys.executable}\n"
                    "n4: --perf-candidate-prefix 'nice -n 1' --perf-candidate-env=B=x\n")
    stacks = read_stacks_file(path)
    assert [named.name for named in stacks] == ["good", "n2", "line 5", "n4"]
    assert stacks[0].stack == Stack()
    assert stacks[1].stack == Stack(env=(("A", "1"),))
    assert stacks[3].stack == Stack(prefix=("nice", "-n", "1"), env=(("B", "x"),))


@pytest.mark.parametrize("line, expected", [
    ("n2: --perf-candidate-env A", "line 1: argument --perf-candidate-env: 'A': use KEY=VALUE, "
     "e.g. NCCL_ALGO=Ring; fix the line"),
    ("n2: --perf-candidate-python /no/such/python", "line 1: argument --perf-candidate-python: "
     "'/no/such/python' is not an executable file"),
    ("n2: --perf-runs 3", "line 1: '--perf-runs 3' is not a stack option"),
    ("n2: --perf-candidate-prefix 'unclosed", "line 1 does not parse (No closing quotation)"),
])
def test_a_bad_stacks_line_is_named(tmp_path, line, expected):
    path = tmp_path / "stacks.txt"
    path.write_text(line + "\n")
    with pytest.raises(InputError) as raised:
        read_stacks_file(path)
    assert str(raised.value).startswith(f"--stacks {path} ")
    assert expected in str(raised.value)


# -- bad input: one line, exit status 2 ------------------------------------------------------------

def bisect(*arguments, cwd, env=None, timeout=120):
    return run_tool("bisect", *arguments, cwd=cwd, env=env, timeout=timeout)


def refused_with(done, expected: str) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("rn50-perf bisect: error: ")
    assert expected in done.stderr, done.stderr


def test_identical_stacks_are_refused(tmp_path):
    refused_with(bisect("--perf-candidate-env", f"HOME={os.environ['HOME']}", cwd=tmp_path),
                 f"the candidate (HOME={os.environ['HOME']}) differs from this stack in nothing "
                 "a bisection can layer")


def test_a_stack_that_does_not_start_is_refused(tmp_path):
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho 'ImportError: libpython3.99.so: not found' >&2\nexit 1\n")
    broken.chmod(0o755)
    refused_with(bisect("--perf-candidate-python", broken, cwd=tmp_path),
                 f"the candidate (python {broken}) does not start: ImportError: libpython3.99.so: "
                 "not found; check that its prefix and interpreter run")


@pytest.mark.parametrize("content, expected", [
    ("# one\ngood: --perf-candidate-env A=1\n",
     "--stacks {path} lists 1 stack; list at least two, one a line, the known-good one first"),
    ("a: --perf-candidate-env A=1\nb: --perf-candidate-env A=1\n",
     "--stacks {path}: every stack is the same as the first (a); list stacks that differ"),
    ("a: --perf-candidate-prefix nice\nb:\n", "--stacks {path}: the first stack (a) has a "
     "prefix, but the first stack runs the A/B sessions themselves; put a stack without one "
     "first"),
    ("a:\nb: --perf-candidate-prefix false\n",
     "b (prefix 'false') does not start: exit status 1; check that its prefix and interpreter "
     "run"),
])
def test_a_bad_list_of_stacks_is_refused(tmp_path, content, expected):
    path = tmp_path / "stacks.txt"
    path.write_text(content)
    refused_with(bisect("--stacks", path, cwd=tmp_path), expected.format(path=path))


@pytest.mark.parametrize("arguments, expected", [
    ([], "nothing to bisect: pass the candidate's --perf-candidate-* options, or --stacks FILE"),
    (["--stacks", "x.txt", "--perf-candidate-env", "A=1"], "--stacks with --perf-candidate-*"),
    (["--perf-candidate-env", "A=1", "--perf-runs", "8", "--perf-max-runs", "6"],
     "argument --perf-max-runs: 6 is below --perf-runs 8; raise it"),
    (["--stacks", "missing.txt"], "--stacks missing.txt cannot be read (No such file or "
     "directory); pass a text file with one stack a line"),
])
def test_bad_options_are_one_line(tmp_path, arguments, expected):
    refused_with(bisect(*arguments, cwd=tmp_path), expected)


@pytest.mark.parametrize("arguments, expected", [
    (["-x"], "after --: -x is not an option of the suite's runs; pass --perf-* options there"),
    (["--perf-set", "iters=x"], "after --: argument --perf-set: iters=x: 'x' is not a whole "
     "number"),
    (["--perf-runs", "4", "--perf-set", "max-runs=2"], "after --: --perf-set max-runs=2 is "
     "below --perf-runs 4"),
    # a spelling from before the prefix is the line a session gives
    (["--perf-iters", "x"], "after --: --perf-iters was renamed: use --perf-set iters=N"),
    (["--perf-candidate-env", "A=1"], "after --: --perf-candidate-* names the candidate; give it "
     "before --"),
])
def test_bad_options_for_the_runs_are_one_line(arguments, expected):
    with pytest.raises(InputError) as raised:
        session_settings(arguments)
    assert str(raised.value).startswith(expected) and "\n" not in str(raised.value)
    assert session_settings(["--perf-set", "iters=60"]).timed_iters == 60


def test_a_selection_of_several_cases_is_refused(tmp_path):
    refused_with(bisect("-k", "1n1g", "--perf-candidate-env", "A=1", cwd=tmp_path),
                 "-k '1n1g' selects 2 cases (1n1g_bf16_b4, 1n1g_fp32_b8); a bisection follows "
                 "one case")


# -- two real virtual environments -----------------------------------------------------------------

@pytest.fixture(scope="module")
def candidate_venv(tmp_path_factory):
    """A virtual environment that sees this one's packages (a .pth file) but has six 1.16.0
    (this one: 1.17.0) and tabulate 0.9.0 (this one: none) of its own, from the package index."""
    from real_wheels import seeing_venv
    python, site = seeing_venv(tmp_path_factory.mktemp("venvs") / "candidate")
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                           "--target", str(site), "six==1.16.0", "tabulate==0.9.0"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip("pip cannot install six==1.16.0 and tabulate==0.9.0 here: "
                    + (done.stderr.strip().splitlines() or ["no output"])[-1])
    return python


def test_two_virtual_environments_differ_in_their_distributions_and_layer(candidate_venv,
                                                                           tmp_path):
    import importlib.metadata
    assert importlib.metadata.version("six") == "1.17.0"
    reference = read_stack(Stack(), "the reference")
    candidate = read_stack(Stack(python=str(candidate_venv)), "the candidate")
    components, left_out = stack_components(reference, candidate,
                                            Stack(python=str(candidate_venv)))
    assert [(c.label, c.change) for c in components] == [
        ("six==1.16.0", "six: 1.17.0 -> 1.16.0"), ("tabulate==0.9.0", "tabulate: absent -> 0.9.0")]
    assert left_out == []
    check = ("import importlib.metadata as m, six, tabulate; "
             "print(six.__version__, m.version('six'), tabulate.__version__)")
    for group, expected in ((components, ["1.16.0", "1.16.0", "0.9.0"]),):
        stack = layered_stack(group, tmp_path / "overlay")
        done = subprocess.run(stack.wrap([sys.executable, "-c", check]),
                              env=worker_environment(REPO_ROOT), cwd=REPO_ROOT,
                              capture_output=True, text=True, check=True)
        assert done.stdout.split() == expected
    # six alone: this interpreter imports the candidate's six, and tabulate is still absent
    alone = layered_stack(components[:1], tmp_path / "six-only")
    done = subprocess.run(alone.wrap([sys.executable, "-c", "import six, importlib.util as u; "
                                      "print(six.__version__, u.find_spec('tabulate'))"]),
                          env=worker_environment(REPO_ROOT), cwd=REPO_ROOT, capture_output=True,
                          text=True, check=True)
    assert done.stdout.split() == ["1.16.0", "None"]


def test_the_tool_lists_the_two_environments_changes(candidate_venv, tmp_path):
    done = bisect("--perf-candidate-python", candidate_venv, "--list", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1] == ("2 changes: six: 1.17.0 -> 1.16.0; tabulate: "
                                           "absent -> 0.9.0")


# -- real bisections -------------------------------------------------------------------------------

def real_bisection(*arguments, tmp_path, env=None) -> tuple[subprocess.CompletedProcess, dict]:
    """The tool as a user runs it, on real A/B sessions of the smoke case; its transcript
    printed (pytest -s shows it) and its bisection.json."""
    work = tmp_path / "work"
    command = ["-k", "1n1g_fp32_b8", "--work-dir", work, *arguments]
    done = bisect(*command, cwd=REPO_ROOT, env=env, timeout=1800)
    print(f"$ rn50-perf bisect {' '.join(map(str, command))}\n{done.stdout}"
          f"{done.stderr}")
    return done, json.loads((work / "bisection.json").read_text())


# ONEDNN_PRIMITIVE_CACHE_CAPACITY=0: oneDNN builds every convolution's primitive again each step
# (about 33% slower here). Not GOMP_SPINCOUNT=300 (21% slower on a quiet host): with another
# job on the cores, threads that spin at a barrier are the slow side, and the reference ran 6.6x
# slower than the candidate (docs/bisect.md).
SLOW_SETTING = "ONEDNN_PRIMITIVE_CACHE_CAPACITY=0"
# The four settings' slow one: oneDNN held to SSE4.1 (about 54% slower here), first in the
# order of changes, so the search takes two probes.
FOUR_SLOW_SETTING = "DNNL_MAX_CPU_ISA=SSE41"
# The issue's four settings: the primitive cache off (about 30% slower here) among three harmless
# ones; undecided under the earlier rule (docs/bisect.md), which proved each half not slow on its
# own against a line from another session.
CACHE_SETTINGS = [SLOW_SETTING, "MALLOC_ARENA_MAX=1", "OMP_DISPLAY_ENV=FALSE",
                  "DNNL_VERBOSE=0"]
FOUR_SETTINGS = [FOUR_SLOW_SETTING, "MALLOC_ARENA_MAX=1", "OMP_DISPLAY_ENV=FALSE",
                 "DNNL_VERBOSE=0"]


@pytest.mark.slow
@pytest.mark.quiet_host
@pytest.mark.long
def test_four_settings_are_bisected_to_the_one_that_slows_training(tmp_path):
    """oneDNN held to SSE4.1 (about 54% slower here) among three harmless settings."""
    options = [f"--perf-candidate-env={setting}" for setting in FOUR_SETTINGS]
    done, log = real_bisection(*options, tmp_path=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert log["finding"]["groups"] == [[FOUR_SLOW_SETTING]]
    assert len(log["probes"]) <= 2   # first in its half and in the first half: 2 probes
    assert log["probes"][-1]["answer"] == "first"
    assert f"the slowdown follows {FOUR_SLOW_SETTING} (ratio 0." in done.stdout


@pytest.mark.slow
@pytest.mark.quiet_host
@pytest.mark.long
def test_the_issues_four_settings_are_bisected_to_the_primitive_cache(tmp_path):
    """The primitive cache off (about 30% slower here) among three harmless settings (issue 46):
    each probe the reference, the whole and its two parts in the same rounds."""
    options = [f"--perf-candidate-env={setting}" for setting in CACHE_SETTINGS]
    done, log = real_bisection(*options, tmp_path=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert log["finding"]["groups"] == [[SLOW_SETTING]]
    assert len(log["probes"]) <= 3
    last = log["probes"][-1]
    assert last["arms"]["first"] == [SLOW_SETTING] and last["answer"] == "first"
    assert f"the slowdown follows {SLOW_SETTING} (ratio 0." in done.stdout


@pytest.mark.slow
@pytest.mark.quiet_host
@pytest.mark.long
def test_six_stacks_are_bisected_to_the_fourth_in_three_probes(tmp_path):
    """Six stacks, each a set of settings; the fourth turns the primitive cache off and the
    later ones keep it so, beside harmless changes from stack to stack."""
    path = tmp_path / "stacks.txt"
    path.write_text("# six nightly stacks, oldest first\n"
                    "n1: --perf-candidate-env OMP_DISPLAY_ENV=FALSE\n"
                    "n2: --perf-candidate-env MALLOC_ARENA_MAX=1\n"
                    "n3: --perf-candidate-env MALLOC_ARENA_MAX=1 "
                    "--perf-candidate-env DNNL_VERBOSE=0\n"
                    "n4: --perf-candidate-env MALLOC_ARENA_MAX=1 "
                    f"--perf-candidate-env {SLOW_SETTING}\n"
                    f"n5: --perf-candidate-env {SLOW_SETTING} --perf-candidate-env DNNL_VERBOSE=0\n"
                    f"n6: --perf-candidate-env {SLOW_SETTING}\n")
    done, log = real_bisection("--stacks", path, tmp_path=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert log["finding"]["first_slower"] == "n4"
    assert len(log["probes"]) <= 3
