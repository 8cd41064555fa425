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
from perf_tests.judging.tolerance_band import Band, auto_band, resolution, tolerance_band
from perf_tests.judging.verdicts import PASS, REGRESSION, judge
from perf_tests.modes.throughput import Plan

CASE = Case.parse("1n1g_amp_b256")


def spread_runs(median: float, cv: float, count: int) -> list[float]:
    """`count` runs at the normal quantiles of a spread `cv` around `median`."""
    return [median * (1 + cv * NormalDist().inv_cdf((i + 0.5) / count)) for i in range(count)]


def plan(entry: BaselineEntry, given=None, profile=FULL, history=None) -> Plan:
    return Plan(CASE, config=None, entry=entry, no_entry_reason="", given_tolerance=given,
                profile=profile, reference=1.0, baseline_speedup=1.0, max_runs=15,
                confirm_runs=10, history=history)


def test_steady_runs_get_the_floor_and_the_line_says_where_it_came_from():
    baseline, runs = spread_runs(6116.0, 0.001, 10), spread_runs(6110.0, 0.001, 5)
    band = auto_band(baseline, runs, FULL.band_floor)
    assert band.tolerance == FULL.band_floor and band.auto
    assert band.text.startswith("tolerance 1% (auto: its floor; the baseline's 10 runs scatter "
                                "0.1")


def test_noisy_runs_widen_the_band_to_three_standard_errors_of_the_difference():
    # Each side's spread 1.4826 x its median absolute deviation (5%) = 7.4%; the medians'
    # standard error 1.2533 x 7.4% x sqrt(1/5 + 1/3) = 6.8%, three of them 20.4%.
    band = auto_band([90.0, 95.0, 100.0, 105.0, 110.0], [95.0, 100.0, 105.0], SMOKE.band_floor)
    assert band.tolerance == pytest.approx(3 * 1.2533 * 1.4826 * 0.05 * math.sqrt(1 / 5 + 1 / 3))
    assert band.text == ("tolerance 20% (auto: 3 standard errors of the medians' difference, "
                         "20.4%; the baseline's 5 runs scatter 7.4%, these 3 runs 7.4%)")
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
                                "its median; the baseline's 10 runs scatter")
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
                                "baseline's 10 runs scatter")
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
    assert few.text == ("tolerance 5% (the profile's: an auto band needs the baseline's scatter, "
                        "and it records 2 of the 3 runs that show one)")


def test_half_a_percent_of_spread_fails_a_three_percent_slowdown_under_auto_only():
    """The issue's case: runs that spread 0.5%, 3% slower than the baseline's: a regression on
    the first 5 runs under auto, a pass under the fixed 5% (the band it replaces)."""
    entry = BaselineEntry(CASE.case_id, 6116.0, spread_runs(6116.0, 0.005, 10), tolerance=AUTO)
    slower = spread_runs(6116.0 * 0.97, 0.005, 5)
    judged = plan(entry).judgement(slower)
    assert judged.verdict == REGRESSION
    assert re.search(r"is 3\.0% below the baseline 6116\.0 img/s \(tolerance 1\.\d% \(auto: "
                     r"3 standard errors of the medians' difference, 1\.\d%; "
                     r"the baseline's 10 runs scatter 0\.50%, these 5 runs 0\.39%\), 5 runs ",
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


# -- what the band learns from the host's earlier sessions ---------------------------------------

# The 2-core VM's smoke case: a baseline at the fast level (40.8 img/s, runs 39.7-42.1), and ten
# earlier unchanged sessions of three runs, three of them at the slow level (33-34 img/s, 18%
# below).
VM_BASELINE = [41.2, 40.1, 40.8, 42.1, 39.7, 41.5, 40.3, 40.9, 41.0, 40.6]
VM_HISTORY = [[median * 0.99, median, median * 1.01] for median in
              (41.1, 40.2, 33.6, 41.8, 40.7, 33.9, 40.4, 41.3, 33.2, 40.9)]


def test_the_band_learns_the_hosts_levels_from_its_earlier_sessions():
    slow_level = [33.5, 33.8, 33.1]
    alone = auto_band(VM_BASELINE, slow_level, SMOKE.band_floor)
    assert alone.tolerance < 0.1   # the runs alone: an unchanged session 18% slow fails
    band = auto_band(VM_BASELINE, slow_level, SMOKE.band_floor, history=VM_HISTORY)
    shortfall = 1 - 33.6 / statistics.median(VM_BASELINE)   # the second slowest session
    resolved = resolution(VM_BASELINE, slow_level)[0]
    assert band.tolerance == pytest.approx(shortfall + resolved)
    assert band.tolerance > 1 - statistics.median(slow_level) / statistics.median(VM_BASELINE)
    assert band.text.startswith(f"tolerance {band.tolerance:.0%} (auto: 10 earlier sessions on "
                                "this stack, the 2nd slowest 17.7% below the baseline, plus 3 "
                                "standard errors of the medians' difference, ")
    # Twice that band is still caught: what the calibration's slowed sessions are.
    judged = plan(BaselineEntry(CASE.case_id, statistics.median(VM_BASELINE), VM_BASELINE,
                                tolerance=AUTO), profile=SMOKE, history=VM_HISTORY)
    slowed = [value * (1 - 2 * band.tolerance) for value in VM_BASELINE[:3]]
    assert judged.judgement(slowed, final=True).verdict == REGRESSION
    assert judged.judgement(slow_level, final=True).verdict == PASS


def test_one_slowed_session_in_the_history_does_not_widen_the_band():
    """A session slowed by something the environment does not record (10%) is one session:
    the second slowest sets the band, and the next session slowed as much is caught."""
    steady = [spread_runs(6116.0 * (1 + 0.001 * offset), 0.002, 5)
              for offset in (-1, 0, 1, 0, -1, 1, 0, 0, 1)]
    slowed = spread_runs(6116.0 * 0.9, 0.002, 5)
    baseline, runs = spread_runs(6116.0, 0.002, 10), spread_runs(6116.0 * 0.9, 0.002, 5)
    band = auto_band(baseline, runs, FULL.band_floor, history=steady)
    slowed_once = auto_band(baseline, runs, FULL.band_floor, history=[*steady, slowed])
    assert slowed_once.tolerance == pytest.approx(band.tolerance, abs=0.001)
    assert slowed_once.tolerance < 0.01
    assert plan(BaselineEntry(CASE.case_id, 6116.0, baseline, tolerance=AUTO),
                history=[*steady, slowed]).judgement(runs).verdict == REGRESSION


def test_a_steady_history_brings_the_floor_below_one_percent():
    """The H200's four recorded sessions of amp b256 (2026-11-25 and 28): medians 6,115 to
    6,128 img/s, each session's slowest run at most 0.2% below its median. The floor comes down
    to half a percent, and a 1% slowdown in 5 runs is a regression that the 1% floor let
    pass."""
    sets = json.loads((REPO_ROOT / "docs/gpu-hours/run-sets.json").read_text())["sessions"]
    history = [s["runs_ips"] for s in sets
               if s["card"] == "nvidia-h200" and s["case"] == "1n1g_amp_b256"]
    baseline = spread_runs(6116.0, 0.001, 10)
    slower = spread_runs(6116.0 * 0.99, 0.001, 5)
    band = auto_band(baseline, slower, FULL.band_floor, history=history)
    assert band.tolerance == 0.005
    assert re.match(r"tolerance 0\.5% \(auto: its floor, twice how far the host moved \(0\.1\d%: "
                    r"4 earlier sessions on this stack, the baseline's runs\); the baseline's 10 "
                    r"runs scatter ", band.text), band.text
    entry = BaselineEntry(CASE.case_id, 6116.0, baseline, tolerance=AUTO)
    assert plan(entry, history=history).judgement(slower).verdict == REGRESSION
    assert plan(entry).judgement(slower, final=True).verdict == PASS
    # A host whose runs went 1% below their median in every session keeps the 1% floor.
    rough = [[*runs, statistics.median(runs) * 0.99] for runs in history]
    assert auto_band(baseline, slower, FULL.band_floor, history=rough).tolerance == 0.01


def test_too_few_earlier_sessions_leave_the_rule_as_it_was_and_say_so():
    baseline, runs = spread_runs(6116.0, 0.001, 10), spread_runs(6110.0, 0.001, 5)
    without = auto_band(baseline, runs, FULL.band_floor)
    few = auto_band(baseline, runs, FULL.band_floor, history=[[6000.0], [6100.0], [6116.0]])
    assert few.tolerance == without.tolerance
    assert few.reason == without.reason + ("; 3 earlier sessions on this stack, 4 needed to "
                                           "learn the host's movement")


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
    """With and without 10 earlier sessions to learn from; with them, on the H200's steady
    runs, 1% in 10 runs too."""
    pool = run_set_pools()[key]
    for history in (0, 10):
        for runs in (3, 5, 10):
            unchanged, _ = replay_sessions(pool, runs, 0.0, 100, history=history)
            assert unchanged["regression"] == 0, (runs, history, unchanged)
        slower, sessions = replay_sessions(pool, 5, 0.02, 100, history=history)
        assert slower["regression"] == 100
        # On the 5th run; with a history, the band adds how far below the baseline its second
        # slowest session went, and on the H100's three runs a few sessions take more runs.
        assert statistics.mean(session.runs for session in sessions) <= (5 if not history
                                                                          else 5.2)
    if key[0] == "nvidia-h200":
        one_percent, _ = replay_sessions(pool, 10, 0.01, 100, history=10)
        assert one_percent["regression"] >= 95, one_percent


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
        for history in (0, 10):
            counts, _ = replay_sessions(pool, 3, 0.0, 2000, profile=SMOKE, history=history)
            assert counts["regression"] <= 20, (cv, history, counts)
