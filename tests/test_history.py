"""tools/history/command.py: a case's sessions in order, its step changes (ruptures' PELT) named
with what changed, history.md and history.png. The sessions are the stored results.json of a real
smoke session with their runs scaled, as a toolchain upgrade or a settings change would move them.
"""
import json
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import run_tool
from tools.history.series import Point, Session

STORED_RESULTS = Path(__file__).parent / "data" / "smoke-results.json"
RUNS = [10.0, 10.4, 9.7]  # a 3% spread: a level shift of 20% stands out, one of 2% does not


def write_session(folder: Path, started_at: str, scale: float, torch: str = "2.12.0",
                  threads: int = 1) -> Path:
    document = json.loads(STORED_RESULTS.read_text())
    document["started_at"] = started_at
    document["environment"]["torch"] = torch
    for row in document["cases"].values():
        row["runs_ips"] = [value * scale for value in RUNS]
        row["median_ips"] = 10.0 * scale
        row["settings"]["threads"] = threads
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps(document))
    return folder


def history(*args) -> subprocess.CompletedProcess:
    return run_tool("history", *args)


@pytest.fixture
def upgraded(tmp_path) -> Path:
    """Six sessions in a folder: 20% slower from the fourth on, after a torch upgrade (three
    sessions: a confirmed step)."""
    sessions = tmp_path / "perf_results"
    for day, (scale, torch) in enumerate([(1.0, "2.12.0"), (1.02, "2.12.0"), (0.98, "2.12.0"),
                                          (0.80, "2.13.0"), (0.81, "2.13.0"),
                                          (0.80, "2.13.0")], start=21):
        # Folder names sort apart from the start times: the tool orders by started_at.
        write_session(sessions / f"session-{30 - day}", f"2026-11-{day}T10:02:00Z", scale, torch)
    return sessions


def test_a_step_down_is_found_and_named_with_what_changed(upgraded, tmp_path):
    done = history(upgraded, "--output-dir", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    expected = ["1n1g_fp32_b2: step down of 20.0% at session 2026-11-24T10:02 "
                "(torch 2.12.0 -> 2.13.0)",
                "2n1g_fp32_b2: step down of 20.0% at session 2026-11-24T10:02 "
                "(torch 2.12.0 -> 2.13.0)"]
    assert lines[:2] == expected
    markdown = (tmp_path / "out" / "history.md").read_text()
    assert f"- {expected[0]}" in markdown
    # One table per case, the sessions in time order.
    table = markdown.split("## 1n1g_fp32_b2")[1].split("##")[0]
    assert [line.split("|")[1].strip() for line in table.splitlines() if "| 2026" in line] == \
        [f"2026-11-{day}T10:02" for day in range(21, 27)]
    assert "| 2026-11-24T10:02 | host (no image) | 3 | 8.00 |" in table
    png = (tmp_path / "out" / "history.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 20_000


def test_the_baseline_lineage_is_shown_beside_the_history(upgraded, tmp_path):
    """--baseline-file: the entries refreshes replaced, oldest first, and where they led."""
    baseline = tmp_path / "b.json"
    baseline.write_text(json.dumps({"schema_version": 1, "entries": {"1n1g_fp32_b2": {
        "median_ips": 8.1, "recorded_at": "2026-11-25T10:00:00Z", "lineage": [
            {"median_ips": 10.0, "recorded_at": "2026-11-21T10:00:00Z",
             "changed": "torch 2.12.0 -> 2.13.0"}]}}}))
    done = history(upgraded, "--output-dir", tmp_path / "out", "--baseline-file", baseline)
    assert done.returncode == 0, done.stderr
    line = ("lineage of 1n1g_fp32_b2: 10.0 (2026-11-21) -> 8.1 (2026-11-25) img/s, -19.0% "
            "across 1 refresh: torch 2.12.0 -> 2.13.0")
    assert line in done.stdout.splitlines()
    assert f"- {line.removeprefix('lineage of ')}" in (tmp_path / "out" / "history.md").read_text()
    missing = history(upgraded, "--baseline-file", tmp_path / "none.json")
    assert missing.returncode == 2 and "none.json does not exist" in missing.stderr


def test_a_settings_change_is_named_at_a_step_up_not_yet_confirmed(tmp_path):
    first = write_session(tmp_path / "a", "2026-11-21T09:00:00Z", 1.0, threads=1)
    second = write_session(tmp_path / "b", "2026-11-22T09:00:00Z", 1.01, threads=1)
    third = write_session(tmp_path / "c", "2026-11-23T09:00:00Z", 1.4, threads=2)
    done = history(first / "results.json", second, third, "--output-dir", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert ("1n1g_fp32_b2: step up of 39.3% at session 2026-11-23T09:00 (threads 1 -> 2), "
            "unconfirmed: 1 of the 3 sessions that confirm a step") in done.stdout.splitlines()


def test_noise_alone_is_no_step(tmp_path):
    folders = [write_session(tmp_path / f"s{day}", f"2026-11-{day}T08:00:00Z", scale)
               for day, scale in zip(range(21, 26), (1.0, 1.02, 0.99, 1.01, 0.98))]
    done = history(*folders, "--output-dir", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "no step change in 5 sessions"
    assert "## Step changes\n\nNone found." in (tmp_path / "out" / "history.md").read_text()


@pytest.mark.parametrize("make, words", [
    (lambda tmp: tmp / "missing.json", "input {tmp}/missing.json does not exist"),
    (lambda tmp: tmp, "input {tmp} holds no results.json, nor do its folders"),
    (lambda tmp: (tmp / "other.json").write_text('{"entries": {}}') and tmp / "other.json",
     "results file {tmp}/other.json has no 'cases' object; pass a results.json the suite "
     "wrote"),
])
def test_a_bad_input_is_one_line(tmp_path, make, words):
    target = tmp_path / "in"
    target.mkdir()
    done = history(make(target), "--output-dir", tmp_path / "out")
    assert done.returncode == 2
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith(f"rn50-perf history: error: {words.format(tmp=target)}")


def test_report_history_is_the_same_history(upgraded, tmp_path):
    """`rn50-perf report --history` (the name the issue asked for) writes what history.py does."""
    done = run_tool("report", "--history", upgraded, "--output-dir", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == ("1n1g_fp32_b2: step down of 20.0% at session "
                                           "2026-11-24T10:02 (torch 2.12.0 -> 2.13.0)")
    assert history(upgraded, "--output-dir", tmp_path / "direct").returncode == 0
    assert (tmp_path / "out" / "history.md").read_text() == \
        (tmp_path / "direct" / "history.md").read_text()
    mixed = run_tool("report", "--history", upgraded, "--label", "x")
    assert mixed.returncode == 2 and mixed.stderr == (
        "rn50-perf report: error: --history takes results and --output-dir only, not "
        "--label; drop it\n")


def test_ab_sessions_are_left_out_of_the_history(tmp_path):
    """An A/B session's rows are a candidate stack's runs, paired with this stack's: not a point
    of this stack's history, nor of its step search. The output says what was left out."""
    sessions = tmp_path / "perf_results"
    for day, scale in zip(range(21, 25), (1.0, 1.02, 0.99, 1.01)):
        write_session(sessions / f"s{day}", f"2026-11-{day}T08:00:00Z", scale)
    ab = write_session(sessions / "ab", "2026-11-22T12:00:00Z", 0.5)
    document = json.loads((ab / "results.json").read_text())
    document["candidate"] = "env OMP_WAIT_POLICY=PASSIVE"
    first, second = document["cases"].values()
    first["kind"] = "ab"
    second.pop("kind", None)  # a file written before `kind`: its `candidate` says A/B
    second["candidate"] = {"runs_ips": second["runs_ips"], "median_ips": 5.0}
    (ab / "results.json").write_text(json.dumps(document))
    done = run_tool("report", "--history", sessions, "--output-dir", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[:2] == [
        "no step change in 4 sessions",
        "left out of the history: 2 A/B cases in 1 session (2026-11-22T12:00), a candidate "
        "stack's runs paired with this stack's (--perf-candidate-*), not points of one "
        "stack's history"]
    markdown = (tmp_path / "out" / "history.md").read_text()
    assert "2026-11-22T12:00" in markdown.split("## 1n1g_fp32_b2")[0]  # the note, not a row
    assert "| 2026-11-22T12:00" not in markdown
    done = history(ab, "--output-dir", tmp_path / "out")
    assert done.returncode == 2 and done.stderr == (
        f"rn50-perf history: error: no case of {ab} has a history: left out of the "
        "history: 2 A/B cases in 1 session (2026-11-22T12:00), a candidate stack's runs "
        "paired with this stack's (--perf-candidate-*), not points of one stack's history; "
        "pass sessions measured without --perf-candidate-*\n")


def host_unfit(folder: Path, started_at: str, image: str | None = None) -> Path:
    """A session on a busy host: every run marked, a tenth of the speed, judged host-unfit."""
    write_session(folder, started_at, 0.1)
    document = json.loads((folder / "results.json").read_text())
    if image:
        document["environment"]["image"] = image
    for row in document["cases"].values():
        row["verdict"] = "host-unfit"
        row["marked_runs"] = {str(number): ["other processes used 1.8 of 2 cores"]
                              for number in (1, 2, 3)}
    (folder / "results.json").write_text(json.dumps(document))
    return folder


def test_sessions_the_host_marked_make_no_step_and_are_named(tmp_path):
    """Issue 60: two sessions on a busy host read `step down of 89.5% at session ... (image
    .../a -> .../b, ...)`, blaming the image for the host's tenfold drop."""
    sessions = tmp_path / "perf_results"
    for day, scale in zip(range(21, 24), (1.0, 1.02, 0.99)):
        write_session(sessions / f"s{day}", f"2026-11-{day}T08:00:00Z", scale)
    host_unfit(sessions / "s24", "2026-11-24T08:00:00Z", image="/images/b [bwrap: content x]")
    host_unfit(sessions / "s25", "2026-11-25T08:00:00Z", image="/images/b [bwrap: content x]")
    done = history(sessions, "--output-dir", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    marked = ("runs the host marked, left out of the step search: 2026-11-24T08:00 runs 1-3 of "
              "3 (host-unfit); 2026-11-25T08:00 runs 1-3 of 3 (host-unfit)")
    assert done.stdout.splitlines()[:3] == ["no step change in 5 sessions",
                                            f"1n1g_fp32_b2: {marked}", f"2n1g_fp32_b2: {marked}"]
    table = (tmp_path / "out" / "history.md").read_text().split("## 1n1g_fp32_b2")[1]
    row = next(line for line in table.splitlines() if line.startswith("| 2026-11-24T08:00"))
    assert row.startswith("| 2026-11-24T08:00 | image b [bwrap: content x] | 3 | 1.00 |")
    assert row.endswith("| host-unfit | runs 1-3 of 3 (host-unfit) |")


def test_the_site_names_a_step_by_the_sessions_the_search_took(tmp_path):
    """A session the host marked in every run has a median but is not searched: the site
    counted it among the searched sessions and named the step one session early."""
    from tools.history.series import case_histories, sessions_in
    from tools.history.site.pages import SiteBuilder
    from tools.history.site.sources import read_sources
    sessions = tmp_path / "perf_results"
    for day, scale in zip(range(21, 24), (1.0, 1.02, 0.99)):
        write_session(sessions / f"s{day}", f"2026-11-{day}T08:00:00Z", scale)
    host_unfit(sessions / "s24", "2026-11-24T08:00:00Z")
    for day, scale in zip(range(25, 28), (0.8, 0.81, 0.79)):
        write_session(sessions / f"s{day}", f"2026-11-{day}T08:00:00Z", scale, torch="2.13.0")
    builder = SiteBuilder(read_sources([sessions]))
    points = case_histories(sessions_in(sessions))["1n1g_fp32_b2"]
    [step] = builder.steps("1n1g_fp32_b2", points)
    names = [published.name for published in builder.sources.sessions]
    assert (names[step["before"]], names[step["session"]]) == ("s23", "s25")


def test_the_picture_has_a_series_per_stack_and_every_verdict_in_its_legend(tmp_path):
    """Issue 60: history.png drew host, docker and two images as one series, labelled only by
    start time, with no legend entry for host-unfit or error."""
    from tools.history.command import legend_handles
    from tools.history.series import case_histories, sessions_in
    sessions = tmp_path / "perf_results"
    write_session(sessions / "s1", "2026-11-21T08:00:00Z", 1.0)
    host_unfit(sessions / "s2", "2026-11-22T08:00:00Z", image="/images/a [bwrap: content 1]")
    errored = write_session(sessions / "s3", "2026-11-23T08:00:00Z", 1.0)
    document = json.loads((errored / "results.json").read_text())
    document["environment"]["image"] = "rn50:b [docker: sha256:2]"
    for row in document["cases"].values():
        row.update(runs_ips=[], median_ips=None, verdict="error")
    (errored / "results.json").write_text(json.dumps(document))
    histories = case_histories(sessions_in(sessions))
    points = [point for points in histories.values() for point in points]
    styles = {point.stack: ("o", "-") for point in points}
    labels = [handle.get_label() for handle in legend_handles(points, styles)]
    assert labels[:7] == ["verdict: pass", "verdict: host-unfit", "verdict: error",
                          "verdict: no-baseline",
                          "host (no image)", "image a [bwrap: content 1]",
                          "image rn50:b [docker: sha256:2]"]
    assert "a run the host marked (left out of the steps)" in labels
    assert "median of runs the host all marked" in labels
    assert labels[-1] == "step change"
    unconfirmed = legend_handles(points, styles, unconfirmed=True)
    assert unconfirmed[-1].get_label() == "step change, unconfirmed"
    done = history(sessions, "--output-dir", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / "history.png").read_bytes().startswith(b"\x89PNG")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.5, 1.5), min_size=2, max_size=60), st.floats(0.001, 0.05))
def test_the_step_search_is_pelt_on_the_l2_cost(medians, noise):
    """step_indices searches with ruptures' compiled kernel PELT (a linear kernel: the l2
    cost); it finds the breaks its Python PELT on the l2 cost finds, the rule the module's
    docstring states."""
    import math
    import statistics

    import numpy as np
    import ruptures

    from tools.history.steps import step_indices

    signal = np.array(medians) / statistics.median(medians)
    penalty = 2 * max(noise, 0.005) ** 2 * math.log(len(medians))
    pelt = ruptures.Pelt(model="l2", min_size=1, jump=1).fit(signal).predict(pen=penalty)
    assert step_indices(medians, noise) == pelt[:-1]


# -- steps that hold: pure functions on points in memory -------------------------------------

LEVEL = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0, 1.01]  # eight sessions at one level


def points_of(scales: list[float], torch_from: int = 8) -> list[Point]:
    """One case's points in memory, a session a day: its runs RUNS times the day's scale, on
    torch 2.13.0 from session `torch_from` on."""
    return [Point(Session(Path(f"s{day}/results.json"), f"2026-11-{day:02d}T10:01",
                          {"environment": {"torch": "2.13.0" if day > torch_from else "2.12.0"}}),
                  {"runs_ips": [value * scale for value in RUNS], "settings": {}})
            for day, scale in enumerate(scales, 1)]


def steps_of(scales: list[float]) -> list:
    from tools.history.steps import find_steps
    return find_steps("1n1g_fp32_b8", points_of(scales))


def test_a_step_on_the_last_session_is_unconfirmed_and_gone_when_the_level_returns():
    """The user's report: `step up of 7.8%` on the last session, blamed on torch; two sessions
    later, back at the old level, the step was gone. It is shown as unconfirmed until three
    sessions hold it, and nothing is claimed there once they do not."""
    [step] = steps_of(LEVEL + [1.078])
    assert step.line == ("1n1g_fp32_b8: step up of 7.8% at session 2026-11-09T10:01 (torch "
                         "2.12.0 -> 2.13.0), unconfirmed: 1 of the 3 sessions that confirm a "
                         "step")
    assert steps_of(LEVEL + [1.078, 1.0, 0.99]) == []


def test_a_confirmed_step_stays_where_it_was_as_sessions_are_added():
    """A 20% step: unconfirmed with one and two sessions after it, confirmed with three, and at
    the same session, as it was, while five more sessions of the new level come."""
    from tools.history.steps import CONFIRMED, UNCONFIRMED
    scales = LEVEL + [0.8, 0.81, 0.79] + [0.81, 0.79, 0.8, 0.82, 0.78]
    seen = [[(step.index, step.state, step.sessions) for step in steps_of(scales[:length])]
            for length in range(9, len(scales) + 1)]
    assert seen[:2] == [[(8, UNCONFIRMED, 1)], [(8, UNCONFIRMED, 2)]]
    assert seen[2:] == [[(8, CONFIRMED, length - 8)] for length in range(11, len(scales) + 1)]
    assert steps_of(scales)[0].line == ("1n1g_fp32_b8: step down of 20.0% at session "
                                        "2026-11-09T10:01 (torch 2.12.0 -> 2.13.0)")


def test_a_confirmed_step_whose_level_returns_is_withdrawn_with_why():
    """Three sessions 6% slower confirm a step; when three sessions are back at the old level,
    the level since is no change: the step stays listed, withdrawn, with that level."""
    from tools.history.steps import CONFIRMED
    dip = LEVEL + [0.94, 0.945, 0.935]
    assert [step.state for step in steps_of(dip)] == [CONFIRMED]
    [step] = steps_of(dip + LEVEL[:5])
    assert step.line == (
        "1n1g_fp32_b8: step down of 6.0% at session 2026-11-09T10:01 (torch 2.12.0 -> 2.13.0), "
        "confirmed at session 2026-11-11T10:01, withdrawn at session 2026-11-14T10:01: the 8 "
        "sessions from it on are 0.5% below the level before it")


@pytest.mark.parametrize("outlier", [0.6, 1.5])
def test_one_outlying_session_makes_no_confirmed_step(outlier):
    """A session far off the level (a busy host its runs did not catch) in the middle of a
    history is no confirmed step, however many sessions follow it."""
    from tools.history.steps import CONFIRMED
    scales = LEVEL + [outlier] + LEVEL
    assert steps_of(scales) == []
    assert not [step for length in range(2, len(scales) + 1)
                for step in steps_of(scales[:length]) if step.state == CONFIRMED]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(0.98, 1.02), min_size=8, max_size=20), st.floats(0.3, 3.0),
       st.integers(0, 19))
def test_no_outlying_session_anywhere_makes_a_confirmed_step(level, outlier, at):
    from tools.history.steps import CONFIRMED
    scales = level[:at] + [outlier] + level[at:]
    assert not [step for length in range(2, len(scales) + 1)
                for step in steps_of(scales[:length]) if step.state == CONFIRMED]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(0.98, 1.02), min_size=3, max_size=12),
       st.lists(st.floats(0.98, 1.02), min_size=3, max_size=12),
       st.sampled_from([0.7, 0.85, 1.15, 1.4]))
def test_a_step_held_by_three_sessions_or_more_is_confirmed_where_it_is(before, after, factor):
    from tools.history.steps import CONFIRMED
    steps = steps_of(before + [value * factor for value in after])
    assert [(step.index, step.state) for step in steps] == [(len(before), CONFIRMED)]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from([0.8, 0.81, 0.99, 1.0, 1.02, 1.2]), min_size=6, max_size=30))
def test_sessions_added_never_move_a_confirmed_step(scales):
    """A step confirmed on the first sessions is, with every session after them, confirmed or
    withdrawn at the same session."""
    from tools.history.steps import UNCONFIRMED
    kept = [{step.index for step in steps_of(scales[:length]) if step.state != UNCONFIRMED}
            for length in range(6, len(scales) + 1)]
    assert all(before <= after for before, after in zip(kept, kept[1:]))
