"""The band a throughput verdict judges with (perf_tests/judging/tolerance_band.py): its sources,
auto from the noise with its floor, the line that says where it came from, and what the rule catches
with it on the GPU hours' recorded runs (perf_tests/judging/protocol_replay.py,
docs/gpu-hours/run-sets.json)."""
import json
import math
import re
import statistics
from statistics import NormalDist

import pytest

from conftest import REPO_ROOT
from perf_tests.baselines.file import AUTO, BaselineEntry
from perf_tests.core.cases import FULL, SMOKE, Case
from perf_tests.judging.protocol_replay import recorded_session, replay_sessions
from perf_tests.judging.tolerance_band import Band, auto_band, tolerance_band
from perf_tests.judging.verdicts import PASS, REGRESSION, judge
from perf_tests.modes.throughput import Plan

CASE = Case.parse("1n1g_amp_b256")


def spread_runs(median: float, cv: float, count: int) -> list[float]:
    """`count` runs at the normal quantiles of a spread `cv` around `median`."""
    return [median * (1 + cv * NormalDist().inv_cdf((i + 0.5) / count)) for i in range(count)]


def plan(entry: BaselineEntry, given=None, profile=FULL) -> Plan:
    return Plan(CASE, config=None, entry=entry, no_entry_reason="", given_tolerance=given,
                profile=profile, reference=1.0, baseline_speedup=1.0, max_runs=15,
                confirm_runs=10)


def test_steady_runs_get_the_floor_and_the_line_says_where_it_came_from():
    baseline, runs = spread_runs(6116.0, 0.001, 10), spread_runs(6110.0, 0.001, 5)
    band = auto_band(baseline, runs, FULL.band_floor)
    assert band.tolerance == FULL.band_floor and band.auto
    assert band.text.startswith("tolerance 1% (auto: its floor; the baseline's 10 runs spread "
                                "0.1")


def test_noisy_runs_widen_the_band_to_three_standard_errors_of_the_difference():
    # Each side's spread 1.4826 x its median absolute deviation (5%) = 7.4%; the medians'
    # standard error 1.2533 x 7.4% x sqrt(1/5 + 1/3) = 6.8%, three of them 20.4%.
    band = auto_band([90.0, 95.0, 100.0, 105.0, 110.0], [95.0, 100.0, 105.0], SMOKE.band_floor)
    assert band.tolerance == pytest.approx(3 * 1.2533 * 1.4826 * 0.05 * math.sqrt(1 / 5 + 1 / 3))
    assert band.text == ("tolerance 20% (auto: the baseline's 5 runs spread 7.4%, these 3 runs "
                         "7.4%)")
    # The same baseline, a session on a host gone noisy: a wider band, and it says why.
    noisy = auto_band([90.0, 95.0, 100.0, 105.0, 110.0], [70.0, 100.0, 130.0], SMOKE.band_floor)
    assert noisy.tolerance > band.tolerance and "these 3 runs 44.5%" in noisy.reason


def test_one_outlying_run_does_not_widen_the_band():
    # A recording whose first run caught a busy machine: the plain cv is 24%.
    baseline = [15.322, 30.048, 29.383, 28.373, 28.954, 29.1, 28.8, 29.5, 28.6, 29.0]
    assert statistics.stdev(baseline) / statistics.fmean(baseline) > 0.15
    assert auto_band(baseline, [28.9, 29.2, 28.7], SMOKE.band_floor).tolerance == \
        SMOKE.band_floor


def test_a_host_that_shifts_between_speeds_widens_the_band_to_its_own_slow_runs():
    # The 2-core VM's baseline in issue 55's calibration (1n1g_fp32_b8, smoke): runs at two
    # speeds, 33-35 img/s and 39-43. Its robust spread alone gave a 8.6% band, and an unchanged
    # session at -18.1% was named a regression; the second slowest run is 18.4% below the median.
    baseline = [42.05, 33.52, 33.04, 34.57, 42.68, 41.89, 40.49, 42.56, 38.92, 41.62]
    band = auto_band(baseline, [33.4, 33.9, 33.7], SMOKE.band_floor)
    assert band.tolerance == pytest.approx(1 - 33.52 / statistics.median(baseline))
    assert band.text.startswith("tolerance 18% (auto: the baseline's own slow runs, 18.4% below "
                                "its median; the baseline's 10 runs spread")
    # A slowdown past the host's own slow runs is still outside the band.
    assert 1 - 27.0 / statistics.median(baseline) > band.tolerance


def test_a_host_whose_sessions_lie_apart_gets_a_band_as_wide_as_their_shift():
    # The 2-core VM's second calibration: a steady baseline at one speed level (33.0-34.5 img/s)
    # and sessions at 41 img/s with nothing changed. Its runs alone give the 5% floor; the host
    # shift rn50-perf calibrate measured sets the band, and the line says where it came from.
    baseline = [33.79, 33.92, 33.91, 33.03, 34.50, 33.03, 33.50, 33.86, 34.44, 34.09]
    session = [41.35, 41.42, 40.80]
    assert auto_band(baseline, session, SMOKE.band_floor).tolerance == SMOKE.band_floor
    shift = {"fraction": 0.2186, "sessions": 10, "measured_at": "2026-11-28T12:40:00Z"}
    band = auto_band(baseline, session, SMOKE.band_floor, shift)
    assert band.tolerance == 0.2186
    assert band.text.startswith("tolerance 22% (auto: this host's sessions, up to 21.9% apart "
                                "with nothing changed (10 sessions, rn50-perf calibrate); the "
                                "baseline's 10 runs spread")
    # A shift below what the runs give changes nothing: the floor's line as before.
    assert auto_band(baseline, session, SMOKE.band_floor,
                     {"fraction": 0.01, "sessions": 10}) == auto_band(baseline, session,
                                                                     SMOKE.band_floor)


def test_the_first_source_that_applies_decides():
    runs, baseline = spread_runs(100.0, 0.002, 5), spread_runs(100.0, 0.002, 10)
    floor = FULL.band_floor
    assert tolerance_band(0.03, 0.05, baseline, runs, 0.05, floor) == Band(0.03)  # given wins
    assert tolerance_band(None, 0.05, baseline, runs, 0.05, floor) == Band(0.05)  # stored number
    assert tolerance_band(None, AUTO, baseline, runs, 0.05, floor).auto           # stored auto
    assert tolerance_band(AUTO, 0.05, baseline, runs, 0.05, floor).auto           # auto given
    assert tolerance_band(None, None, baseline, runs, 0.05, floor) == Band(0.05)  # the profile's
    few = tolerance_band(None, AUTO, baseline[:2], runs, 0.05, floor)
    assert few.tolerance == 0.05 and not few.auto
    assert few.text == ("tolerance 5% (the profile's: an auto band needs the baseline's spread, "
                        "and it records 2 of the 3 runs that show one)")


def test_half_a_percent_of_spread_fails_a_three_percent_slowdown_under_auto_only():
    """The issue's case: runs that spread 0.5%, 3% slower than the baseline's: a regression on
    the first 5 runs under auto, a pass under the fixed 5% (the band it replaces)."""
    entry = BaselineEntry(CASE.case_id, 6116.0, spread_runs(6116.0, 0.005, 10), tolerance=AUTO)
    slower = spread_runs(6116.0 * 0.97, 0.005, 5)
    judged = plan(entry).judgement(slower)
    assert judged.verdict == REGRESSION
    assert re.search(r"is 3\.0% below the baseline 6116\.0 img/s \(tolerance 1\.\d% \(auto: "
                     r"the baseline's 10 runs spread 0\.50%, these 5 runs 0\.39%\), 5 runs ",
                     judged.message), judged.message
    # Under 5% the median is in the band's lower half: more runs first, then (no more to come)
    # a pass.
    assert plan(entry, given=0.05).judgement(slower, final=True).verdict == PASS


def test_an_entry_from_before_auto_bands_is_read_as_before():
    """An entry with the profile's 5% stored and no lineage: the same verdict and line as before
    this change, though its runs are steady enough for a narrower band."""
    entry = BaselineEntry(CASE.case_id, 6116.0, spread_runs(6116.0, 0.005, 10), tolerance=0.05)
    slower = [6116.0 * 0.97] * 5
    judged = plan(entry).judgement(slower, final=True)
    assert judged == judge(CASE.case_id, slower, entry, 0.05)
    assert judged.verdict == PASS
    assert judged.message == ("1n1g_amp_b256: 5932.5 img/s, -3.0% against the baseline 6116.0 "
                              "img/s (tolerance 5%)")


def test_a_speedup_band_is_wider_by_the_reference_it_is_taken_over():
    band = Band(0.01, "auto: its floor; ...", auto=True)
    assert band.widened(math.sqrt(2), 0.01).tolerance == pytest.approx(0.01414, rel=1e-3)
    assert Band(0.05).widened(math.sqrt(2), 0.01) == Band(0.05)   # a number stays


# -- what the rule catches on the GPU hours' runs -----------------------------------------------

def run_set_pools() -> dict[tuple[str, str, str], list[float]]:
    sets = json.loads((REPO_ROOT / "docs/gpu-hours/run-sets.json").read_text())["sessions"]
    pools: dict[tuple[str, str, str], list[float]] = {}
    for session in sets:
        key = (session["card"], session["case"], session["variant"])
        pools.setdefault(key, []).extend(session["runs_ips"])
    return pools


@pytest.mark.parametrize("key", sorted(run_set_pools()), ids="-".join)
def test_replayed_gpu_runs_raise_no_false_alarm_and_catch_two_percent_in_five_runs(key):
    pool = run_set_pools()[key]
    for runs in (3, 5, 10):
        unchanged, _ = replay_sessions(pool, runs, 0.0, 100)
        assert unchanged["regression"] == 0, (runs, unchanged)
    slower, sessions = replay_sessions(pool, 5, 0.02, 100)
    assert slower["regression"] == 100 and max(session.runs for session in sessions) == 5


def test_the_recorded_h200_sessions_replayed_against_its_baseline():
    """The H200's 2026-11-28 sessions, as recorded, against its 2026-11-25 baseline of 3 runs:
    each passes as it ran, and is a regression slowed by 2%."""
    sets = json.loads((REPO_ROOT / "docs/gpu-hours/run-sets.json").read_text())["sessions"]
    h200 = [s for s in sets if s["card"] == "nvidia-h200" and s["case"] == "1n1g_amp_b256"]
    baseline = h200[0]["runs_ips"]
    for session in h200[1:]:
        assert recorded_session(baseline, session["runs_ips"], 0.0).verdict == PASS
        assert recorded_session(baseline, session["runs_ips"], 0.02).verdict == REGRESSION


def test_the_false_alarm_bound_holds_through_every_look_of_the_protocol():
    """Runs and baseline of one distribution, as noisy as the 2-core VM's smoke case (5% and
    15%), judged through all the looks the protocol takes (more runs while unclear, up to 3x):
    under the 1% the significance test bounds each verdict by."""
    for cv in (0.05, 0.15):
        pool = spread_runs(100.0, cv, 200)
        counts, _ = replay_sessions(pool, 3, 0.0, 2000, profile=SMOKE)
        assert counts["regression"] <= 20, (cv, counts)
