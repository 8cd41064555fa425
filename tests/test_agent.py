"""The suite's agent (perf_tests/runs/agent.py), started for real: torchrun's variables for each
worker, of one node or of one node among several that a launcher numbers, every worker ended once
one fails, the failures reported by global rank first observed first, and one line for a node
rank it cannot use; its use by the launchers is tested through real sessions elsewhere
(tests/test_launchers.py, tests/test_two_hosts.py)."""
import subprocess
import sys
import time

from conftest import REPO_ROOT
from perf_tests.runs.agent import AGENT_EXIT_MARK
from perf_tests.runs.launch import LaunchResult
from perf_tests.runs.outcome import assemble_run, marked_lines_of, rank_exits
from perf_tests.runs.processes import WaitResult

# A stand-in worker: prints its variables; rank 1 fails at once where asked, rank 0 then waits
# for the agent to end it.
WORKER = """
import json, os, sys, time
names = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
         "MASTER_PORT", "OMP_NUM_THREADS")
print("VARS " + json.dumps({name: os.environ.get(name) for name in names}), flush=True)
if sys.argv[1] == "fail":
    if os.environ["RANK"] == sys.argv[2]:
        sys.exit(7)
    time.sleep(60)
"""


def agent(tmp_path, workers, how, *options, env=None):
    (tmp_path / "stand_in.py").write_text(WORKER)
    return subprocess.run([sys.executable, "-m", "perf_tests.runs.agent", "--nproc-per-node",
                           str(workers), *options, "-m", "stand_in", *how.split()],
                          cwd=tmp_path,
                          env={"PYTHONPATH": f"{REPO_ROOT}:{tmp_path}", **(env or {})},
                          capture_output=True, text=True, timeout=30)


def test_each_worker_gets_torchruns_variables_of_one_node(tmp_path):
    done = agent(tmp_path, 2, "ok")
    assert done.returncode == 0, done.stderr
    seen = sorted(marked_lines_of(done.stdout, "VARS "), key=lambda worker: worker["RANK"])
    port = seen[0]["MASTER_PORT"]
    assert port.isdigit()   # a free one
    assert seen == [{"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2",
                     "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "0", "MASTER_ADDR": "127.0.0.1",
                     "MASTER_PORT": port, "OMP_NUM_THREADS": "1"} for rank in (0, 1)]


# Node 1 of two, numbered by its launcher as mpirun numbers its processes.
NODE_1_OF_2 = ("--nnodes", "2", "--node-rank-from", "OMPI_COMM_WORLD_RANK", "--master-addr",
               "10.0.0.1", "--master-port", "29555")


def test_a_node_numbered_by_its_launcher_gives_its_workers_global_ranks(tmp_path):
    done = agent(tmp_path, 2, "ok", *NODE_1_OF_2, env={"OMPI_COMM_WORLD_RANK": "1"})
    assert done.returncode == 0, done.stderr
    seen = sorted(marked_lines_of(done.stdout, "VARS "), key=lambda worker: worker["RANK"])
    assert seen == [{"RANK": str(2 + local), "LOCAL_RANK": str(local), "WORLD_SIZE": "4",
                     "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "1", "MASTER_ADDR": "10.0.0.1",
                     "MASTER_PORT": "29555", "OMP_NUM_THREADS": "1"} for local in (0, 1)]


def test_a_failed_worker_ends_the_others_and_is_reported_first(tmp_path):
    done = agent(tmp_path, 2, "fail 1")   # rank 0 would sleep 60 s: the timeout is 30
    assert done.returncode == 1
    assert rank_exits(done.stderr) == [(1, 7), (0, -15)]
    reported = marked_lines_of(done.stderr, AGENT_EXIT_MARK)[0]
    assert reported.pop("at") <= time.time() and reported == {"rank": 1, "exitcode": 7,
                                                              "first": True}
    # On node 1 of two, its workers are ranks 2 and 3.
    done = agent(tmp_path, 2, "fail 3", *NODE_1_OF_2, env={"OMPI_COMM_WORLD_RANK": "1"})
    assert done.returncode == 1
    assert rank_exits(done.stderr) == [(3, 7), (2, -15)]


def test_a_node_named_by_its_launcher_takes_its_place_in_the_order(tmp_path):
    """Slurm's way: the task's node name (SLURMD_NODENAME), whose place among the run's nodes is
    its rank, whatever task number Slurm gave it."""
    done = agent(tmp_path, 1, "ok", "--nnodes", "2", "--node-rank-from", "SLURMD_NODENAME",
                 "--node-order", "n7,n3", "--master-addr", "10.0.0.7", "--master-port", "29555",
                 env={"SLURMD_NODENAME": "n3", "SLURM_PROCID": "0"})
    assert done.returncode == 0, done.stderr
    [seen] = marked_lines_of(done.stdout, "VARS ")
    assert (seen["RANK"], seen["GROUP_RANK"], seen["WORLD_SIZE"]) == ("1", "1", "2")


def test_a_node_rank_it_cannot_use_is_one_line(tmp_path):
    """No launcher's number, one past the nodes, a name not among the nodes, no rank at all for
    one of several nodes: each ends before any worker starts, as a wrong rank would leave every
    worker waiting."""
    order = ("--node-rank-from", "SLURMD_NODENAME", "--node-order", "n1,n2")
    for options, env, line in [
            ((), {}, "OMPI_COMM_WORLD_RANK is not set: start the agent through the launcher that "
                     "sets it (one process per node)"),
            ((), {"OMPI_COMM_WORLD_RANK": "2"}, "node rank 2 (OMPI_COMM_WORLD_RANK) is outside "
             "the run's 2 nodes: the launcher started more processes than the case has nodes"),
            (("--nnodes", "2", "--master-port", "29555", *order), {"SLURMD_NODENAME": "n9"},
             "this node, n9 (SLURMD_NODENAME), is not among the run's nodes n1,n2 (--node-order)"),
            (("--nnodes", "2", "--master-port", "29555"), {},
             "--nnodes 2 needs this node's rank: --node-rank or --node-rank-from")]:
        done = agent(tmp_path, 1, "ok", *(options or NODE_1_OF_2), env=env)
        assert done.returncode == 2 and "VARS" not in done.stdout
        assert done.stderr.splitlines()[-1].endswith(line), done.stderr


def test_a_node_0_away_from_the_store_is_the_runs_one_line(tmp_path):
    """Told by perf_tests.runs.network that its host does not hold the store's address, node 0
    ends at once; the run's line is the agent's (runs/outcome.py), not a launcher's exit code."""
    done = agent(tmp_path, 1, "ok", *NODE_1_OF_2, "--hosts-store", "no",
                 env={"OMPI_COMM_WORLD_RANK": "0"})
    assert done.returncode == 2 and "VARS" not in done.stdout
    (tmp_path / "mpirun.err").write_text(done.stderr)
    launched = LaunchResult(WaitResult({"mpirun": 2}, False, 0.1), [], [tmp_path / "mpirun.err"],
                            [])
    outcome = assemble_run(1, tmp_path, launched, timeout=60)
    assert outcome.outcome == "error"
    assert outcome.message.startswith("run 1: node rank 0 (OMPI_COMM_WORLD_RANK) runs on ")
    assert outcome.message.endswith(
        "not on 10.0.0.1, where the other nodes look for its store: run the suite on the first "
        "node (the hostfile's first host: mpirun numbers its own host's processes first)")


def test_without_a_module_it_says_what_it_needs(tmp_path):
    done = subprocess.run([sys.executable, "-m", "perf_tests.runs.agent", "--nproc-per-node",
                           "1"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1].endswith(
        "error: -m MODULE is required: the workers' module, then its arguments")
