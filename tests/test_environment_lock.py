"""The session's environment lock: written once into the results folder as the first case starts,
with the packages and the run-shaping variables of the interpreter that runs the workers (and
of an A/B candidate: tests/test_ab.py), and the host's description; a command that is missing,
fails or hangs is one line in it, never a failure of the session."""
import json
import platform
import shutil
import sys
from pathlib import Path

import pytest
import torch
from packaging.requirements import Requirement

from conftest import REPO_ROOT
from perf_tests.cli.settings import Settings
from perf_tests.environment import lock as environment_lock
from perf_tests.environment.lock import (CANDIDATE_REQUIREMENTS_FILE, LOCK_FILE, REQUIREMENTS_FILE,
                                         command_output, write_environment_lock)
from perf_tests.runs.launch import Stack
from perf_tests.session import session as session_module
from perf_tests.session.session import PerfSession
from rn50_model.stack_lock import WITHHELD, debian_packages, run_shaping_variables


def read_lock(folder) -> dict:
    return json.loads((folder / LOCK_FILE).read_text())


def requirements_of(path) -> dict[str, str]:
    """name -> pinned version of each line of a requirements file, as pip parses them."""
    pins = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            requirement = Requirement(line)
            [pin] = requirement.specifier
            assert pin.operator == "==", line
            pins[requirement.name] = pin.version
    return pins


def test_a_real_session_locks_its_workers_packages_variables_and_host(run_suite, monkeypatch):
    """A session whose one case skips (the full profile on a CPU host): the lock is written as
    the case starts, whatever the case then does."""
    monkeypatch.setenv("NCCL_DEBUG", "WARN")
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    monkeypatch.setenv("UNRELATED_API_TOKEN", "not for the results folder")
    run = run_suite("--perf-profile", "full", "-k", "1n1g_fp32")
    assert run.outcome.ret == 0, run.output
    assert run.cases["1n1g_fp32_b128"]["verdict"] == "skipped"
    lock = read_lock(run.results_dir)
    assert lock["schema_version"] == 1
    assert (lock["python"], lock["executable"]) == (platform.python_version(), sys.executable)
    assert lock["packages"]["torch"] == torch.__version__
    assert lock["packages"]["pytest"] == pytest.__version__
    variables = lock["variables"]
    assert (variables["NCCL_DEBUG"], variables["OMP_WAIT_POLICY"]) == ("WARN", "PASSIVE")
    assert "UNRELATED_API_TOKEN" not in variables and "HOME" not in variables
    # As the workers get it: the repository first on their PYTHONPATH.
    assert variables["PYTHONPATH"].split(":")[0] == str(REPO_ROOT)
    assert "candidate" not in lock

    host = lock["host"]
    assert host["uname"]["release"] == platform.release()
    assert any(line.startswith("Architecture:") for line in host["lscpu"]["output"])
    if shutil.which("nvidia-smi") is None:
        assert host["nvidia_smi"] == {"command": "nvidia-smi -q", "output": None,
                                      "note": "nvidia-smi is not on PATH"}
    else:
        assert host["nvidia_smi"]["output"]
    assert 0 < lock["collect_seconds"] < 60

    # The operating system's packages, as dpkg lists them (issue 60: an image's CUDA libraries
    # come as such packages).
    if Path("/var/lib/dpkg/status").exists():
        assert lock["debian_packages"]["dpkg"] and "bash" in lock["debian_packages"]

    pins = requirements_of(run.results_dir / REQUIREMENTS_FILE)
    assert pins["torch"] == torch.__version__ and len(pins) == len(lock["packages"])
    assert not (run.results_dir / CANDIDATE_REQUIREMENTS_FILE).exists()
    assert list(run.results_dir.rglob("*.lock")) == []   # the write's own lock file is gone


def test_the_lock_is_on_disk_before_the_first_case_is_measured_and_written_once(monkeypatch,
                                                                                tmp_path):
    """So a session stopped in its first case has it; a second case does not write it again."""
    monkeypatch.setattr(session_module, "probe_host", lambda rootdir, *stack: {
        "device_count": 0, "cpu_count": 2, "hardware": "cpu-test"})
    results = tmp_path / "results"
    seen = []
    monkeypatch.setattr(session_module, "measure",
                        lambda mode, case: seen.append((results / LOCK_FILE).stat().st_mtime_ns))
    session = PerfSession(Settings(), REPO_ROOT, results)
    first, second = session.cases("perf_case")[:2]
    session.measure(first)
    session.measure(second)
    assert len(seen) == 2 and seen[0] == seen[1]


def test_a_second_process_of_the_session_finds_the_lock_written(tmp_path):
    """pytest-xdist's workers share the folder: the first writes, the others leave it."""
    assert write_environment_lock(tmp_path, REPO_ROOT, None) == tmp_path / LOCK_FILE
    before = (tmp_path / LOCK_FILE).read_text()
    assert write_environment_lock(tmp_path, REPO_ROOT, None) is None
    assert (tmp_path / LOCK_FILE).read_text() == before
    assert sorted(path.name for path in tmp_path.iterdir()) == [LOCK_FILE, REQUIREMENTS_FILE]


def test_a_candidate_that_cannot_run_is_one_line_and_no_requirements_file(tmp_path):
    candidate = Stack(prefix=("false",))
    write_environment_lock(tmp_path, REPO_ROOT, candidate)
    lock = read_lock(tmp_path)
    assert lock["candidate"] == {
        "stack": "prefix 'false'",
        "error": "probing the candidate (prefix 'false') (python -m rn50_model.stack_lock) "
                 "failed: no output, exit status 1"}
    assert lock["packages"]["torch"] == torch.__version__
    assert not (tmp_path / CANDIDATE_REQUIREMENTS_FILE).exists()


def test_a_host_command_that_is_missing_fails_or_hangs_is_one_line(monkeypatch):
    assert command_output(["no-such-command-rn50", "-q"]) == {
        "command": "no-such-command-rn50 -q", "output": None,
        "note": "no-such-command-rn50 is not on PATH"}
    assert command_output(["sh", "-c", "echo partial; echo broken >&2; exit 3"]) == {
        "command": "sh -c echo partial; echo broken >&2; exit 3", "output": ["partial"],
        "note": "sh -c echo partial; echo broken >&2; exit 3 exited with 3: broken"}
    monkeypatch.setattr(environment_lock, "COMMAND_TIMEOUT_SECONDS", 0.2)
    assert command_output(["sleep", "5"]) == {"command": "sleep 5", "output": None,
                                              "note": "sleep 5 took over 0.2 s; left out"}


def test_only_the_variables_that_shape_a_run_are_kept():
    environ = {"CUDA_VISIBLE_DEVICES": "0,1", "NCCL_IB_DISABLE": "1", "OMP_NUM_THREADS": "4",
               "LD_PRELOAD": "/usr/lib/libtcmalloc.so", "NVIDIA_TF32_OVERRIDE": "0",
               "TORCHINDUCTOR_CACHE_DIR": "/tmp/ind", "RN50_FAULT": "slow@share=0.1",
               "SLURM_CPUS_PER_TASK": "8", "PYTHONHASHSEED": "0", "MASTER_PORT": "29500",
               "HOME": "/root", "PATH": "/usr/bin", "GITHUB_TOKEN": "secret",
               "LD_PRELOAD_EXTRA": "x", "CUDAHOME": "/usr/local/cuda"}
    assert list(run_shaping_variables(environ)) == [
        "CUDA_VISIBLE_DEVICES", "LD_PRELOAD", "MASTER_PORT", "NCCL_IB_DISABLE",
        "NVIDIA_TF32_OVERRIDE", "OMP_NUM_THREADS", "PYTHONHASHSEED", "RN50_FAULT",
        "SLURM_CPUS_PER_TASK", "TORCHINDUCTOR_CACHE_DIR"]


def test_a_variable_whose_name_says_it_is_a_secret_is_named_without_its_value():
    """A prefix that shapes runs also holds keys people set (NVIDIA_API_KEY for NGC): the lock
    lands in CI artifacts, so their values are withheld."""
    environ = {"NVIDIA_API_KEY": "nvapi-secret", "TORCH_HUB_TOKEN": "t0k3n",
               "TRITON_API_KEY": "k", "NCCL_SOCKET_IFNAME": "eth0"}
    kept = run_shaping_variables(environ)
    assert kept["NCCL_SOCKET_IFNAME"] == "eth0"
    for name in ("NVIDIA_API_KEY", "TORCH_HUB_TOKEN", "TRITON_API_KEY"):
        assert kept[name] == WITHHELD
    assert "nvapi-secret" not in json.dumps(kept) and "t0k3n" not in json.dumps(kept)


def test_debian_packages_are_read_from_dpkg_s_status_file(tmp_path):
    """Installed packages only (one removed with its configuration left is not), by name; a
    package of a second architecture named with it; no dpkg, none."""
    status = tmp_path / "status"
    status.write_text(
        "Package: libcudnn9-cuda-12\nStatus: install ok installed\nArchitecture: amd64\n"
        "Version: 9.5.0.50-1\nDescription: cuDNN\n multi-line text: here\n\n"
        "Package: fuse3\nStatus: deinstall ok config-files\nVersion: 3.14.0-4\n\n"
        "Package: libc6\nStatus: install ok installed\nArchitecture: amd64\n"
        "Version: 2.36-9\n\n"
        "Package: libc6\nStatus: install ok installed\nArchitecture: i386\n"
        "Version: 2.36-9\n")
    assert debian_packages(str(status)) == {"libc6": "2.36-9", "libc6:i386": "2.36-9",
                                            "libcudnn9-cuda-12": "9.5.0.50-1"}
    assert debian_packages(str(tmp_path / "none")) == {}
