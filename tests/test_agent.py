"""The suite's agent of one node (perf_tests/runs/agent.py), started for real: torchrun's
variables for each worker, every worker ended once one fails, the failures reported first
observed first; its use by the launchers is tested through real sessions elsewhere."""
import subprocess
import sys

from conftest import REPO_ROOT
from perf_tests.runs.agent import AGENT_EXIT_MARK
from perf_tests.runs.outcome import marked_lines_of, rank_exits

# A stand-in worker: prints its variables; rank 1 fails at once where asked, rank 0 then waits
# for the agent to end it.
WORKER = """
import json, os, sys, time
names = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
         "OMP_NUM_THREADS")
print("VARS " + json.dumps({name: os.environ.get(name) for name in names}), flush=True)
if sys.argv[1] == "fail":
    if os.environ["RANK"] == "1":
        sys.exit(7)
    time.sleep(60)
"""


def agent(tmp_path, workers, how):
    (tmp_path / "stand_in.py").write_text(WORKER)
    return subprocess.run([sys.executable, "-m", "perf_tests.runs.agent", "--nproc-per-node",
                           str(workers), "-m", "stand_in", how],
                          cwd=tmp_path, env={"PYTHONPATH": f"{REPO_ROOT}:{tmp_path}"},
                          capture_output=True, text=True, timeout=30)


def test_each_worker_gets_torchruns_variables_of_one_node(tmp_path):
    done = agent(tmp_path, 2, "ok")
    assert done.returncode == 0, done.stderr
    seen = sorted(marked_lines_of(done.stdout, "VARS "), key=lambda worker: worker["RANK"])
    assert seen == [{"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2",
                     "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "0", "MASTER_ADDR": "127.0.0.1",
                     "OMP_NUM_THREADS": "1"} for rank in (0, 1)]


def test_a_failed_worker_ends_the_others_and_is_reported_first(tmp_path):
    done = agent(tmp_path, 2, "fail")   # rank 0 would sleep 60 s: the timeout is 30
    assert done.returncode == 1
    assert rank_exits(done.stderr) == [(1, 7), (0, -15)]
    assert marked_lines_of(done.stderr, AGENT_EXIT_MARK)[0] == {"rank": 1, "exitcode": 7,
                                                                "first": True}


def test_without_a_module_it_says_what_it_needs(tmp_path):
    done = subprocess.run([sys.executable, "-m", "perf_tests.runs.agent", "--nproc-per-node",
                           "1"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1].endswith(
        "error: -m MODULE is required: the workers' module, then its arguments")
