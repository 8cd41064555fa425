"""What may become a baseline entry (perf_tests/baselines/checks.py): the one rule that
`--perf-update-baselines` and `tools/promote_baseline.py` apply, and what the session does with
it:
a refused entry is not written and the case says why and how to keep its runs; a forced one is
written with a warning. And a --perf-baseline-file that does not exist is a usage error."""
from __future__ import annotations

import json
import shlex
from dataclasses import replace

import pytest

from conftest import TINY_CASE_ARGS, baseline_document
from perf_tests.baselines.checks import impossible, refusals
from perf_tests.context.baseline_store import recorded
from perf_tests.context.perf_warnings import PerfWarning
from perf_tests.core.cases import SMOKE, THROUGHPUT, Case
from perf_tests.judging.verdicts import ERROR, NO_BASELINE
from perf_tests.modes.throughput import Throughput
from perf_tests.results.case_result import CaseResult
from perf_tests.session.measure import measure
from test_modes import Counting

STEADY = [30.0, 30.5, 29.8, 30.2, 30.1, 29.9, 30.3, 30.0, 30.4, 29.7]


def test_steady_runs_of_the_profiles_count_on_one_device_are_a_baseline():
    assert refusals(STEADY, wanted_runs=10, tolerance=0.15) == []


def test_fewer_runs_than_a_baseline_is_recorded_from_are_refused():
    assert refusals(STEADY[:3], wanted_runs=10, tolerance=0.15) == [
        "3 runs, fewer than the 10 a baseline is recorded from (leave --perf-runs out or give "
        "10)"]


def test_runs_far_from_their_median_are_refused_but_one_outlier_in_ten_is_not():
    # A real one (/tmp/junk in issue 35's note): busy loops on and off beside 1n1g.
    busy = [21.04, 6.69, 20.18, 5.35, 6.70, 19.79, 17.14, 5.92, 18.71, 18.22]
    assert refusals(busy, wanted_runs=10, tolerance=0.15) == [
        "4 of its 10 runs lie over 30% from their median 17.7 img/s (10 runs 5.35-21.0): was "
        "the host busy with other work?"]
    assert refusals(STEADY[:-1] + [3.0], wanted_runs=10, tolerance=0.15) == []
    two_of_ten = STEADY[:-2] + [3.0, 60.0]
    assert refusals(two_of_ten, wanted_runs=10, tolerance=0.15) == []
    assert refusals(two_of_ten, wanted_runs=10, tolerance=None) == []   # time to train


@pytest.mark.parametrize("speedup, refused", [(7.30, True), (2.25, True), (2.19, False),
                                              (1.6, False)])
def test_scaling_above_linear_is_impossible_on_two_devices(speedup, refused):
    """Not a refusal that force overrides: such a speedup is never true."""
    reasons = impossible(speedup, devices=2)
    assert bool(reasons) == refused
    assert refusals(STEADY, wanted_runs=10, tolerance=0.15, speedup=speedup, devices=2) == []
    if refused:
        assert reasons == [f"speedup {speedup:.2f} on 2 devices is a scaling efficiency of "
                           f"{speedup / 2:.0%}, which cannot be true: its 1n1g reference ran "
                           "slow"]


def test_a_speedup_over_a_refused_1n1g_median_is_refused_with_it():
    assert refusals(STEADY, wanted_runs=10, tolerance=0.15, speedup=1.14, devices=2,
                    refused_reference="1n1g_fp32_b8") == [
        "its speedup 1.14 is over 1n1g_fp32_b8's median, whose runs were refused as a baseline"]


def junk(runs=STEADY, speedup=7.30) -> CaseResult:
    return CaseResult.judged(Case(1, 2, "fp32", 8), THROUGHPUT, NO_BASELINE,
                             "1n2g_fp32_b8: 61.0 img/s", runs_ips=list(runs), speedup=speedup,
                             settings={}, environment={})


def test_the_throughput_mode_refuses_superlinear_scaling_and_too_few_runs(mode_context):
    mode = Throughput(mode_context(update_baselines=True))
    fine = mode.baseline_update(junk(speedup=1.9))
    assert (fine.refusals, fine.impossible) == ((), ())
    update = mode.baseline_update(junk(runs=STEADY[:2]))
    assert [reason.split(",")[0] for reason in update.refusals] == ["2 runs"]
    assert [reason.split(",")[0] for reason in update.impossible] == [
        "speedup 7.30 on 2 devices is a scaling efficiency of 365%"]


def test_an_impossible_speedup_is_not_recorded_even_forced_nor_offered_to_promotion(
        mode_context):
    """--perf-update-baselines=force: one line, the file unwritten, and no promotion
    command (the promotion tool refuses it too, forced or not)."""
    context = mode_context(update_baselines="force")
    result = junk()
    update = Throughput(context).baseline_update(result)
    result = context.baselines.record(result, update, force=True)
    assert not recorded(result)
    assert result.verdict == ERROR and not context.baselines.path.exists()
    assert result.message.startswith(
        "1n2g_fp32_b8: baseline not recorded (not even with --perf-update-baselines=force): "
        "speedup 7.30 on 2 devices is a scaling efficiency of 365%, which cannot be true: its "
        "1n1g reference ran slow; its 10 measured runs are kept in ")
    assert result.message.endswith("no promotion records this speedup: record 1n1g_fp32_b8 "
                                   "and 1n2g_fp32_b8 again, on a quiet host")
    assert "rn50-perf promote" not in result.message and "--force" not in \
        result.message.split("(not even with --perf-update-baselines=force)")[1]


class Checked(Counting):
    """Counting's single run (or `runs`), its entry checked as the suite's modes check theirs."""
    runs: list[float] | None = None

    def run(self, plan):
        return self.runs or super().run(plan)

    def baseline_update(self, result):
        reasons = refusals(result.runs_ips, wanted_runs=self.context.profile.baseline_runs)
        return replace(super().baseline_update(result), refusals=tuple(reasons))


def test_the_throughput_mode_refuses_a_speedup_over_this_sessions_refused_1n1g(mode_context):
    mode = Throughput(mode_context(update_baselines=True))
    mode.context.rows.save(CaseResult.judged(Case(1, 1, "fp32", 8), THROUGHPUT, ERROR, "refused",
                                             baseline_refused=[
                                          "8 of its 10 runs lie over 30% from their median"]))
    update = mode.baseline_update(junk(speedup=1.14))
    assert update.refusals == (
        "its speedup 1.14 is over 1n1g_fp32_b8's median, whose runs were refused as a baseline",)


def test_a_refused_entry_is_not_written_and_its_line_says_how_to_keep_the_runs(mode_context):
    recording = mode_context(update_baselines=True, runs=2)
    assert recording.settings.runs == 2 and SMOKE.baseline_runs == 10
    result = measure(Checked(recording), Case(1, 1, "fp32", 8))
    assert result.verdict == ERROR
    assert result.message.startswith(
        "1n1g_fp32_b8: baseline not recorded: 1 run, fewer than the 10 a baseline is recorded "
        "from (leave --perf-runs out or give 10); rerun on a quiet host, or record it anyway "
        "with --perf-update-baselines=force; ")
    assert not recording.baselines.path.exists()
    row = json.loads(recording.results.results_file.read_text())["cases"]["1n1g_fp32_b8"]
    assert row["verdict"] == ERROR and row["runs_ips"] == [10.0]
    assert row["baseline_refused"][0].startswith("1 run, fewer than the 10")


def test_a_forced_entry_is_written_with_a_warning_that_names_what_was_forced(mode_context):
    forced = mode_context(update_baselines="force")
    with pytest.warns(PerfWarning, match="1n1g_fp32_b8: baseline recorded with "
                                         "--perf-update-baselines=force although 1 run, fewer "
                                         "than the 10"):
        result = measure(Checked(forced), Case(1, 1, "fp32", 8))
    assert result.verdict == NO_BASELINE
    stored = json.loads(forced.baselines.path.read_text())["entries"]["1n1g_fp32_b8"]
    assert stored["median_ips"] == 10.0
    assert result.row.baseline_forced[0].startswith("1 run, fewer than the 10")


def test_an_entry_the_checks_pass_is_written_without_a_warning(mode_context, recwarn):
    recording = mode_context(update_baselines=True)
    checked = Checked(recording)
    checked.runs = STEADY
    result = measure(checked, Case(1, 1, "fp32", 8))
    assert result.verdict == NO_BASELINE and recording.baselines.path.exists()
    assert not result.row.baseline_forced
    assert not [w for w in recwarn if issubclass(w.category, PerfWarning)]


# -- sessions as a user runs them ----------------------------------------------------------------

def test_a_mistyped_baseline_file_is_a_usage_error(run_suite, tmp_path):
    missing = tmp_path / "nope.json"
    run = run_suite("-k", "1n1g_fp32", *TINY_CASE_ARGS, baseline_file=missing)
    assert run.outcome.ret == 4, run.output
    assert (f"ERROR: baseline file {missing} (--perf-baseline-file) does not exist; check the "
            "path, or create it with --perf-update-baselines") in run.output
    assert not (run.results_dir / "results.json").exists()


def redo_words(row: dict) -> list[str]:
    """The words of a case's repro command, after the `cd` to the repository."""
    return shlex.split(row["repro"].split(" && ")[-1])


@pytest.mark.slow
def test_update_baselines_from_two_runs_is_refused_and_the_file_stays_unwritten(run_suite,
                                                                               tmp_path):
    """And (issue 48, item 2) --perf-explain's default takes no operator profile for an entry
    that is not written, and the line's repro command records into the same file again."""
    path = tmp_path / "cpu.json"
    run = run_suite("-k", "1n1g_fp32", *TINY_CASE_ARGS, "--perf-runs", "2",
                    "--perf-update-baselines", baseline_file=path)
    assert run.outcome.ret == 1, run.output
    assert ("1n1g_fp32_b8: baseline not recorded: 2 runs, fewer than the 10 a baseline is "
            "recorded from") in run.output
    assert "record it anyway with --perf-update-baselines=force" in run.output
    assert not path.exists()
    row = run.cases["1n1g_fp32_b8"]
    assert len(row["runs_ips"]) == 2
    assert "profiling operators" not in run.output and "op_profile" not in row
    words = redo_words(row)
    assert words[3].endswith("[1n1g_fp32_b8]") and "--perf-update-baselines" in words
    assert words[words.index("--perf-baseline-file") + 1] == str(path)
    assert f"; repro: {row['repro']}" in run.output


@pytest.mark.slow
def test_an_impossible_speedup_is_not_recorded_even_forced(run_suite):
    """Issue 48, item 1, in a session: a 1n1g entry far below what this host measures makes
    1n2g's speedup over it impossible; --perf-update-baselines=force does not record it, no
    operator profile is taken for it, and its repro command records the 1n1g case and it
    again."""
    baseline = baseline_document({"1n1g_fp32_b8": {"median_ips": 0.5}})
    run = run_suite("-k", "1n2g_fp32", *TINY_CASE_ARGS, "--perf-runs", "1",
                    "--perf-update-baselines=force", baseline=baseline)
    row = run.cases["1n2g_fp32_b8"]
    assert row["verdict"] == ERROR and run.outcome.ret == 1, run.output
    assert row["message"].startswith("1n2g_fp32_b8: baseline not recorded (not even with "
                                     "--perf-update-baselines=force): speedup "), row["message"]
    assert "which cannot be true: its 1n1g reference ran slow" in row["message"]
    assert "no promotion records this speedup: record 1n1g_fp32_b8 and 1n2g_fp32_b8 again" \
        in row["message"]
    assert run.baseline() == baseline
    assert "profiling operators" not in run.output
    words = redo_words(row)
    assert [word.rsplit("[", 1)[-1] for word in words[3:5]] == ["1n1g_fp32_b8]",
                                                                "1n2g_fp32_b8]"]
    assert "--perf-update-baselines=force" in words

