"""The mode interface and the skeleton every mode runs through (perf_tests/session/measure.py): a
mode of this test's own, which measures a number without launching anything, goes through the same
steps as the suite's modes: skip, plan, the device lock, judge, save (with its `kind`), and the
baseline update through the one `BaselineStore`. And the `kind` of rows in older results.json files.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from perf_tests.context.baseline_store import ENTRIES, Update
from perf_tests.context.context import Context
from perf_tests.core.cases import AB, KINDS, MAX_BATCH, THROUGHPUT, TIME_TO_TRAIN, Case, row_kind
from perf_tests.judging.verdicts import ERROR, NO_BASELINE, PASS, REGRESSION, SKIPPED
from perf_tests.modes import MODES
from perf_tests.modes.base import Mode
from perf_tests.session.measure import measure
from rn50_model.config import ConfigError


@dataclass
class Plan:
    case: Case
    entry: dict | None
    why: str


class Counting(Mode):
    """A mode whose 'runs' are a number given to it: what the skeleton does around any mode."""
    kind = THROUGHPUT
    measured = 10.0
    skip = ""
    bad_config = False

    @staticmethod
    def wanted(settings) -> bool:
        return True

    def cases(self) -> list[Case]:
        return [Case(1, 1, "fp32", 8)]

    def skip_reason(self, case):
        return self.skip or None

    def plan(self, case):
        if self.bad_config:
            raise ConfigError("batch 8 does not fit this test")
        entry, why = self.context.baselines.lookup(case.case_id, {"device_type": "cpu"})
        return Plan(case, entry, why)

    def run(self, plan):
        return [self.measured]

    def judge(self, plan, measured):
        if plan.entry is None:
            return self.result(plan.case, NO_BASELINE, f"{plan.case.case_id}: {plan.why}",
                               runs_ips=measured)
        slower = measured[0] < plan.entry.median_ips * 0.9
        return self.result(plan.case, REGRESSION if slower else PASS,
                           f"{plan.case.case_id}: {measured[0]} img/s", runs_ips=measured)

    def baseline_update(self, result):
        entry = {"median_ips": result.runs_ips[0], "runs_ips": list(result.runs_ips),
                 "settings": {"device_type": "cpu"}}
        return Update(ENTRIES, entry, lambda old: f"{old and old['median_ips']} -> "
                                                    f"{entry['median_ips']}",
                      lambda why: "keep the number somewhere else")


@pytest.fixture
def context(mode_context):
    return mode_context


def rows(context: Context) -> dict:
    return context.results.load()["cases"]


def test_every_registered_mode_has_its_own_kind_and_fills_the_interface():
    assert sorted(mode.kind for mode in MODES) == sorted(KINDS)
    for mode in MODES:
        assert not getattr(mode, "__abstractmethods__", None), mode


def test_a_measured_case_is_saved_with_its_kind_and_recorded_through_the_store(context):
    recording = context(update_baselines=True)
    result = measure(Counting(recording), Case(1, 1, "fp32", 8))
    assert result.verdict == NO_BASELINE
    assert result.row.baseline_update == "None -> 10.0"
    row = rows(recording)["1n1g_fp32_b8"]
    assert (row["kind"], row["runs_ips"], row["baseline_update"]) == (THROUGHPUT, [10.0],
                                                                       "None -> 10.0")
    stored = json.loads(recording.baselines.path.read_text())["entries"]["1n1g_fp32_b8"]
    assert stored["median_ips"] == 10.0

    gating = context()
    slower = Counting(gating)
    slower.measured = 8.0
    assert measure(slower, Case(1, 1, "fp32", 8)).verdict == REGRESSION
    assert not gating.results.results_file.read_text().count("baseline_update")


def test_the_baseline_update_is_asked_for_once_a_case_and_the_follow_up_knows_it(context):
    asked, heard = [], []

    class FollowedUp(Counting):
        def baseline_update(self, result):
            asked.append(result.case_id)
            return super().baseline_update(result)

        def follow_up(self, plan, result, update):
            heard.append(update.entry["median_ips"])
            return result.amended(tolerance_reason="followed up"), update

    result = measure(FollowedUp(context(update_baselines=True)), Case(1, 1, "fp32", 8))
    assert asked == ["1n1g_fp32_b8"] and heard == [10.0]
    assert (result.row.tolerance_reason, result.row.baseline_update) == ("followed up",
                                                                         "None -> 10.0")


def test_a_mode_cannot_write_a_field_its_kinds_row_does_not_declare(context):
    """A mode's result is its kind's typed row (perf_tests/core/rows.py): a field the type does
    not declare fails where the mode writes it, named, not in a reader much later; a later
    step's amendment alike, and an A/B side's field."""
    mode = Counting(context())
    case = Case(1, 1, "fp32", 8)
    with pytest.raises(TypeError, match=r"1n1g_fp32_b8: the throughput row declares no "
                                        r"max_batch, speed_up: declare it in ThroughputRow"):
        mode.result(case, PASS, "line", speed_up=1.0, max_batch=8)
    result = mode.result(case, PASS, "line", runs_ips=[10.0], median_ips=10.0)
    assert result.row.median_ips == 10.0 and result.row.runs_ips == (10.0,)
    with pytest.raises(TypeError, match="1n1g_fp32_b8: the throughput row declares no followed"):
        result.amended(followed="yes")
    mode.kind = AB
    with pytest.raises(TypeError, match=r"the ab row declares no candidate\.ips"):
        mode.result(case, PASS, "line", candidate={"ips": [10.0]})


def test_the_skeleton_saves_skips_config_errors_and_a_held_device_lock(context, tmp_path):
    session = context()
    skipping = Counting(session)
    skipping.skip = "no such device here"
    skipped = measure(skipping, Case(1, 1, "fp32", 8))
    assert (skipped.verdict, skipped.message) == (
        SKIPPED, "1n1g_fp32_b8: skipped: no such device here")
    assert rows(session)["1n1g_fp32_b8"]["skip_reason"] == "no such device here"

    broken = Counting(session)
    broken.bad_config = True
    failed = measure(broken, Case(1, 2, "fp32", 8))
    assert (failed.verdict, failed.message) == (ERROR, "1n2g_fp32_b8: batch 8 does not fit "
                                                       "this test")

    (tmp_path / "device-lock").mkdir()   # a lock that cannot be taken: no runs, one line
    locked_out = measure(Counting(session), Case(2, 1, "fp32", 8))
    assert locked_out.verdict == ERROR
    assert locked_out.message.startswith(f"2n1g_fp32_b8: device lock {tmp_path / 'device-lock'} "
                                         "cannot be taken (it is not a regular file)")
    assert {row["kind"] for row in rows(session).values()} == {THROUGHPUT}
    assert set(rows(session)) == {"1n1g_fp32_b8", "1n2g_fp32_b8", "2n1g_fp32_b8"}


def test_a_baseline_that_cannot_be_written_fails_the_case_with_what_to_do(context, tmp_path):
    class LosingItsFile(Counting):
        def run(self, plan):
            self.context.baselines.path.mkdir()   # a folder where the file should be, now
            return super().run(plan)

    recording = context(update_baselines=True)
    result = measure(LosingItsFile(recording), Case(1, 1, "fp32", 8))
    assert result.verdict == ERROR
    assert result.message.startswith(f"1n1g_fp32_b8: baseline file {recording.baselines.path} "
                                     "is a directory")
    assert result.message.endswith("; keep the number somewhere else")
    assert rows(recording)["1n1g_fp32_b8"]["verdict"] == ERROR


@pytest.mark.parametrize("case_id, row, kind", [
    ("1n1g_fp32_b8", {"median_ips": 10.0}, THROUGHPUT),
    ("1n1g_fp32_b16_ttt", {"time_to_train_s": 40.0}, TIME_TO_TRAIN),
    ("1n1g_fp32_b8", {"candidate": {"median_ips": 9.0}, "reference": {}}, AB),
    ("1n1g_fp32_maxbatch", {"kind": "max-batch", "max_batch": 96}, MAX_BATCH),
    ("1n1g_fp32_b8", {"kind": "ab"}, AB),
])
def test_rows_of_older_results_files_are_told_by_their_old_marks(case_id, row, kind):
    assert row_kind(case_id, row) == kind


def test_a_perf_warning_reads_as_its_line_and_where_the_runs_are_not_as_a_source_line():
    import warnings

    from perf_tests.context.perf_warnings import PerfWarning, perf_warning_format
    formatted = perf_warning_format(warnings.formatwarning)
    assert formatted("1n1g_fp32_b8: 1.35 img/s; no baseline", PerfWarning, "/r/1n1g_fp32_b8",
                     0) == "PerfWarning: 1n1g_fp32_b8: 1.35 img/s; no baseline (runs in " \
                          "/r/1n1g_fp32_b8)\n"
    assert formatted("other", UserWarning, "x.py", 3) == "x.py:3: UserWarning: other\n"
    assert formatted.original is warnings.formatwarning
