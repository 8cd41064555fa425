"""tools/calibrate/command.py as a user runs it: bad options stop it in one line before anything is
measured, and its work folder lands where the user says (by default outside the repository)."""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from conftest import REPO_ROOT, TINY_CASE_ARGS, baseline_document, run_tool
from perf_tests.baselines.host_shift import MOST


def calibrate(*arguments, cwd, env=None, timeout=600) -> subprocess.CompletedProcess:
    return run_tool("calibrate", *arguments, cwd=cwd, env=env, timeout=timeout)


@pytest.mark.parametrize("arguments, expected", [
    (["--repeats", "0"], "argument --repeats: 0 must be at least 1"),
    (["--baseline-runs", "-1"], "argument --baseline-runs: -1 must be at least 1"),
    (["--scenarios", "unchanged,slower"], "argument --scenarios: 'unchanged,slower' names slower"),
    (["--scenarios", "periodic-hogs"], "argument --scenarios: 'periodic-hogs' names "
     "periodic-hogs; use a comma list of unchanged, taskset, contiguous, one-thread, "
     "periodic-hog"),
    (["--scenarios", ","], "argument --scenarios: ',' names no scenario"),
    (["--ab", "--scenarios", "unchanged"], "argument --scenarios: 'unchanged' names unchanged; "
     "use a comma list of identical, gomp-spin-700, gomp-spin-500, malloc-perturb, avx2, "
     "aten-default, no-primitive-cache, slow-10 (with --ab)"),
    (["-k", "no_such_case"], "-k 'no_such_case' selects no case of the suite"),
    (["--write-host-shift", "missing.json"], "argument --write-host-shift: missing.json is not "
     "a file; pass the baseline file the gates read"),
    (["--host-sessions", "0", "--write-host-shift", "b.json"], "argument --write-host-shift: "
     "the host's shift is measured by the gate's calibration with --host-sessions 1 or more"),
    (["--ab", "--history-sessions", "3"], "argument --history-sessions: A/B sessions judge no "
     "baseline, and learn nothing from earlier sessions; leave it out with --ab"),
    (["--", "--perf-runs", "0"],
     "pytest perf_tests does not start with these options: argument --perf-runs: 0 must be "
     "at least 1"),
])
def test_bad_options_stop_it_in_one_line_before_measuring(tmp_path, arguments, expected):
    done = calibrate(*arguments, cwd=tmp_path, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("rn50-perf calibrate: error: ")
    assert expected in done.stderr
    # No baseline recording started (how long the refusal took is this machine's business).
    assert done.stdout == ""
    assert list(tmp_path.iterdir()) == []  # and no work folder left behind


def test_a_work_dir_in_use_is_refused(tmp_path):
    used = tmp_path / "used"
    used.mkdir()
    (used / "baseline.json").write_text("{}")
    done = calibrate("--work-dir", used, cwd=tmp_path, timeout=60)
    assert done.returncode == 2
    assert done.stderr == (f"rn50-perf calibrate: error: argument --work-dir: {used} "
                           "exists and is not an empty folder; pass a new folder (see --help)\n")


@pytest.mark.slow
def test_a_calibration_writes_its_work_folder_outside_the_repository(tmp_path,
                                                                     shared_data_cache):
    """The whole tool on the tiniest case: a one-run baseline, one unchanged session that
    measures the host's shift (kept in the calibration's baseline and in the user's file), one
    unchanged gate."""
    env = dict(os.environ, TMPDIR=str(tmp_path), RN50_DATA_CACHE=str(shared_data_cache),
               RN50_PERF_DEVICE_LOCK=str(tmp_path / "device-lock"))
    env.pop("RN50_FAULT", None)
    users = tmp_path / "users.json"
    users.write_text(json.dumps(baseline_document({
        "1n1g_fp32_b2": {"median_ips": 9.0, "runs_ips": [9.0], "tolerance": "auto"},
        "1n2g_fp32_b2": {"median_ips": 17.0}})))
    repository_before = sorted(path.name for path in REPO_ROOT.iterdir())
    done = calibrate("--repeats", "1", "--scenarios", "unchanged", "--baseline-runs", "1",
                     "--host-sessions", "1", "--write-host-shift", users,
                     "-k", "1n1g_fp32", "--", *TINY_CASE_ARGS, "--perf-batches", "2",
                     "--perf-runs", "1", "--perf-set", "max-runs=1", cwd=REPO_ROOT, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"work folder: {tmp_path}/rn50-calibration-")
    work = tmp_path / lines[0].split(f"{tmp_path}/")[1]
    assert lines[1] == "recording the baseline of 1n1g_fp32_b2"
    assert lines[2].startswith("host shift 1/1: 1n1g_fp32_b2 ")
    assert lines[3].startswith("host shift of 1n1g_fp32_b2: ")
    assert lines[4] == f"host shifts kept in {users}"
    assert any(line.startswith("| unchanged | 1n1g_fp32_b2 | ") for line in lines)
    log = json.loads((work / "calibration.json").read_text())
    assert len(log["gates"]["unchanged"]) == 1
    (host_session,) = log["host_shift_sessions"]
    shift = log["host_shift"]["1n1g_fp32_b2"]
    recorded = log["baseline"]["entries"]["1n1g_fp32_b2"]
    medians = [recorded["median_ips"], host_session["cases"]["1n1g_fp32_b2"]["median_ips"]]
    # At most host_shift.MOST: a busy CI machine once ran the session 2.27 times as fast as the
    # one-run baseline (CI, 2026-12-06), and a shift beyond it is kept at it.
    assert shift["fraction"] == pytest.approx(min(MOST, max(medians) / min(medians) - 1),
                                              abs=1e-4)
    assert recorded["host_shift"] == shift and "lineage" not in recorded
    kept = json.loads(users.read_text())["entries"]
    assert kept["1n1g_fp32_b2"]["host_shift"] == shift and "host_shift" not in kept["1n2g_fp32_b2"]
    assert (work / "baseline.json").is_file() and (work / "unchanged-1" / "results.json").is_file()
    assert lines[-1] == f"calibration log: {work / 'calibration.json'}"
    assert sorted(path.name for path in REPO_ROOT.iterdir()) == repository_before


def test_the_ab_table_shows_what_a_paired_t_interval_would_have_said():
    """The A/B rows count, beside the verdicts, the sessions a paired t interval would have
    called a regression on the same pairs: the comparison the choice of interval rests on."""
    from tools.calibrate.tables import summarize, t_says_regression

    # One reference run hit by a burst on the host (measured, MALLOC_PERTURB_=165).
    wild = {"verdict": "regression", "ratio": 0.823, "runs_ips": [1.0] * 9,
            "reference": {"runs_ips": [61.6, 35.5, 60.3, 61.6, 54.2, 61.9, 57.1, 60.7, 60.2]},
            "candidate": {"runs_ips": [52.1, 50.4, 52.4, 51.4, 48.4, 48.0, 47.8, 48.8, 49.7]}}
    steady = {**wild, "reference": {"runs_ips": [60.0, 61.0, 59.0, 60.5, 60.0, 59.5]},
              "candidate": {"runs_ips": [50.0, 51.0, 49.5, 50.5, 50.0, 49.0]}, "ratio": 0.83}
    assert not t_says_regression(wild) and t_says_regression(steady)
    [row] = summarize("slower", [{"cases": {"1n1g_fp32_b8": wild}},
                                 {"cases": {"1n1g_fp32_b8": steady}}], None)
    assert (row["regression"], row["t_regression"], row["gate_runs"]) == (2, 1, 2)


def test_each_scenario_shows_what_its_sessions_could_have_detected_beside_what_they_did(
        capsys):
    """The median of the gate sessions' `min_detectable_slowdown` next to their regressions: a
    session that could detect nothing (null) counts as larger than any, and sessions written
    before the figure leave the cell '-'."""
    from tools.calibrate.tables import print_table, summarize

    def gate(verdict, figure):
        return {"cases": {"1n1g_fp32_b8": {"verdict": verdict, "median_ips": 80.0,
                                           "runs_ips": [80.0] * 3,
                                           "min_detectable_slowdown": figure}}}

    baseline = {"entries": {"1n1g_fp32_b8": {"median_ips": 100.0, "runs_ips": [100.0] * 10,
                                             "cv": 0.01, "tolerance": 0.15}}}
    slower = summarize("one-thread", [gate("regression", 0.21), gate("regression", 0.18),
                                      gate("pass", None)], baseline)
    blind = summarize("taskset", [gate("pass", None), gate("pass", None),
                                  gate("regression", 0.3)], baseline)
    old = summarize("unchanged", [{"cases": {"1n1g_fp32_b8": {"verdict": "pass",
                                                              "median_ips": 100.0}}}], baseline)
    assert (slower[0]["detects"], blind[0]["detects"]) == (0.21, None)
    assert "detects" not in old[0]
    print_table(slower + blind + old, baseline)
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("| scenario | case | slowdown | band | gate runs | regression | "
                               "detects |")
    assert lines[3].startswith("| one-thread | 1n1g_fp32_b8 | 20.0% | - | 3 | 2 | 21% | 0 | 0/9 | "
                               "0 | 1 |")
    assert lines[4].startswith("| taskset | 1n1g_fp32_b8 | 20.0% | - | 3 | 1 | >90% | 0 | 0/9 | 0 "
                               "| 2 |")
    assert lines[5].startswith("| unchanged | 1n1g_fp32_b8 | 0.0% | - | 1 | 0 | - | 0 | 0/0 | 0 | "
                               "1 |")
    assert lines[-1] == ("baseline 1n1g_fp32_b8: 100.00 img/s, runs [100.0, 100.0, 100.0, 100.0, "
                         "100.0, 100.0, 100.0, 100.0, 100.0, 100.0], cv 1.0%, stored tolerance "
                         "15%")


def test_a_gate_sessions_row_keeps_what_it_could_have_detected(tmp_path, monkeypatch):
    """pytest_session reads `min_detectable_slowdown` from the session's results.json, null
    included, and leaves it out where the row has none."""
    from tools.calibrate import command as tool

    results = tmp_path / "gate"
    results.mkdir()
    (results / "results.json").write_text(json.dumps({"cases": {
        "1n1g_fp32_b8": {"verdict": "pass", "median_ips": 90.0, "runs_ips": [90.0],
                         "min_detectable_slowdown": None},
        "1n1g_fp32_b4": {"verdict": "regression", "median_ips": 50.0, "runs_ips": [50.0],
                         "min_detectable_slowdown": 0.12},
        "2n1g_fp32_b8": {"verdict": "skipped", "runs_ips": []}}}))
    monkeypatch.setattr(tool.subprocess, "run", lambda *args, **kwargs: subprocess.
                        CompletedProcess(args, 0, "", ""))
    cases = tool.pytest_session([], [], results)["cases"]
    assert cases["1n1g_fp32_b8"]["min_detectable_slowdown"] is None
    assert cases["1n1g_fp32_b4"]["min_detectable_slowdown"] == 0.12
    assert "min_detectable_slowdown" not in cases["2n1g_fp32_b8"]


def test_the_periodic_hog_counts_the_sessions_that_named_the_host(capsys):
    """A host-unfit gate is counted in its own column, apart from the regressions that blamed
    the software for a busy host."""
    from tools.calibrate.command import SCENARIOS
    from tools.calibrate.tables import print_table, summarize
    prefix, options = SCENARIOS["periodic-hog"]
    assert prefix[1:] == ["-m", "tools", "host-load", "--loops", "2", "--on", "20", "--off", "20",
                          "--"] and options == []
    gates = [{"cases": {"1n1g_fp32_b8": {"verdict": verdict, "median_ips": ips,
                                         "runs_ips": [ips] * 3, "marked_runs": marked}}}
             for verdict, ips, marked in (
                 ("host-unfit", 9.0, {"1": ["other processes used 1.4 of 2 cores"],
                                      "2": ["other processes used 1.2 of 2 cores"],
                                      "3": ["other processes used 1.5 of 2 cores"]}),
                 ("regression", 12.0, {"2": ["other processes used 0.6 of 2 cores"]}),
                 ("pass", 15.8, {}),
                 ("host-unfit", 8.0, {"1": ["CPU quota throttled 38 times (3.7 s)"]}))]
    rows = summarize("periodic-hog", gates, None)
    assert (rows[0]["regression"], rows[0]["host-unfit"], rows[0]["pass"]) == (1, 2, 1)
    assert (rows[0]["marked_runs"], rows[0]["all_runs"]) == (5, 12)
    print_table(rows, None)
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("| scenario | case | slowdown | band | gate runs | regression | "
                               "detects | host-unfit | marked runs | inconclusive |")
    assert lines[3].startswith("| periodic-hog | 1n1g_fp32_b8 | - | - | 4 | 1 | - | 2 | 5/12 | 0 "
                               "| 1 |")


def test_slow_twice_the_band_takes_twice_the_band_the_first_unchanged_session_stated(capsys):
    """The slow-2x-band scenario's share: --slow-share, else twice the band of the first
    unchanged session (the median of its cases'), decided once; the table shows each scenario's
    median stated band."""
    import argparse

    from tools.calibrate.command import SLOW_TWICE_BAND, slow_share
    from tools.calibrate.tables import print_table, summarize

    def gate(verdict, tolerance, ips=100.0):
        return {"cases": {"1n1g_fp32_b8": {"verdict": verdict, "median_ips": ips,
                                           "runs_ips": [ips] * 3, "tolerance": tolerance}}}

    log = {"gates": {"unchanged": [gate("pass", 0.12), gate("pass", 0.5)]}}
    assert slow_share(argparse.Namespace(slow_share=None), log) == pytest.approx(0.24)
    log["gates"]["unchanged"].insert(0, gate("pass", 0.3))     # decided once: kept
    assert slow_share(argparse.Namespace(slow_share=None), log) == pytest.approx(0.24)
    assert slow_share(argparse.Namespace(slow_share=0.4), {}) == 0.4
    rows = summarize(SLOW_TWICE_BAND, [gate("regression", 0.1, 70.0),
                                       gate("regression", 0.14, 72.0)], None)
    print_table(rows, None)
    assert "| slow-2x-band | 1n1g_fp32_b8 | - | 12% | 2 | 2 |" in capsys.readouterr().out


def test_slow_twice_the_band_needs_an_unchanged_session_first(capsys):
    from tools.calibrate.command import main
    assert_usage = "takes twice the band the first unchanged session states"
    with pytest.raises(SystemExit):
        main(["--scenarios", "slow-2x-band,unchanged"])
    assert assert_usage in capsys.readouterr().err
