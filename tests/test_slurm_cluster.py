"""Tests of the one-node Slurm test cluster itself (tests/slurm_cluster.py): real munged, slurmctld
and slurmd; srun, salloc and the killing of steps behave as the slurm launcher expects."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import uuid

import pytest

from slurm_cluster import (SlurmCluster, SlurmUnavailable, is_running, parent_pids, process_environ,
                           slurm_available)

pytestmark = pytest.mark.slow

# Set in a step's environment to find its tasks on this host, whatever Slurm made of them.
TASK_MARKER = "SLURM_CLUSTER_TEST_TOKEN"


@pytest.fixture
def cluster(slurm_cluster):
    return slurm_cluster


def marked_processes(token: str) -> dict[int, str]:
    """pid -> program name of every process whose environment holds the token."""
    found = {}
    for pid in parent_pids():
        if process_environ(pid).get(TASK_MARKER) == token:
            try:
                found[pid] = open(f"/proc/{pid}/comm").read().strip()
            except OSError:
                pass
    return found


def wait_for(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not (result := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {timeout:.0f} s")
        time.sleep(0.05)
    return result


def start_sleep_step(env: dict[str, str], token: str) -> tuple[subprocess.Popen, dict[int, str]]:
    """`srun sleep 300`, one task per node, in its own process group as the launcher starts it;
    returns once the sleep runs."""
    srun = subprocess.Popen(["srun", "--nodes", "1", "--ntasks", "1", "--ntasks-per-node", "1",
                             "--job-name", f"sleep-{token}", "sleep", "300"],
                            env={**env, TASK_MARKER: token}, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    wait_for(lambda: not sleeps_gone(token), 30, "the step's sleep did not start")
    return srun, marked_processes(token)


def sleeps_gone(token: str) -> bool:
    return "sleep" not in marked_processes(token).values()


def test_node_is_idle_with_this_machines_cpus(cluster):
    listed = subprocess.run(["sinfo", "--noheader", "--Node", "--format", "%N %T %c"],
                            env=cluster.env, capture_output=True, text=True, timeout=30)
    assert listed.stdout.split() == [cluster.node_name, "idle", str(cluster.cpus)], listed.stderr


def test_srun_runs_two_tasks_on_one_node(cluster):
    done = subprocess.run(["srun", "-N1", "-n2", "hostname"], env=cluster.env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [socket.gethostname()] * 2


def test_salloc_gives_the_command_its_job(cluster):
    done = cluster.salloc(["sh", "-c", 'echo "$SLURM_JOB_ID $SLURM_JOB_NODELIST $SLURM_NNODES"'],
                          nodes=1, timeout=60)
    assert done.returncode == 0, done.stderr
    job_id, nodelist, nodes = done.stdout.split()
    assert job_id.isdigit() and nodelist == cluster.node_name and nodes == "1"


def test_allocation_yields_the_environment_salloc_gives(cluster):
    with cluster.allocation() as job_env:
        assert job_env["SLURM_JOB_NODELIST"] == cluster.node_name
        assert job_env["SLURM_CONF"] == str(cluster.conf)
        done = subprocess.run(["srun", "--ntasks-per-node", "1", "printenv", "SLURM_JOB_ID"],
                              env=job_env, capture_output=True, text=True, timeout=60)
        assert done.stdout.strip() == job_env["SLURM_JOB_ID"], done.stderr


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_killing_srun_ends_its_tasks_and_frees_the_allocation(cluster, signum):
    token = uuid.uuid4().hex
    with cluster.allocation() as job_env:
        srun, running = start_sleep_step(job_env, token)
        # srun's first process, the one its caller started; srun forks a helper of its own.
        os.kill(srun.pid, signum)
        wait_for(lambda: sleeps_gone(token), 10, f"the step's sleep outlived srun's {signum!r}")
        srun.communicate(timeout=30)
        # The allocation is still there and its one CPU is free again for the next step.
        again = subprocess.run(["srun", "--ntasks-per-node", "1", "true"], env=job_env,
                               capture_output=True, text=True, timeout=30)
        assert again.returncode == 0, again.stderr


def test_step_survives_srun_group_sigkill_until_scancel(cluster):
    """SIGKILL to srun's whole process group (the launcher's last resort) takes srun's helper too,
    and then nothing tells Slurm: the step keeps running until scancel, as the launcher's cleanup
    does it."""
    token = uuid.uuid4().hex
    with cluster.allocation() as job_env:
        srun, _ = start_sleep_step(job_env, token)
        os.killpg(srun.pid, signal.SIGKILL)
        srun.communicate(timeout=30)
        time.sleep(1)
        assert not sleeps_gone(token), "Slurm now ends a step whose srun was SIGKILLed"
        steps = subprocess.run(["squeue", "--noheader", "--steps", "--jobs",
                                job_env["SLURM_JOB_ID"], "--format", "%i %j"],
                               env=cluster.env, capture_output=True, text=True, timeout=30)
        step_ids = [line.split()[0] for line in steps.stdout.splitlines()
                    if line.split()[1:] == [f"sleep-{token}"]]
        assert step_ids, steps.stdout + steps.stderr
        subprocess.run(["scancel", "--signal=KILL", *step_ids], env=cluster.env, timeout=30,
                       check=True)
        wait_for(lambda: sleeps_gone(token), 10, "the step's sleep outlived scancel")


def test_stop_leaves_no_process_of_the_cluster(tmp_path):
    """A second cluster, started while the module's runs, stopped with a step still running."""
    reason = slurm_available()
    if reason:
        pytest.skip(reason)
    token = uuid.uuid4().hex
    cluster = SlurmCluster(tmp_path / "slurm")
    with cluster:
        srun, running = start_sleep_step(cluster.env, token)
        assert set(cluster.daemon_pids) == {"munged", "slurmctld", "slurmd"}
        assert all(is_running(pid) for pid in cluster.daemon_pids.values())
        assert set(running) <= set(cluster.processes())
    srun.communicate(timeout=30)
    left = {pid: name for pid, name in marked_processes(token).items() if is_running(pid)}
    assert not left, f"step processes left after stop: {left}"
    assert not [pid for pid in cluster.daemon_pids.values() if is_running(pid)]
    assert cluster.processes() == []
    # stop() is safe to repeat, e.g. from a fixture's teardown after a test already stopped it.
    cluster.stop()


def test_a_node_that_never_gets_idle_fails_with_the_logs(tmp_path):
    reason = slurm_available()
    if reason:
        pytest.skip(reason)
    cluster = SlurmCluster(tmp_path / "slurm", start_timeout=3)
    # More CPUs than slurmd finds: slurmctld refuses the node's registration.
    cluster.node_hardware = f"CPUs={cluster.cpus * 64}"
    with pytest.raises(SlurmUnavailable) as failure:
        cluster.start()
    first_line, *logs = str(failure.value).splitlines()
    assert "not idle" in first_line and str(cluster.root) in first_line
    assert any("slurmctld.log" in line for line in logs)
    assert cluster.processes() == []
