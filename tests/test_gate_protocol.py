"""The gate's protocol, once (perf_tests/judging/gate_protocol.py): the run counts a session
resolves, the throughput mode plans and `rn50-perf calibrate --replay` takes are the same, and
the replay takes the gate's decisions on the same runs. Pure: no worker is started."""
from dataclasses import replace
from itertools import cycle

import pytest

from perf_tests.baselines.file import BaselineEntry
from perf_tests.core.cases import FULL, SMOKE, Case
from perf_tests.judging.gate_protocol import run_counts
from perf_tests.judging.protocol_replay import CASE, replay_session
from perf_tests.judging.verdicts import AMBIGUOUS, INCONCLUSIVE
from perf_tests.modes.throughput import Throughput

# Runs whose median stays below the 5% band and are never all below it: ambiguous at every count.
UNCLEAR = [90.0, 96.0]
ENTRY = BaselineEntry(CASE.case_id, 100.0, [], tolerance=0.05)


@pytest.mark.parametrize("runs, max_runs, recording, expected", [
    (3, None, False, (3, 9, 6)),
    (5, None, False, (5, 15, 10)),
    (5, 6, False, (5, 6, 6)),      # the cap: a regression is confirmed on all it allows
    (5, 3, False, (5, 5, 5)),      # never below the runs
    (10, None, True, (10, 20, 20)),
])
def test_run_counts(runs, max_runs, recording, expected):
    counts = run_counts(runs, max_runs, recording)
    assert (counts.runs, counts.max_runs, counts.confirm_runs) == expected


@pytest.mark.parametrize("options", [{}, {"runs": 5}, {"runs": 5, "max_runs": 6},
                                     {"runs": 4, "max_runs": 12}])
def test_the_replay_takes_the_runs_and_the_verdict_the_mode_plans(mode_context, options):
    context = mode_context(**options)
    plan = replace(Throughput(context).plan(Case(1, 1, "fp32", 8)), entry=ENTRY)
    counts = run_counts(context.settings.runs, options.get("max_runs"))
    assert (plan.max_runs, plan.confirm_runs) == (counts.max_runs, counts.confirm_runs)

    stream = cycle(UNCLEAR)
    replayed = replay_session(ENTRY, lambda: next(stream), context.settings.runs, profile=SMOKE,
                              max_runs=options.get("max_runs"))
    assert replayed.runs == plan.max_runs and replayed.verdict == INCONCLUSIVE
    taken = (UNCLEAR * plan.max_runs)[:plan.max_runs]
    assert all(plan.protocol.more_wanted(taken[:count])
               for count in range(context.settings.runs, plan.max_runs))
    assert not plan.protocol.more_wanted(taken)
    judged = plan.judgement(taken)
    assert judged.verdict == AMBIGUOUS
    assert plan.protocol.settled(judged, len(taken)).verdict == replayed.verdict


def test_a_recording_adds_no_run_and_settles_unclear_as_inconclusive(mode_context):
    plan = replace(Throughput(mode_context(update_baselines=True)).plan(Case(1, 1, "fp32", 8)),
                   entry=ENTRY)
    assert (plan.max_runs, plan.recording) == (run_counts(SMOKE.baseline_runs, None,
                                                          True).max_runs, True)
    runs = UNCLEAR * 2
    assert not plan.protocol.more_wanted(runs)
    settled = plan.protocol.settled(plan.judgement(runs), len(runs))
    assert settled.verdict == INCONCLUSIVE
    assert settled.message.endswith("after 4 runs (recording a baseline takes no more runs to "
                                    "decide)")


def test_a_session_resolves_the_counts_of_the_protocol():
    from perf_tests.cli.settings import Settings
    for profile in (SMOKE, FULL):
        for options in ({}, {"runs": 4}, {"runs": 4, "max_runs": 6},
                        {"update_baselines": True}):
            settings = Settings(**options).resolved(profile)
            assert settings.max_runs == run_counts(
                settings.runs, options.get("max_runs"),
                bool(options.get("update_baselines"))).max_runs
