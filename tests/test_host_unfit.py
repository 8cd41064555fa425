"""The host-unfit verdict, on hand-made runs: a case whose slow runs are the ones a busy host
marked is not a software regression; a baseline is never made of marked runs (they are run
again); promotion applies the same rule. The sessions beside real busy loops and under a real
CPU quota are in test_host_unfit_sessions.py."""
import pytest

from perf_tests.baselines.checks import (marked_refusal, out_of_reach, recordable_runs,
                                         recordable_speedup, unmarked_needed)
from perf_tests.baselines.file import BaselineEntry
from perf_tests.core.cases import SMOKE, Case
from perf_tests.core.text import marked_runs_text, run_numbers
from perf_tests.judging.host_marks import marked_runs, run_marks
from perf_tests.judging.verdicts import HOST_UNFIT, PASS, REGRESSION
from perf_tests.modes.throughput import Plan, run_line
from perf_tests.runs import protocol
from perf_tests.runs.outcome import RunOutcome
from perf_tests.runs.protocol import run_rounds

CASE = Case.parse("1n1g_fp32_b8")
BASELINE = BaselineEntry(case_id=CASE.case_id, median_ips=16.0,
                         runs_ips=[15.1, 14.7, 16.4, 15.7, 13.8, 16.3, 16.8, 15.7, 18.1, 19.6])
BUSY = "other processes used 1.4 of 2 cores"


def plan(entry=BASELINE, tolerance=0.15):
    return Plan(CASE, config=None, entry=entry, no_entry_reason="", given_tolerance=tolerance,
                profile=SMOKE, reference=1.0, baseline_speedup=1.0, max_runs=9, confirm_runs=6)


def run(index, ips, *busy):
    return RunOutcome(index, "ok", ips, "", record={"host_busy": list(busy)})


def verdict_of(runs):
    decided_plan = plan()
    runs_ips = [one.global_ips for one in runs]
    return decided_plan.host_aware(runs_ips, marked_runs(runs),
                                   decided_plan.judgement(runs_ips, final=True))


# -- what a mark says --------------------------------------------------------------------------

def test_run_numbers_read_as_ranges():
    assert run_numbers([7, 2, 3, 4, 9, 10]) == "2-4, 7, 9-10"
    assert run_numbers([5]) == "5"


def test_the_same_reason_over_several_runs_is_one_clause_with_the_range_of_its_figures():
    assert marked_runs_text({
        2: ["other processes used 1.4 of 2 cores"], 3: ["other processes used 1.3 of 2 cores"],
        4: ["other processes used 1.4 of 2 cores", "CPU quota throttled 40 times (1.2 s)"],
        7: ["GPU 0: 2 other processes"]}) == (
        "runs 2-4: other processes used 1.3-1.4 of 2 cores; run 4: CPU quota throttled 40 "
        "times (1.2 s); run 7: GPU 0: 2 other processes")


def test_a_run_is_marked_by_what_its_record_says_was_off():
    gpu = "GPU 0: SM clock 1410 of 1980 MHz (hw_thermal_slowdown)"
    assert run_marks(run(1, 10.0, gpu)) == [gpu]
    assert run_marks(run(1, 10.0)) == []
    assert run_marks(RunOutcome(1, "ok", 10.0, "", record=None)) == []
    assert marked_runs([run(1, 10.0), run(2, 9.0, BUSY)]) == {2: [BUSY]}


def test_a_rerun_of_a_marked_run_says_so_in_its_progress_line():
    assert run_line("1n1g_fp32_b8", run(11, 16.2), 10, 20, "again for a marked run") == (
        "1n1g_fp32_b8 run 11 (again for a marked run, up to 20): 16.2 img/s")


# -- the verdict -------------------------------------------------------------------------------

def test_every_run_marked_and_slow_is_host_unfit_not_a_regression():
    runs = [run(index, ips, f"other processes used {load} of 2 cores")
            for index, ips, load in ((1, 0.9, 1.3), (2, 2.2, 1.5), (3, 0.5, 1.5))]
    decided = verdict_of(runs)
    assert decided.verdict == HOST_UNFIT
    assert decided.message == (
        "1n1g_fp32_b8: host unfit, not a software regression: 0.9 img/s is 94.4% below the "
        "baseline 16.0 img/s (tolerance 15%, 3 runs 0.5-2.2); the host was unfit in runs 1-3: "
        "other processes used 1.3-1.5 of 2 cores; no run was unmarked: rerun on a quiet host")


def test_slow_marked_runs_beside_normal_unmarked_ones_are_host_unfit():
    runs = [run(1, 15.8), run(2, 4.0, BUSY), run(3, 3.5, BUSY), run(4, 4.2, BUSY),
            run(5, 16.1), run(6, 3.9, BUSY)]
    decided = verdict_of(runs)
    assert decided.verdict == HOST_UNFIT
    assert "the host was unfit in runs 2-4, 6: other processes used 1.4 of 2 cores" \
        in decided.message
    assert decided.message.endswith("2 unmarked runs (15.8-16.1 img/s) are not below the "
                                    "baseline's band: rerun on a quiet host")


def test_unmarked_runs_as_slow_as_the_marked_ones_are_a_regression_named_with_the_marks():
    runs = [run(1, 8.0), run(2, 7.5, BUSY), run(3, 8.2), run(4, 7.9), run(5, 8.1),
            run(6, 7.7, BUSY)]
    decided = verdict_of(runs)
    assert decided.verdict == REGRESSION
    assert decided.message.endswith("; the host was unfit in runs 2, 6: other processes used "
                                    "1.4 of 2 cores, but the 4 unmarked runs are slower too")


def test_unmarked_runs_below_the_band_that_cannot_prove_it_leave_the_slowdown_standing():
    """Two unmarked runs whose median is below the band, one of them within it: too unclear for
    the rule to call a regression, and no clearing of the software either: the marks do not
    turn the case into host-unfit."""
    runs = [run(1, 8.0), run(2, 4.0, BUSY), run(3, 3.9, BUSY), run(4, 15.0), run(5, 4.1, BUSY),
            run(6, 3.8, BUSY)]
    decided = verdict_of(runs)
    assert decided.verdict == REGRESSION
    assert decided.message.endswith("; the host was unfit in runs 2-3, 5-6: other processes "
                                    "used 1.4 of 2 cores, but the 2 unmarked runs do not clear "
                                    "the software on their own")


def test_recording_a_baseline_judges_the_runs_it_has_without_asking_for_more():
    """Under --perf-update-baselines no run is added to decide, so a slowdown against the old entry
    is judged on the runs as they are, not sent to be confirmed on more."""
    recording = Plan(CASE, config=None, entry=BASELINE, no_entry_reason="", given_tolerance=0.15,
                     profile=SMOKE, reference=1.0, baseline_speedup=1.0, max_runs=20,
                     confirm_runs=20, recording=True)
    slower = [8.0 + index / 10 for index in range(10)]
    assert recording.judgement(slower).verdict == REGRESSION
    assert plan().judgement(slower[:3]).verdict != REGRESSION   # gating: confirm on 6 first


def test_what_a_mark_is_about_stays_and_only_its_figures_collapse():
    assert marked_runs_text({
        2: ["GPU 0 (rank 0): 1 other process (pid 4242)"],
        3: ["GPU 1 (rank 1): 1 other process (pid 5120)"],
        6: ["GPU 0: SM clock 1410 of 1980 MHz (hw_thermal_slowdown)"],
        7: ["GPU 0: SM clock 1300 of 1980 MHz (hw_thermal_slowdown)"],
        8: ["host-2 (node 1): other processes used 1.0 of 2 cores"]}) == (
        "run 2: GPU 0 (rank 0): 1 other process (pid 4242); run 3: GPU 1 (rank 1): 1 other "
        "process (pid 5120); runs 6-7: GPU 0: SM clock 1300-1410 of 1980 MHz "
        "(hw_thermal_slowdown); run 8: host-2 (node 1): other processes used 1.0 of 2 cores")


def test_marks_on_a_passing_case_change_nothing():
    runs = [run(1, 15.9, BUSY), run(2, 16.3), run(3, 15.5, BUSY)]
    decided = verdict_of(runs)
    assert decided.verdict == PASS and "unfit" not in decided.message


def test_without_marks_a_slowdown_stays_a_regression():
    decided = verdict_of([run(index, 8.0 + index / 10) for index in range(1, 7)])
    assert decided.verdict == REGRESSION and "unfit" not in decided.message


# -- runs again instead of recording a marked run ---------------------------------------------

@pytest.fixture
def scripted_runs(monkeypatch):
    """protocol.run_once answering with the next of a list of runs, each marked or not."""
    def script(marks):
        outcomes = iter(marks)

        def run_once(case, launcher, request, index, labels=None, relaunch_allowed=False):
            return run(index, 16.0, *([BUSY] if next(outcomes) else []))
        monkeypatch.setattr(protocol, "run_once", run_once)

    return script, lambda index: f"run-{index}"


def measured(run_dir, runs, max_runs, counts):
    return [one.index for one in run_rounds(
        CASE, None, lambda folder: None, run_dir, runs, max_runs,
        counts=lambda in_round: all(map(counts, in_round.values()))).runs]


def test_a_marked_run_is_run_again_until_enough_unmarked_ones(scripted_runs):
    script, results = scripted_runs
    script([False, True, False, True, True, False])
    assert measured(results, 3, 6, lambda one: not run_marks(one)) == [1, 2, 3, 4, 5, 6]


def test_runs_again_stop_at_the_most_runs_allowed(scripted_runs):
    script, results = scripted_runs
    script([True] * 10)
    assert measured(results, 3, 6, lambda one: not run_marks(one)) == [1, 2, 3, 4, 5, 6]


def test_when_every_run_counts_the_planned_runs_end_it(scripted_runs):
    script, results = scripted_runs
    script([True] * 10)
    assert measured(results, 3, 6, lambda one: True) == [1, 2, 3]


@pytest.mark.parametrize("unmarked, done, max_runs, needed, hopeless", [
    (0, 10, 20, 10, False),   # ten runs left could all be unmarked
    (0, 11, 20, 10, True),    # nine left: never ten
    (1, 11, 20, 10, False),
    (10, 20, 20, 10, False),
    (2, 2, 3, 2, False),
    (0, 2, 3, 2, True),
    (0, 3, 3, 0, False),      # nothing needed (forced, or not recording)
])
def test_runs_again_are_out_of_reach_once_the_cap_cannot_make_up_the_unmarked_ones_needed(
        unmarked, done, max_runs, needed, hopeless):
    assert out_of_reach(unmarked, done, max_runs, needed) is hopeless


def test_the_unmarked_runs_a_recording_needs_are_the_runs_asked_for_at_most_the_profiles():
    assert unmarked_needed(10, 10) == 10 and unmarked_needed(10, 2) == 2
    assert unmarked_needed(10, 12) == 10


def recording(mode_context, capsys, **options) -> tuple[list[int], str]:
    """The runs a recording of 1n1g_fp32_b8 measured (scripted_runs' runs) and the lines it
    printed."""
    from perf_tests.modes.throughput import Throughput
    mode = Throughput(mode_context(**{"update_baselines": True, **options}))
    capsys.readouterr()
    done = mode.run(mode.plan(CASE))
    return [one.index for one in done.runs], capsys.readouterr().out


def test_a_recording_stops_running_marked_runs_again_once_they_cannot_be_recorded(
        scripted_runs, mode_context, capsys):
    """Issue 48: every run of 20 marked and the recording refused; after the 11th, the 9 left
    cannot make the 10 unmarked runs it needs."""
    script, _ = scripted_runs
    script([True] * 20)
    indexes, printed = recording(mode_context, capsys)
    assert indexes == list(range(1, 12))
    assert ("1n1g_fp32_b8: no more runs: the host marked 11 of its 11 runs, and the 9 more "
            "--perf-set max-runs=20 allows cannot make up the 10 unmarked runs a recording needs"
            ) in printed


def test_a_recording_with_unmarked_runs_stops_later_and_a_forced_one_runs_to_the_cap(
        scripted_runs, mode_context, capsys):
    script, _ = scripted_runs
    script([False, False] + [True] * 18)
    assert recording(mode_context, capsys)[0] == list(range(1, 14))   # 2 + 7 < 10
    script([True] * 20)
    indexes, printed = recording(mode_context, capsys, update_baselines="force")
    assert indexes == list(range(1, 21)) and "no more runs" not in printed


# -- what a baseline is made of -----------------------------------------------------------------

def test_an_entry_is_made_of_the_unmarked_runs_also_from_results_json():
    assert recordable_runs([16.0, 4.0, 15.8, 3.9], {2: [BUSY], 4: [BUSY]}) == [16.0, 15.8]
    assert recordable_runs([16.0, 4.0, 15.8, 3.9], {"2": [BUSY], "4": [BUSY]}) == [16.0, 15.8]
    assert recordable_runs([4.0, 3.9], {1: [BUSY], 2: [BUSY]}) == [4.0, 3.9]  # forced
    assert recordable_runs([16.0, 15.8], None) == [16.0, 15.8]


def test_the_speedup_is_that_of_the_recorded_runs():
    assert recordable_speedup(1.5, [10.0, 20.0, 30.0], [20.0, 30.0], 2) == pytest.approx(1.875)
    assert recordable_speedup(1.5, [10.0, 20.0], [10.0, 20.0], 2) == 1.5
    assert recordable_speedup(None, [10.0], [10.0], 2) is None
    assert recordable_speedup(1.0, [100.0] * 3 + [40.0] * 3, [100.0] * 3, 1) == 1.0


def test_too_few_unmarked_runs_are_refused_with_the_marks():
    assert marked_refusal({3: [BUSY], 5: [BUSY]}, 10, 10) == [
        "the host was unfit in runs 3, 5: other processes used 1.4 of 2 cores, leaving 8 "
        "unmarked runs of the 10 needed (where this load belongs in the baseline, "
        "--perf-ignore-host-state records it)"]
    # One run asked for, run twice and marked twice: 0 of the 1 needed.
    assert "leaving 0 unmarked runs of the 1 needed" in marked_refusal(
        {1: [BUSY], 2: [BUSY]}, 2, 1)[0]
    assert marked_refusal({3: [BUSY]}, 11, 10) == []
    assert marked_refusal({}, 3, 10) == []


# -- a gate that could not judge -----------------------------------------------------------------

def test_a_session_names_the_cases_it_could_not_judge_and_what_it_exits_with():
    from perf_tests.cli.settings import Settings
    from perf_tests.modes.outcomes import UNJUDGED_EXIT_STATUS, unjudged_cases, unjudged_line
    cases = {"1n1g_fp32_b8": {"verdict": "host-unfit"}, "1n2g_fp32_b8": {"verdict": "pass"},
             "2n1g_fp32_b8": {"verdict": "inconclusive"},
             "1n1g_bf16_b4": {"verdict": "host-unfit", "baseline_update": "recorded"}}
    unjudged = unjudged_cases(cases)
    assert unjudged == {"1n1g_fp32_b8": "host-unfit", "2n1g_fp32_b8": "inconclusive"}
    assert UNJUDGED_EXIT_STATUS == 75
    assert unjudged_line(unjudged, Settings(require_baseline=True)) == (
        "could not judge 2 cases (1n1g_fp32_b8 host-unfit, 2n1g_fp32_b8 inconclusive): the "
        "session exits 75, not 0 (--perf-require-baseline); rerun on a quiet host, or with more "
        "runs (--perf-set max-runs)")
    assert unjudged_line(unjudged, Settings(require_baseline=True, strict=True)).endswith(
        "they fail (--perf-strict)")
    assert unjudged_line(unjudged, Settings()).endswith(
        "they pass with a warning; under --perf-require-baseline the session exits 75, under "
        "--perf-strict they fail")
