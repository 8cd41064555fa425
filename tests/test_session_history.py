"""The sessions a gate learns its host from (perf_tests/results/history.py): which earlier
sessions count for a baseline entry, and where they are looked for. (The band they make:
tests/test_tolerance_band.py; a real session that learns from them:
tests/test_suite_sessions.py.)"""
import json

import pytest

from perf_tests.baselines.file import AUTO, BaselineEntry
from perf_tests.cli.settings import Settings
from perf_tests.cli.values import history_folders
from perf_tests.context.context import history_of
from perf_tests.results.folder import ResultsFolder
from perf_tests.results.history import RECENT, SessionHistory

CASE = "1n1g_fp32_b8"
STACK = {"device": "AMD EPYC", "cpu_count": 2, "torch": "2.13.0+cpu", "host": "vm",
         "commit": "a21bc6e", "variables": {}}
SETTINGS = {"image_size": 64, "warmup_iters": 2, "timed_iters": 4, "threads": 2}
ENTRY = BaselineEntry(CASE, 40.0, [40.0] * 10, tolerance=AUTO, environment=STACK,
                      settings=SETTINGS)


def write_session(folder, name, runs, environment=STACK, settings=SETTINGS, started="", **row):
    path = folder / name / "results.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({
        "started_at": started or f"2026-12-01T{len(list(folder.iterdir())):02d}:00:00Z",
        "environment": environment,
        "cases": {CASE: {"runs_ips": runs, "settings": settings, **row}}}))
    return path.parent


def test_only_unchanged_sessions_of_the_entry_s_machine_stack_and_settings_count(tmp_path):
    write_session(tmp_path, "same", [39.0, 40.0])
    # Another node of the same kind, and a later commit of the suite: still the same stack.
    write_session(tmp_path, "other-node", [38.0], {**STACK, "host": "vm2", "commit": "b"})
    write_session(tmp_path, "torch", [20.0], {**STACK, "torch": "2.14.0+cpu"})
    write_session(tmp_path, "fault", [20.0], {**STACK, "variables": {"RN50_FAULT": "slow"}})
    write_session(tmp_path, "machine", [20.0], {**STACK, "cpu_count": 4})
    write_session(tmp_path, "threads", [20.0], settings={**SETTINGS, "threads": 1})
    write_session(tmp_path, "size", [20.0], settings={**SETTINGS, "image_size": 224})
    write_session(tmp_path, "error", [20.0], verdict="error")
    write_session(tmp_path, "marked", [41.0, 20.0], marked_runs={"2": "busy"})
    (tmp_path / "no-session").mkdir()
    (tmp_path / "no-session" / "results.json").write_text("[1, 2]")
    history = SessionHistory([tmp_path])
    assert history.runs(CASE, ENTRY) == [[39.0, 40.0], [38.0], [41.0]]
    assert history.unreadable == 1
    assert history.runs("1n1g_fp32_b16", ENTRY) == []
    # An entry that records no environment has no stack to match.
    assert history.runs(CASE, BaselineEntry(CASE, 40.0, [40.0] * 10, tolerance=AUTO)) == []


def test_the_newest_sessions_count_and_the_session_itself_does_not(tmp_path):
    for number in range(RECENT + 2):
        write_session(tmp_path, f"s{number:02d}", [float(number + 1)],
                      started=f"2026-12-01T10:{number:02d}:00Z")
    own = write_session(tmp_path, "own", [99.0], started="2026-12-02T00:00:00Z")
    runs = SessionHistory([tmp_path, own], own).runs(CASE, ENTRY)
    assert runs == [[float(number + 1)] for number in range(2, RECENT + 2)]


def test_the_folders_beside_the_results_folder_and_those_given_none_for_none(tmp_path):
    here, elsewhere = tmp_path / "perf_results", tmp_path / "ci-artifacts"
    own = here / "now"
    own.mkdir(parents=True)
    write_session(here, "earlier", [40.0], started="2026-12-01T10:00:00Z")
    write_session(elsewhere, "downloaded", [41.0], started="2026-12-01T11:00:00Z")
    assert history_of(Settings(), ResultsFolder(own)).runs(CASE, ENTRY) == [[40.0]]
    given = Settings(history=history_folders(str(elsewhere)))
    assert history_of(given, ResultsFolder(own)).runs(CASE, ENTRY) == [[40.0], [41.0]]
    assert history_of(Settings(history=history_folders("none")),
                      ResultsFolder(own)).runs(CASE, ENTRY) == []
    with pytest.raises(Exception, match="is not a folder; pass folders of earlier sessions"):
        history_folders(str(tmp_path / "missing"))
