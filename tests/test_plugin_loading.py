"""The plugin loads exactly once however the project is found: from a plain checkout (the root
conftest.py registers it), and installed while a session starts in the checkout (both: the
entry point is named as the conftest names the module, so pytest finds it registered). Installed
and used from anywhere (its pytest11 entry point alone: `pytest --pyargs perf_tests`) is a real
installation's session, in tests/test_installed.py."""
from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from conftest import REPO_ROOT, repository_importable

ENTRY_POINTS = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text()
                             )["project"]["entry-points"]["pytest11"]
OPTION = "--perf-profile"


def installed_entry_point(folder: Path) -> Path:
    """A folder that shows pyproject.toml's pytest11 entry point to importlib.metadata as an
    installed distribution shows it (a dist-info with METADATA and entry_points.txt)."""
    dist_info = folder / "rn50_perf-0.0.0.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: rn50-perf\nVersion: 0.0.0\n")
    (dist_info / "entry_points.txt").write_text(
        "[pytest11]\n" + "".join(f"{name} = {target}\n" for name, target in ENTRY_POINTS.items()))
    return folder


def pytest_in(folder: Path, *arguments: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", *arguments], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_entry_point_is_named_as_the_conftest_names_the_plugin():
    conftest: dict = {}
    exec((REPO_ROOT / "conftest.py").read_text(), conftest)
    assert ENTRY_POINTS == {"perf_tests.plugin": "perf_tests.plugin"}
    assert conftest["pytest_plugins"] == list(ENTRY_POINTS)


@pytest.mark.parametrize("installed", [False, True], ids=["checkout", "installed"])
def test_a_session_in_the_checkout_has_the_options_once(tmp_path, installed):
    env = repository_importable()
    if installed:
        env["PYTHONPATH"] += os.pathsep + str(installed_entry_point(tmp_path / "site"))
    else:
        # No entry point at all, not even one this environment may have installed.
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    done = pytest_in(REPO_ROOT, "--help", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count(f"  {OPTION}=") == 1, done.stdout
