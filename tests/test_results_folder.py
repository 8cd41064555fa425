"""The results folder: every session gets a new one, created when it starts, even beside a
session started in the same second; a location that cannot be written is one usage-error line
before anything is measured."""
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import TINY_CASE_ARGS, empty_baseline, without_file_permission_override
from perf_tests.results.folder import (ResultsFolder, ResultsFolderError, create_default_folder,
                                       create_new_folder)
from perf_tests.session.report import interruption_line


def test_sessions_starting_in_the_same_second_each_create_a_folder_of_their_own(tmp_path):
    created, start = [], threading.Barrier(8)

    def session():
        start.wait()
        created.append(create_default_folder(tmp_path))

    threads = [threading.Thread(target=session) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(created)) == 8
    assert all(folder.is_dir() and folder.parent == tmp_path / "perf_results"
               for folder in created)
    assert len({folder.name[:15] for folder in created}) <= 2  # one or two seconds' stamps


@pytest.mark.slow
def test_two_sessions_started_together_keep_both_results(repo_copy, tmp_path, shared_data_cache):
    """What a CI matrix does: two `pytest perf_tests -k 1n1g_fp32 --perf-runs 1` at once."""
    env = dict(os.environ, RN50_PERF_DEVICE_LOCK=str(tmp_path / "device-lock"),
               RN50_DATA_CACHE=str(shared_data_cache))
    env.pop("RN50_FAULT", None)
    command = [sys.executable, "-m", "pytest", "perf_tests", "-k", "1n1g_fp32", "--perf-runs",
               "1", "--perf-set", "max-runs=1", *TINY_CASE_ARGS]
    sessions = [subprocess.Popen([*command, "--perf-baseline-file",
                                  str(empty_baseline(tmp_path / f"b{number}.json"))],
                                 cwd=repo_copy, env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True) for number in (1, 2)]
    outputs = [session.communicate(timeout=600)[0] for session in sessions]
    assert [session.returncode for session in sessions] == [0, 0], outputs
    folders = sorted((repo_copy / "perf_results").iterdir())
    assert len(folders) == 2, folders
    for folder in folders:
        results = json.loads((folder / "results.json").read_text())
        row = results["cases"]["1n1g_fp32_b8"]
        run = json.loads((folder / "1n1g_fp32_b8" / "run-1.json").read_text())
        assert row["runs_ips"] == [run["global_ips"]]
        # Each session wrote its own baseline-less verdict into its own folder.
        assert str(results["baseline_file"]).endswith(("b1.json", "b2.json"))
    assert {json.loads((folder / "results.json").read_text())["baseline_file"]
            for folder in folders} == {str(tmp_path / "b1.json"), str(tmp_path / "b2.json")}


def test_a_session_that_measured_nothing_leaves_no_folder(repo_copy, tmp_path):
    done = subprocess.run([sys.executable, "-m", "pytest", "perf_tests", "--collect-only", "-q",
                           "--perf-profile", "smoke"], cwd=repo_copy, capture_output=True,
                          text=True, env=dict(os.environ,
                                              RN50_PERF_DEVICE_LOCK=str(tmp_path / "lock")))
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (repo_copy / "perf_results").exists()
    # A session of another project, where the plugin is installed, leaves nothing behind.
    other = tmp_path / "other"
    other.mkdir()
    (other / "test_other.py").write_text("def test_other():\n    assert True\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "perf_tests.plugin",
                           "-p", "no:cacheprovider", "-p", "no:benchmark", str(other)], cwd=other,
                          capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(repo_copy),
                                   RN50_PERF_DEVICE_LOCK=str(tmp_path / "lock")))
    assert done.returncode == 0, done.stdout + done.stderr
    assert {path.name for path in other.iterdir()} - {"__pycache__"} == {"test_other.py"}


def test_a_file_or_a_used_folder_is_refused(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(ResultsFolderError, match="is a file; pass a new folder"):
        create_new_folder(tmp_path / "file")
    create_new_folder(tmp_path / "new" / "results")
    assert (tmp_path / "new" / "results").is_dir()


def read_only_folder(tmp_path):
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    return folder


@pytest.mark.parametrize("where", ["new folder", "existing empty folder"])
def test_an_unwritable_results_folder_is_one_usage_error_line(run_suite, tmp_path, where):
    read_only = read_only_folder(tmp_path)
    results = read_only / "results" if where == "new folder" else read_only
    run = run_suite("-k", "1n1g_fp32", *TINY_CASE_ARGS, results_dir=results,
                    permissions_hold=True)
    assert run.outcome.ret == 4, run.output
    why = "Permission denied"
    assert (f"ERROR: results folder {results} cannot be written ({why}); pass a writable "
            "folder to --perf-results") in run.output
    assert "Traceback" not in run.output
    assert list(read_only.iterdir()) == []


def test_a_default_results_folder_that_cannot_be_created_is_one_usage_error_line(repo_copy,
                                                                                tmp_path):
    repo_copy.chmod(0o555)  # a read-only checkout
    done = subprocess.run(
        [*without_file_permission_override(), sys.executable, "-m", "pytest", "perf_tests",
         "-k", "1n1g_fp32", *TINY_CASE_ARGS], cwd=repo_copy, capture_output=True, text=True,
        env=dict(os.environ, RN50_PERF_DEVICE_LOCK=str(tmp_path / "lock"),
                 PYTHONDONTWRITEBYTECODE="1"))
    output = done.stdout + done.stderr
    assert done.returncode == 4, output
    assert (f"ERROR: results folder {repo_copy / 'perf_results'} cannot be created (Permission "
            "denied); pass a writable folder with --perf-results") in output
    assert "Traceback" not in output
    assert not (repo_copy / "perf_results").exists()


def test_an_interruption_names_the_case_it_stopped_in_and_those_that_never_ran(tmp_path):
    folder = ResultsFolder(tmp_path / "results")
    planned = ["1n1g_fp32_b8", "1n2g_fp32_b8", "2n1g_fp32_b8"]
    assert folder.record_interruption(planned, {"profile": "smoke"}) is None  # nothing began
    assert not folder.results_file.exists()

    folder.save_case("1n1g_fp32_b8", {"verdict": "pass"}, {"profile": "smoke"})
    folder.run_dir("1n2g_fp32_b8", 1)   # stopped in its first run
    stopped = folder.record_interruption(planned, {"profile": "smoke"})
    assert (stopped["in_case"], stopped["not_run"]) == ("1n2g_fp32_b8", ["2n1g_fp32_b8"])
    document = folder.load()
    assert document["interrupted"] == stopped and list(document["cases"]) == ["1n1g_fp32_b8"]
    assert interruption_line(document) == (
        f"The session was interrupted at {stopped['at']} in 1n2g_fp32_b8 (its finished runs "
        "are kept in its folder, not judged); never ran: 2n1g_fp32_b8.")
    assert interruption_line({"cases": {}}) is None


def test_the_project_is_pytests_rootdir_where_an_ini_file_or_rootdir_fixed_it():
    """Else the folder pytest runs in: an installed suite's `--perf-image /images/b` made pytest's
    rootdir /images (issue 60), and the baselines and results followed it."""
    from perf_tests.session.session import project_folder
    assert project_folder(Path("/r"), Path("/r/pytest.ini"), None, Path("/ci")) == Path("/r")
    assert project_folder(Path("/r"), None, "/r", Path("/ci")) == Path("/r")
    assert project_folder(Path("/images"), None, None, Path("/ci")) == Path("/ci")


def test_a_value_written_apart_from_its_option_that_pytest_takes_for_a_path_is_named(tmp_path):
    from perf_tests.cli.options import values_taken_for_paths
    image = tmp_path / "b"
    image.mkdir()
    assert values_taken_for_paths(["--perf-image", str(image), "--perf-strict", str(tmp_path),
                                   f"--perf-image={image}", "--perf-runs", "3",
                                   "--perf-results", str(tmp_path / "new")]) == [
        f"--perf-image {image}"]


def test_a_session_writes_results_json_from_what_it_holds_and_reads_only_others_rows(tmp_path):
    """A folder this process writes alone is never read back: its own last writing is what the
    next case is added to. A shared one (pytest-xdist workers) merges into what the others
    wrote."""
    alone = ResultsFolder(tmp_path / "alone")
    alone.save_case("1n1g_fp32_b8", {"verdict": "pass"}, {"profile": "smoke"})
    alone.results_file.write_text("changed outside")   # read back, it would not parse
    alone.save_case("1n2g_fp32_b8", {"verdict": "pass"}, {"profile": "smoke"})
    written = json.loads(alone.results_file.read_text())
    assert list(written["cases"]) == ["1n1g_fp32_b8", "1n2g_fp32_b8"]
    assert alone.document == written

    path = tmp_path / "shared"
    first, second = ResultsFolder(path, shared=True), ResultsFolder(path, shared=True)
    first.save_case("1n1g_fp32_b8", {"verdict": "pass"}, {"profile": "smoke"})
    second.save_case("1n2g_fp32_b8", {"verdict": "pass"}, {"profile": "smoke"})
    # read through results/document.py: a row without `kind` is given the one it reads as
    assert second.case("1n1g_fp32_b8") == {"kind": "throughput", "verdict": "pass"}
    assert list(json.loads(second.results_file.read_text())["cases"]) == ["1n1g_fp32_b8",
                                                                           "1n2g_fp32_b8"]
