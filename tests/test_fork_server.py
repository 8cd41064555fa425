"""The fork server (rn50_model/fork_server.py) and the suite's side of it
(perf_tests/runs/fork_servers.py), started for real: the suite's agent has its workers forked by
one server a session, each a new process with the launch's variables and streams, known by its
token, ended with its agent, and started fresh where no server can fork it. One server of one
environment serves the module's tests (its imports, torch's, are paid once)."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import REPO_ROOT
from perf_tests.runs.fork_servers import READ_BY_THE_RUN, ServerFolder, server_key
from perf_tests.runs.processes import describe_process, processes_with_token
from perf_tests.runs.outcome import marked_lines_of, rank_exits
from rn50_model.fork_server import OWNER_FILE
from rn50_model.host_state import SERVERS_VARIABLE, TOKEN_VARIABLE, alive, process_mark

# A stand-in worker: says whether torch was imported before it started (a forked worker's
# server imported it), its pid and parent, and the variables the agent set; rank 1 fails where
# asked, and every rank sleeps where asked, for its agent to be killed.
WORKER = """
import json, os, sys, time
names = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "OMP_NUM_THREADS", "RN50_PERF_TOKEN")
print("SEEN " + json.dumps({"torch": "torch" in sys.modules, "pid": os.getpid(),
                            "parent": os.getppid(), "cwd": os.getcwd(), "argv": sys.argv[1:],
                            "nice": os.getpriority(os.PRIO_PROCESS, 0),
                            **{name: os.environ.get(name) for name in names}}), flush=True)
print("to stderr", file=sys.stderr, flush=True)
if sys.argv[1] == "fail" and os.environ["RANK"] == "1":
    sys.exit(7)
if sys.argv[1] in ("fail", "sleep"):
    time.sleep(60)
"""


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    folder = ServerFolder()
    work = tmp_path_factory.mktemp("forked")
    (work / "stand_in.py").write_text(WORKER)
    yield folder, work
    folder.close()


def agent_command(workers: int, how: str) -> list[str]:
    return [sys.executable, "-m", "perf_tests.runs.agent", "--nproc-per-node", str(workers),
            "-m", "stand_in", how]


def environment(folder, token="t0") -> dict:
    return {"PYTHONPATH": f"{REPO_ROOT}:{folder[1]}", SERVERS_VARIABLE: str(folder[0].path),
            TOKEN_VARIABLE: token, "PATH": os.environ["PATH"]}


def agent(servers, workers, how, token="t0"):
    return subprocess.run(agent_command(workers, how), cwd=servers[1],
                          env=environment(servers, token), capture_output=True, text=True,
                          timeout=120)


def test_two_runs_fork_new_workers_from_one_server_with_their_launchs_variables(servers):
    first, second = agent(servers, 2, "ok", "t1"), agent(servers, 2, "ok", "t2")
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    seen = [marked_lines_of(done.stdout, "SEEN ") for done in (first, second)]
    workers = [worker for run in seen for worker in run]
    assert all(worker["torch"] for worker in workers)   # imported before the worker started
    assert len({worker["pid"] for worker in workers}) == 4
    assert len({worker["parent"] for worker in workers}) == 1   # one server forked them all
    assert sorted((w["RANK"], w["WORLD_SIZE"], w["OMP_NUM_THREADS"], w["RN50_PERF_TOKEN"])
                  for w in seen[1]) == [("0", "2", "1", "t2"), ("1", "2", "1", "t2")]
    assert {worker["cwd"] for worker in workers} == {str(servers[1])}
    assert {tuple(worker["argv"]) for worker in workers} == {("ok",)}
    assert first.stderr.count("to stderr") == 2   # the agent's own streams
    assert len(list(servers[0].path.glob("*.sock"))) == 1
    # ... and one worker alone is another environment (no OMP_NUM_THREADS): another server
    assert agent(servers, 1, "ok").returncode == 0
    assert len(list(servers[0].path.glob("*.sock"))) == 2


def test_an_agent_elsewhere_on_the_host_has_its_own_server(servers):
    """A worker takes its priority, cgroup, CPUs, namespaces and limits from the server that
    forks it: an agent under `nice` (an A/B candidate's prefix, a session in a CPU quota's
    cgroup or on a test host's network) is served by a server started where it runs."""
    plain = marked_lines_of(agent(servers, 1, "ok").stdout, "SEEN ")[0]
    niced = subprocess.run(["nice", "-n", "5", *agent_command(1, "ok")], cwd=servers[1],
                           env=environment(servers), capture_output=True, text=True,
                           timeout=120)
    assert niced.returncode == 0 and "starts fresh" not in niced.stderr, niced.stderr
    niced = marked_lines_of(niced.stdout, "SEEN ")[0]
    assert plain["torch"] and niced["torch"] and plain["parent"] != niced["parent"]
    assert niced["nice"] == plain["nice"] + 5


def test_a_forked_worker_that_fails_ends_the_others_and_is_reported_first(servers):
    done = agent(servers, 2, "fail")
    assert done.returncode == 1
    assert rank_exits(done.stderr) == [(1, 7), (0, -15)]


def test_forked_workers_hold_their_token_and_die_with_their_agent(servers):
    launched = subprocess.Popen(agent_command(2, "sleep"), cwd=servers[1],
                                env=environment(servers, "killed"), stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        pids = [json.loads(launched.stdout.readline().split(" ", 1)[1])["pid"]
                for _ in range(2)]
        # Their /proc environ is their server's; the server's registry gives their own.
        assert sorted(processes_with_token("killed")) == sorted([launched.pid, *pids])
        assert sorted(describe_process(pid).split(" (")[0] for pid in pids) == \
            ["rank 0", "rank 1"]
    finally:
        launched.kill()   # SIGKILL: the agent cannot end its workers itself
        launched.wait()
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(pid) for pid in pids)
    assert processes_with_token("killed") == []


def test_without_a_server_the_workers_start_fresh_and_say_why(servers, tmp_path):
    env = {**environment(servers), SERVERS_VARIABLE: str(tmp_path / "gone")}
    done = subprocess.run(agent_command(1, "ok"), cwd=servers[1], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert marked_lines_of(done.stdout, "SEEN ")[0]["torch"] is False
    assert f"agent: fork server folder {tmp_path / 'gone'}: No such file or directory; " \
           "stand_in starts fresh" in done.stderr


def test_closing_the_folder_ends_its_servers_and_their_workers(servers):
    folder = ServerFolder()
    env = {**environment(servers), SERVERS_VARIABLE: str(folder.path)}
    launched = subprocess.Popen(agent_command(1, "sleep"), cwd=servers[1], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    worker = json.loads(launched.stdout.readline().split(" ", 1)[1])["pid"]
    server = int(next(folder.path.glob("*.pid")).read_text())
    folder.close()
    assert launched.wait(timeout=10) == 1   # its worker was killed under it
    assert not alive(worker) and not alive(server) and not folder.path.exists()


def test_a_server_serves_one_environment_less_what_one_launch_rank_or_session_sets():
    base = {"PATH": "/bin", "OMP_PROC_BIND": "close", "RANK": "0", TOKEN_VARIABLE: "a",
            "HOME": "/root"}
    same = {**base, "RANK": "3", "MASTER_PORT": "2950", TOKEN_VARIABLE: "b",
            "TORCHELASTIC_RUN_ID": "x", "RN50_FAULT": "slow@share=0.5",
            "RN50_PERF_DEVICE_LOCK": "/tmp/lock", "PYTEST_DEBUG_TEMPROOT": "/tmp/t"}
    assert server_key(base, "/work") == server_key(same, "/work")
    assert server_key(base, "/work") != server_key({**base, "OMP_PROC_BIND": "spread"}, "/work")
    assert server_key(base, "/work") != server_key({**base, "HOME": "/home/u"}, "/work")
    # one the suite does not know may be read at import (the tests hide packages that way)
    assert server_key(base, "/work") != server_key({**base, "RN50_TEST_HIDDEN": "x"}, "/work")
    assert server_key(base, "/work") != server_key(base, "/elsewhere")
    assert server_key(base, "/work") != server_key(base, "/work", "/other/python3")


def test_a_forked_run_ends_by_the_signal_its_agent_sends(servers):
    launched = subprocess.Popen(agent_command(1, "sleep"), cwd=servers[1],
                                env=environment(servers), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    launched.stdout.readline()
    launched.send_signal(signal.SIGTERM)
    assert launched.wait(timeout=10) == 128 + signal.SIGTERM


def test_a_forked_probe_that_fails_is_one_line_naming_its_own_error(servers, monkeypatch):
    from perf_tests.runs.host import ProbeError, run_probe
    (servers[1] / "broken_probe.py").write_text("raise RuntimeError('the probe broke here')\n")
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT))
    with pytest.raises(ProbeError) as raised:
        run_probe(servers[1], "broken_probe", servers=servers[0])
    assert str(raised.value) == ("probing this host (python -m broken_probe) failed: "
                                 "RuntimeError: the probe broke here")   # not the agent's mark


# What the server imports, with every variable they read from os.environ recorded; C libraries
# that read theirs with getenv() at load (OpenMP's, oneDNN's) are not seen here, and none of
# theirs is one a key leaves out.
TRACKED_IMPORTS = """
import importlib, json, os
read = set()
get, has = os._Environ.__getitem__, os._Environ.__contains__
os._Environ.__getitem__ = lambda self, key: read.add(key) or get(self, key)
os._Environ.__contains__ = lambda self, key: read.add(key) or has(self, key)
from rn50_model.fork_server import PROBE_MODULES, WORKER_MODULES
for module in PROBE_MODULES + WORKER_MODULES:
    importlib.import_module(module)
print(json.dumps(sorted(read)))
"""


def test_no_import_of_the_server_reads_a_variable_its_key_leaves_out():
    """The key leaves out the suite's variables that only a run reads (READ_BY_THE_RUN) and
    pytest's, so that one server serves sessions that differ in a device lock or a fault: none
    of its imports may read one, or a session would run what another's variable set at
    import."""
    done = subprocess.run([sys.executable, "-c", TRACKED_IMPORTS], capture_output=True,
                          text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert done.returncode == 0, done.stderr
    read = json.loads(done.stdout.splitlines()[-1])
    assert "HOME" in read and "TORCHINDUCTOR_CACHE_DIR" in read   # the tracking works
    assert [name for name in read if name in READ_BY_THE_RUN or name.startswith("PYTEST_")] == []


def test_a_kept_folder_serves_the_sessions_until_its_owner_ends(monkeypatch):
    outer = ServerFolder()
    try:
        monkeypatch.setenv(SERVERS_VARIABLE, str(outer.path))
        kept = ServerFolder.for_session()
        assert kept.kept and kept.path == outer.path
        kept.close()   # the session's end: the owner's servers stay
        assert outer.path.is_dir()
        owner = (outer.path / OWNER_FILE).read_text()
        assert owner == process_mark(os.getpid())
        pid, started = owner.split()
        for gone in ("999999999 1",   # an owner that is gone
                     f"{pid} {int(started) + 1}"):   # its pid now another process's
            (outer.path / OWNER_FILE).write_text(gone)
            fresh = ServerFolder.for_session()
            assert not fresh.kept and fresh.path != outer.path
            fresh.close()
    finally:
        (outer.path / OWNER_FILE).write_text(process_mark(os.getpid()))
        outer.close()


def test_a_server_whose_imports_changed_retires_and_a_new_one_forks(servers, tmp_path):
    """A package upgraded or a source edited under a kept server: the next worker is forked by
    a new server, which imports it again; the old one ends with its last worker. In a folder
    kept for many sessions, a server that forks nothing for its idle time ends."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("VERSION = 1\n")   # imported by the server itself
    folder = ServerFolder(idle_seconds=3)
    env = {**environment(servers), SERVERS_VARIABLE: str(folder.path),
           "PYTHONPATH": f"{REPO_ROOT}:{servers[1]}:{site}"}
    try:
        runs = []
        for upgrade in (False, False, True):
            if upgrade:
                (site / "sitecustomize.py").write_text("VERSION = 2  # upgraded\n")
            done = subprocess.run(agent_command(1, "ok"), cwd=servers[1], env=env,
                                  capture_output=True, text=True, timeout=120)
            assert done.returncode == 0 and "starts fresh" not in done.stderr, done.stderr
            runs.append(marked_lines_of(done.stdout, "SEEN ")[0])
        assert all(run["torch"] for run in runs)   # all three forked
        assert runs[0]["parent"] == runs[1]["parent"] != runs[2]["parent"]
        deadline = time.monotonic() + 10
        while alive(runs[0]["parent"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(runs[0]["parent"])   # the old server ended
        assert alive(runs[2]["parent"])
        deadline = time.monotonic() + 15
        while alive(runs[2]["parent"]) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(runs[2]["parent"])   # idle for 3 s
        assert list(folder.path.glob("*.sock")) == [] and list(folder.path.glob("*.pid")) == []
    finally:
        folder.close()
