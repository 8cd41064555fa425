"""The multi-node launchers on real engines: OpenMPI's mpirun with a hostfile of localhost lines,
and Slurm's srun inside a salloc allocation of a real one-node cluster (tests/slurm_cluster.py).
Each measures for real, fails with the failed rank's traceback, ends a hung rank at the timeout,
and leaves no process behind (workers, agents, mpirun, srun or Slurm steps)."""
import json
import shutil
import subprocess

import pytest

from conftest import TINY_CASE_ARGS, processes_mentioning

pytestmark = pytest.mark.slow

ONE_RUN = ["--perf-runs", "1", "--perf-set", "max-runs=1"]
TINY = ["--perf-batches", "2", *TINY_CASE_ARGS, *ONE_RUN]


def needs_mpirun():
    if shutil.which("mpirun") is None:
        pytest.skip("mpirun not found; install it with .ci/install-launchers.sh "
                    "(Debian: openmpi-bin)")


@pytest.fixture
def hostfile(tmp_path):
    """Two lines of localhost: two simulated nodes on this host, as OpenMPI slots."""
    needs_mpirun()
    path = tmp_path / "hostfile"
    path.write_text("# two nodes on this host\nlocalhost slots=1\nlocalhost slots=1\n")
    return path


@pytest.fixture
def in_allocation(slurm_cluster, monkeypatch):
    """Run the suite as from `salloc --exclusive`: the allocation's environment is this one."""
    with slurm_cluster.allocation(options=["--exclusive"]) as job_env:
        for key, value in job_env.items():
            if key.startswith("SLURM") or key == "PATH":
                monkeypatch.setenv(key, value)
        yield job_env
        steps = subprocess.run(["squeue", "--noheader", "--steps", "--jobs",
                                job_env["SLURM_JOB_ID"], "--format", "%j"],
                               env=slurm_cluster.env, capture_output=True, text=True, timeout=30)
        # The allocation holder is the job's only step: no run of the suite left one behind.
        assert not [name for name in steps.stdout.split() if name.startswith("rn50-perf")], \
            steps.stdout


def run_record(run, case_id: str) -> dict:
    return json.loads((run.results_dir / case_id / "run-1.json").read_text())


# -- mpirun -------------------------------------------------------------------------------------


def test_mpirun_measures_one_node_and_two_nodes_on_localhost(run_suite, hostfile):
    run = run_suite("-k", "1n2g or 2n1g or 4n1g", "--perf-launcher", "mpirun", "--perf-hostfile",
                    str(hostfile), "--perf-case", "4n1g_fp32_b2", *TINY)
    assert run.outcome.ret == 0, run.output
    for case_id, nodes in (("1n2g_fp32_b2", 1), ("2n1g_fp32_b2", 2)):
        case = run.cases[case_id]
        assert case["verdict"] == "no-baseline" and case["median_ips"] > 0, case
        saved = run_record(run, case_id)
        assert saved["record"]["world_size"] == 2 and saved["record"]["nodes"] == nodes
        (command,) = saved["commands"]
        assert command[0] == "mpirun" and command[command.index("-np") + 1] == str(nodes)
        # The suite's agent on each node, its rank mpirun's number for it.
        agent = command.index("perf_tests.runs.agent")
        assert command[agent + 1:agent + 5] == ["--nnodes", str(nodes), "--node-rank-from",
                                                "OMPI_COMM_WORLD_RANK"], command
        assert "torch.distributed.run" not in command
        # Each agent's node line once, from the run folder and mpirun's output alike.
        agents = saved["network"]["nodes"]
        assert len(agents) == nodes and len({agent["pid"] for agent in agents}) == nodes, agents
        assert len(list((run.results_dir / case_id / "run-1").glob("node-*.json"))) == nodes
    skipped = run.cases["4n1g_fp32_b2"]
    assert skipped["verdict"] == "skipped"
    assert f"needs 4 hosts, the hostfile {hostfile} lists 2" in skipped["message"]
    assert processes_mentioning(str(run.results_dir)) == []


def rank_1_failed_with_its_traceback(run, case_id: str) -> None:
    """RN50_FAULT raise@rank=1: the case's error names rank 1's exception, its tail holds the
    traceback, and no process of the run is left."""
    assert run.outcome.ret == 1, run.output
    failed = run.cases[case_id]
    assert failed["verdict"] == "error"
    assert "rank 1 failed: RuntimeError: injected fault on rank 1" in failed["message"]
    assert any("Traceback" in line for line in failed["failure_tail"]), failed["failure_tail"]
    assert processes_mentioning(str(run.results_dir)) == []


def test_mpirun_crashed_rank_is_named_with_its_traceback(run_suite, hostfile, monkeypatch):
    monkeypatch.setenv("RN50_FAULT", "raise@rank=1,iter=1")
    run = run_suite("-k", "2n1g", "--perf-launcher", "mpirun", "--perf-hostfile", str(hostfile),
                    *TINY)
    rank_1_failed_with_its_traceback(run, "2n1g_fp32_b2")


@pytest.mark.idle_wait
def test_mpirun_hung_rank_ends_at_the_timeout_and_nothing_is_left(run_suite, hostfile,
                                                                   monkeypatch, hang_timeout):
    monkeypatch.setenv("RN50_FAULT", "stop@rank=1,iter=1")
    # Rank 1 must reach its stop (its first iteration, through mpirun's two agents)
    # before the timeout: hang_timeout is several tiny runs' time on this machine.
    run = run_suite("-k", "2n1g", "--perf-launcher", "mpirun", "--perf-hostfile", str(hostfile),
                    *TINY, "--perf-set", f"timeout={hang_timeout}")
    assert run.outcome.ret == 1, run.output
    message = run.cases["2n1g_fp32_b2"]["message"]
    assert f"no result after {hang_timeout} s (--perf-set timeout)" in message
    assert "rank 1 (pid" in message and "stopped" in message
    assert processes_mentioning(str(run.results_dir)) == []


# -- Slurm --------------------------------------------------------------------------------------


def test_slurm_outside_an_allocation_is_one_line(run_suite, monkeypatch):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    run = run_suite("-k", "1n1g", "--perf-launcher", "slurm", *TINY)
    assert run.outcome.ret == 4, run.output
    assert any("--perf-launcher slurm needs a Slurm allocation and SLURM_JOB_ID is not set" in line
               for line in run.outcome.errlines), run.output
    assert "Traceback" not in run.output


def test_slurm_measures_through_srun_and_skips_what_the_allocation_cannot_hold(
        run_suite, in_allocation):
    run = run_suite("-k", "1n2g or 2n1g", "--perf-launcher", "slurm", *TINY)
    assert run.outcome.ret == 0, run.output
    case = run.cases["1n2g_fp32_b2"]
    assert case["verdict"] == "no-baseline" and case["median_ips"] > 0, case
    saved = run_record(run, "1n2g_fp32_b2")
    assert saved["record"]["world_size"] == 2
    (command,) = saved["commands"]
    assert command[0] == "srun" and command[command.index("--nodes") + 1] == "1"
    # The node's rank is its name's place among the step's nodes, whatever its task number.
    nodes = command[command.index("--nodelist") + 1]
    agent = command.index("perf_tests.runs.agent")
    assert command[agent + 1:agent + 7] == ["--nnodes", "1", "--node-rank-from",
                                            "SLURMD_NODENAME", "--node-order", nodes], command
    skipped = run.cases["2n1g_fp32_b2"]
    assert skipped["verdict"] == "skipped"
    assert (f"needs 2 nodes, the Slurm allocation {in_allocation['SLURM_JOB_ID']} has 1"
            in skipped["message"])
    assert processes_mentioning(str(run.results_dir)) == []


def test_slurm_crashed_rank_is_named_with_its_traceback(run_suite, in_allocation, monkeypatch):
    monkeypatch.setenv("RN50_FAULT", "raise@rank=1,iter=1")
    run = run_suite("-k", "1n2g", "--perf-launcher", "slurm", *TINY)
    rank_1_failed_with_its_traceback(run, "1n2g_fp32_b2")


@pytest.mark.idle_wait
def test_slurm_hung_rank_ends_at_the_timeout_and_the_step_is_gone(run_suite, in_allocation,
                                                                  monkeypatch, hang_timeout):
    monkeypatch.setenv("RN50_FAULT", "stop@rank=1,iter=1")
    run = run_suite("-k", "1n2g", "--perf-launcher", "slurm", *TINY, "--perf-set",
                    f"timeout={hang_timeout}")
    assert run.outcome.ret == 1, run.output
    message = run.cases["1n2g_fp32_b2"]["message"]
    assert f"no result after {hang_timeout} s (--perf-set timeout)" in message
    assert "rank 1 (pid" in message and "stopped" in message
    assert processes_mentioning(str(run.results_dir)) == []


# -- A/B through the cluster launchers -------------------------------------------------------


def ab_commands(run, case_id: str) -> dict[str, list[list[str]]]:
    """Each side's launch commands, from the run records: the side is in the record."""
    sides = {}
    for index, side in enumerate(run.cases[case_id]["run_order"], start=1):
        saved = json.loads((run.results_dir / case_id / f"run-{index}.json").read_text())
        assert saved["side"] == side
        sides.setdefault(side, []).extend(saved["commands"])
    return sides


def test_slurm_ab_wraps_the_candidate_inside_srun(run_suite, in_allocation):
    """The candidate's prefix and settings run inside the Slurm step, around the agent
    srun starts, and the reference's commands carry neither."""
    run = run_suite("-k", "1n2g", "--perf-launcher", "slurm", *TINY, "--perf-candidate-prefix",
                    "nice -n 1", "--perf-candidate-env", "RN50_AB_TEST=1")
    assert run.outcome.ret in (0, 1), run.output  # the verdict is the host's to give
    row = run.cases["1n2g_fp32_b2"]
    assert row["run_order"] == ["reference", "candidate"]
    assert row["reference"]["median_ips"] > 0 and row["candidate"]["median_ips"] > 0
    sides = ab_commands(run, "1n2g_fp32_b2")
    (candidate,) = sides["candidate"]
    assert candidate[0] == "srun"
    wrapped = candidate.index("nice")
    assert candidate[wrapped:wrapped + 5] == ["nice", "-n", "1", "env", "RN50_AB_TEST=1"]
    (reference,) = sides["reference"]
    assert reference[0] == "srun" and "nice" not in reference and "RN50_AB_TEST=1" not in \
        reference
    assert processes_mentioning(str(run.results_dir)) == []


def test_mpirun_ab_wraps_the_candidate_on_every_node(run_suite, hostfile):
    run = run_suite("-k", "2n1g", "--perf-launcher", "mpirun", "--perf-hostfile", str(hostfile),
                    *TINY, "--perf-candidate-env", "RN50_AB_TEST=1")
    assert run.outcome.ret in (0, 1), run.output
    row = run.cases["2n1g_fp32_b2"]
    assert row["run_order"] == ["reference", "candidate"]
    assert row["reference"]["median_ips"] > 0 and row["candidate"]["median_ips"] > 0
    (candidate,) = ab_commands(run, "2n1g_fp32_b2")["candidate"]
    assert candidate[0] == "mpirun" and "RN50_AB_TEST=1" in candidate
    assert processes_mentioning(str(run.results_dir)) == []
