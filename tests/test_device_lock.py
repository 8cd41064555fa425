"""The host-wide device lock: usable by every user of the host whoever created it, never
through a symbolic link, one line when it cannot be taken, and lines while a session waits that
name the holder and say how long it has waited."""
import fcntl
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from conftest import REPO_ROOT, TINY_CASE_ARGS, empty_baseline, without_file_permission_override
from perf_tests.runs import device_lock
from perf_tests.runs.device_lock import (DeviceLockError, check_device_lock, command_of,
                                         holding_devices, lock_holder, session_command)

HOLD = """
import sys
from perf_tests.runs.device_lock import holding_devices
with holding_devices(sys.argv[1], print):
    print("held")
"""


@pytest.fixture
def sticky_folder():
    """A folder like /tmp: everyone may create files, only owners remove them."""
    folder = tempfile.mkdtemp(prefix="rn50-lock-test-")
    os.chmod(folder, 0o1777)
    yield folder
    for name in os.listdir(folder):
        os.unlink(os.path.join(folder, name))
    os.rmdir(folder)


def test_the_first_session_creates_it_writable_by_every_user_whatever_its_umask(sticky_folder):
    path = os.path.join(sticky_folder, "devices.lock")
    done = subprocess.run([sys.executable, "-c", "import os, sys\nos.umask(0o077)\n"
                           "from perf_tests.runs.device_lock import check_device_lock\n"
                           "check_device_lock(sys.argv[1])", path], cwd=REPO_ROOT)
    assert done.returncode == 0
    assert os.stat(path).st_mode & 0o777 == 0o666


def test_another_user_takes_a_lock_file_they_cannot_write(sticky_folder):
    """As an earlier version left it: created by the first user with umask 022 (0644)."""
    path = os.path.join(sticky_folder, "devices.lock")
    with open(path, "w"):
        pass
    os.chmod(path, 0o644)
    if os.geteuid() == 0:
        os.chown(path, 65534, 65534)  # the first user; root without DAC override is another
    done = subprocess.run([*without_file_permission_override(), sys.executable, "-c", HOLD, path],
                          cwd=REPO_ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "held\n"


def test_a_symbolic_link_is_not_followed(tmp_path):
    target = tmp_path / "somebody-elses-file"
    target.write_text("keep")
    link = tmp_path / "devices.lock"
    link.symlink_to(target)
    with pytest.raises(DeviceLockError) as raised:
        check_device_lock(link)
    assert str(raised.value) == (
        f"device lock {link} cannot be taken (it is a symbolic link, which is not followed); "
        "every rn50-perf session on this host takes it to measure one case at a time: remove "
        "the file or set RN50_PERF_DEVICE_LOCK to another path")
    assert target.read_text() == "keep"


def test_a_folder_is_not_a_lock_file(tmp_path):
    with pytest.raises(DeviceLockError, match="it is not a regular file"):
        with holding_devices(tmp_path, print):
            pass


def test_a_lock_that_cannot_be_taken_stops_the_session_in_one_line(run_suite, tmp_path,
                                                                   monkeypatch):
    link = tmp_path / "planted.lock"
    link.symlink_to(tmp_path / "elsewhere")
    monkeypatch.setenv("RN50_PERF_DEVICE_LOCK", str(link))
    run = run_suite("-k", "1n1g_fp32", *TINY_CASE_ARGS)
    assert run.outcome.ret == 4, run.output
    run.outcome.stderr.fnmatch_lines([f"ERROR: device lock {link} cannot be taken (it is a "
                                      "symbolic link, which is not followed); * set "
                                      "RN50_PERF_DEVICE_LOCK to another path"])
    assert "Traceback" not in run.output
    assert not (tmp_path / "elsewhere").exists()


# Holds the lock as a session measuring 1n1g_fp32_b8 does, until its stdin closes.
HOLDER = """
import sys
from perf_tests.runs.device_lock import holding_devices
with holding_devices(sys.argv[1], print, "1n1g_fp32_b8"):
    print("held", flush=True)
    sys.stdin.read()
"""
SINCE = r"since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(\d+ s ago\)"


def test_a_waiting_session_names_the_holder_and_how_long_it_has_waited(tmp_path, monkeypatch):
    """Who holds it (pid, command, since when, what it measures), again every few minutes (here
    every 0.8 s) with how long this one has waited, and how long once it holds it."""
    monkeypatch.setattr(device_lock, "POLL_S", 0.1)
    monkeypatch.setattr(device_lock, "STILL_WAITING_S", 0.8)
    path = tmp_path / "devices.lock"
    # A session of its own, not a pytest-xdist worker (whose session is its parent's command).
    alone = {name: value for name, value in os.environ.items() if name != "PYTEST_XDIST_WORKER"}
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], cwd=REPO_ROOT, env=alone,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "held\n"
    command = command_of(holder.pid)
    threading.Timer(2.5, holder.stdin.close).start()
    lines = []
    with holding_devices(path, lines.append):
        pass
    holder.wait(timeout=30)
    named = (rf"held by pid {holder.pid} \({re.escape(command)}\) "
             rf"{SINCE}, measuring 1n1g_fp32_b8")
    assert re.fullmatch(rf"waiting for the device lock {path}: {named}", lines[0]), lines
    assert re.fullmatch(rf"still waiting for the device lock after [12] s: {named}", lines[1])
    assert re.fullmatch(r"took the device lock after waiting [23] s", lines[-1]), lines


def test_a_record_the_kernel_does_not_confirm_is_not_believed(tmp_path):
    """A holder's record outlives it; another session that takes the lock without writing one (an
    older version, a file it cannot write) is named by the kernel's table of locks."""
    path = tmp_path / "devices.lock"
    path.write_text('{"pid": 1, "command": "gone", "measuring": "x", "since": '
                    '"2026-11-29T10:00:00+00:00"}\n')
    with open(path) as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert lock_holder(path).text() == \
            f"held by pid {os.getpid()} ({command_of(os.getpid())})"
    assert lock_holder(path).text() == "held by another rn50-perf session on this host"


@pytest.mark.slow
def test_a_session_says_it_waits_for_the_device_lock_then_measures(tmp_path):
    """Another session holds the devices: one line naming it, then its run once it lets go
    (under -q, its progress line still shows)."""
    lock = tmp_path / "devices.lock"
    with holding_devices(lock, print, "1n1g_fp32_b8"):
        session = subprocess.Popen(
            [sys.executable, "-m", "pytest", str(REPO_ROOT / "perf_tests"), "-q", "-k",
             "1n1g_fp32", *TINY_CASE_ARGS, "--perf-runs", "1", "--perf-results",
             str(tmp_path / "results"), "--perf-baseline-file",
             str(empty_baseline(tmp_path / "b.json"))],
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env=dict(os.environ, RN50_PERF_DEVICE_LOCK=str(lock)))
        first = session.stdout.readline()
        deadline = time.monotonic() + 120
        lines = []
        while "waiting for the device lock" not in first and time.monotonic() < deadline:
            lines.append(first)
            first = session.stdout.readline()
            if not first and session.poll() is not None:
                break
        assert re.fullmatch(rf"waiting for the device lock {lock}: held by pid {os.getpid()} "
                            rf"\({re.escape(session_command())}\) {SINCE}, measuring "
                            r"1n1g_fp32_b8\n", first), "".join(lines) + first
        time.sleep(1)
        assert not (tmp_path / "results" / "1n1g_fp32_b8" / "run-1.json").exists()
    output, _ = session.communicate(timeout=300)
    assert session.returncode == 0, output
    progress = [line for line in output.splitlines() if " run " in line and "img/s" in line]
    assert [line.split(":")[0] for line in progress] == ["1n1g_fp32_b8 run 1/1"]
    assert re.search(r"^took the device lock after waiting \d+ s$", output, re.M), output
