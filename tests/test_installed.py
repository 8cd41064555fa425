"""The suite as a user installs it: a real, non-editable `pip install` into a fresh virtual
environment under the temporary folder (with `torch==2.13.0`, as README says), then used from a
project folder outside the checkout, by its entry point and console scripts alone. Baselines and
results are that project's, wherever pytest's rootdir went, and the published figures ship with
the package. One environment serves every test that installs the suite
(conftest.installed_suite). It replaces a test that showed the entry point to importlib.metadata
through a hand-made dist-info on PYTHONPATH: this one installs for real and runs the suite by
that entry point."""
from __future__ import annotations

import json
import subprocess

import pytest

from conftest import READS_INSTALLED_SUITE, TINY_CASE_ARGS

pytestmark = [pytest.mark.slow, READS_INSTALLED_SUITE]


@pytest.fixture(scope="module")
def project_session(installed_suite, tmp_path_factory):
    """A CI project's folder, and the tiny case recorded there by the installed suite with its
    results named apart from their option (`--perf-results DIR`): pytest takes DIR for a test
    path, and so its rootdir for DIR's parent folder."""
    here = tmp_path_factory.mktemp("ci")
    project, results = here / "project", here / "results"
    project.mkdir()
    results.mkdir()   # an empty folder: the session may use it, and pytest sees a path
    done = subprocess.run(
        [str(installed_suite / "pytest"), "--pyargs", "perf_tests", "-p", "no:cacheprovider",
         "-k", "1n1g_fp32", *TINY_CASE_ARGS, "--perf-runs", "2", "--perf-explain", "never",
         "--perf-ignore-host-state", "--perf-update-baselines=force", "--perf-results",
         str(results)],
        cwd=project, capture_output=True, text=True, timeout=600,
        env=user_environment(installed_suite, here))
    return project, results, done


def user_environment(installed_suite, home) -> dict:
    """A user's shell with the environment's bin folder first: nothing of this checkout on
    PYTHONPATH, so only the installed package is imported."""
    return {"PATH": f"{installed_suite}:/usr/bin:/bin", "HOME": str(home),
            "RN50_PERF_DEVICE_LOCK": str(home / "lock")}


def test_an_installed_suite_records_into_the_project_wherever_pytest_put_its_rootdir(
        project_session):
    """Issue 60: `rootdir:` became the parent of a path given apart from its option, and the
    baselines and results followed it."""
    project, results, done = project_session
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"rootdir: {results.parent}" in done.stdout   # pytest's own, moved
    hardware = json.loads((results / "results.json").read_text())["hardware"]
    recorded = json.loads((project / "baselines" / f"{hardware}.json").read_text())
    assert list(recorded["entries"]) == ["1n1g_fp32_b8"]
    assert not (results.parent / "baselines").exists()
    assert (f"pytest took the value of --perf-results {results} for a test path when it looked "
            f"for its rootdir and ini file") in done.stdout
    warning = next(line.strip() for line in done.stdout.splitlines() if "pytest took" in line)
    assert warning.startswith("PerfCommandLineWarning: pytest took the value of --perf-results")
    assert warning.endswith(f"baselines and results go to {project} all the same. Write "
                            f"--perf-results={results} to keep pytest's rootdir and ini file "
                            "here")


def test_installed_tools_use_the_project_and_the_figures_the_package_ships(installed_suite,
                                                                           project_session):
    """Issue 60: `dry run: .../site-packages/baselines/cpu-intel-xeon.json not changed` and
    `--published ... choose from none (the folder is empty)`."""
    project, results, _ = project_session
    hardware = json.loads((results / "results.json").read_text())["hardware"]
    user = user_environment(installed_suite, project.parent)
    promote = subprocess.run([str(installed_suite / "rn50-perf"), "promote",
                              str(results / "results.json"), "--dry-run", "--force"],
                             cwd=project, capture_output=True, text=True, timeout=120, env=user)
    assert promote.returncode == 0, promote.stderr
    assert f"dry run: {project / 'baselines' / f'{hardware}.json'} not changed" in promote.stdout
    report = subprocess.run([str(installed_suite / "rn50-perf"), "report", "--published",
                             "dlperf-ngc-pytorch", "--output-dir", str(project / "report")],
                            cwd=project, capture_output=True, text=True, timeout=120,
                            env=user)
    assert report.returncode == 0, report.stderr
    assert "dlperf-ngc-pytorch (published):" in report.stdout
    assert (project / "report" / "combined_report.md").is_file()
