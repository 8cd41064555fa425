"""Fixtures shared by the suite's own tests: the repository root, small generated JPEG sets, and
an environment for launching real worker processes."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

# Imported once, before any test: pytester drops the modules a test imported when it ends, and
# numpy's extension cannot load twice in a process ("cannot load module more than once per
# process"), so a test that was the first to import it (the project imports it only where it
# draws images) failed the next one that did, in the same xdist worker.
import numpy  # noqa: F401
import pytest

from rn50_model.dataset import GeneratedDatasetSpec, ensure_generated_dataset
from tools.command import VERBS

REPO_ROOT = Path(__file__).resolve().parent.parent

# The tests start some hundreds of Python processes (suite sessions, tools, probes, workers), each
# importing the project's modules. Where the environment sets PYTHONDONTWRITEBYTECODE (the
# developers' VM does), each compiled them from source again, and every session's pytest rewrote
# the plugin's modules again: 11% of the time of the tests that run sessions, measured side by
# side (docs/development.md). The tests' own processes keep their bytecode, as a user's do.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False


@pytest.hookimpl(trylast=True)   # after pytest-xdist's own, which names each test's group
def pytest_collection_modifyitems(config, items):
    """The tests marked slow first, each group in its order (a stable sort): under make test's
    two workers the long sessions start early and the quick tests fill the end, where the last
    long one left the other worker idle for most of a minute (the two-at-a-time phase ended
    with 40-100% of the CPU idle for 50 s of its 12 minutes). pytest-xdist's workers all sort
    alike, as it requires. And each test's xdist_group kept (`grouped_ids`)."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    grouped_ids(items)


def grouped_ids(items) -> None:
    """Under `--dist loadgroup`, pytest-xdist (3.8) names a test's xdist_group by appending
    `@group` to the test's id in `item._nodeid`, which pytest 9.2 no longer reads: its ids are
    structured (`item._id`; pytest-dev/pytest-xdist#1386). The groups were then silently
    ignored, and both workers ran the session that the tests of one group share, each for the
    tests it drew (the installed suite's `pip install` and its recording, 33 s, twice). The id
    xdist meant, where it set one that pytest does not show; nothing where pytest reads it."""
    for item in items:
        meant = vars(item).get("_nodeid")
        if meant and meant != item.nodeid:
            from _pytest.nodeid import NodeId   # pytest 9.2's, where the ids differ
            item._id = NodeId.parse(meant)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def jpeg_folder(tmp_path_factory) -> Path:
    """A small ImageNet-style folder of generated JPEGs: 4 classes x 8 images."""
    spec = GeneratedDatasetSpec(num_classes=4, images_per_class=8)
    return ensure_generated_dataset(spec, cache_root=tmp_path_factory.mktemp("jpegs"))


def repository_importable(env: dict | None = None) -> dict:
    """`env` (default: this process's) with the repository on PYTHONPATH, so that a process
    started in another folder imports the project as one started in the root does."""
    env = dict(os.environ if env is None else env)
    paths = list(filter(None, env.get("PYTHONPATH", "").split(os.pathsep)))
    env["PYTHONPATH"] = os.pathsep.join(paths if str(REPO_ROOT) in paths
                                        else [str(REPO_ROOT), *paths])
    return env


# Every verb of `rn50-perf` (tools/command.py): each tool a user runs.
TOOLS = list(VERBS)


def run_tool(verb: str, *arguments, cwd: Path = REPO_ROOT, env: dict | None = None,
             timeout: float = 120) -> subprocess.CompletedProcess:
    """`rn50-perf VERB ARGUMENTS` as a user runs it, from `cwd` (as `python3 -m tools VERB`,
    which runs the same in a checkout that is not installed)."""
    return subprocess.run([sys.executable, "-m", "tools", verb, *map(str, arguments)],
                          cwd=cwd, env=repository_importable(env), capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture
def worker_env(tmp_path) -> dict:
    """Environment for a worker subprocess: the repository importable, data cache private."""
    env = repository_importable()
    env["RN50_DATA_CACHE"] = str(tmp_path / "data-cache")
    env.pop("RN50_FAULT", None)
    return env


pytest_plugins = ["pytester"]

# The fastest real case: tiny images, one warm-up and two timed iterations a run, one CPU thread
# per worker. Under `pytest -n 2` two sessions share the two cores; with a thread per core each,
# OpenMP's spinning threads fight and a run slows down 30-fold, which no verdict band survives.
TINY_CASE_ARGS = ["--perf-set", "image-size=32", "--perf-set", "warmup=1", "--perf-set",
                  "iters=2", "--perf-precisions", "fp32", "--perf-set", "threads=1"]


# The tiny workload of one worker run (tools/worker_runs.py), as the hung-rank tests run it.
TINY_WORKER_RUN = {"device": "cpu", "precision": "fp32", "batch_per_device": 2, "image_size": 32,
                   "warmup_iters": 1, "timed_iters": 2, "threads": 1}
# How many times a whole tiny run on this machine a hung rank gets to reach its stop: a run's
# start-up (torchrun, importing torch in each rank, the first step) is most of it, and what
# else the host does between the calibration and the test may slow it down a few times.
HANG_MARGIN = 3
HANG_FLOOR_S = 20


@pytest.fixture(scope="session")
def hang_timeout() -> int:
    """The --perf-set timeout a hung-rank test gives its run, derived from this machine:
    HANG_MARGIN times a real tiny run of two ranks here, timed from start to end, and at least
    HANG_FLOOR_S. A fixed 60 s was longer than needed on a quiet host (a run takes about 8 s) and
    not sure to be enough on a slow or loaded one (rank 1 once took over 25 s to reach its
    stop)."""
    import math
    import time

    from tools.worker_runs import worker_run
    started = time.monotonic()
    record = worker_run(TINY_WORKER_RUN, nproc=2, timeout=600)
    assert record.get("outcome") == "ok", record
    return max(HANG_FLOOR_S, math.ceil(HANG_MARGIN * (time.monotonic() - started)))


def empty_baseline(path: Path) -> Path:
    """A baseline file with no entries: what --perf-baseline-file names must exist."""
    path.write_text('{"schema_version": 1, "entries": {}}\n')
    return path


def without_file_permission_override() -> list[str]:
    """A command prefix under which file permissions hold: the tests run as root, who writes
    into read-only folders, so root runs the command without CAP_DAC_OVERRIDE (setpriv)."""
    if os.geteuid() != 0:
        return []
    if not shutil.which("setpriv"):
        pytest.skip("running as root without setpriv (util-linux) to drop CAP_DAC_OVERRIDE")
    dropped = "-dac_override,-dac_read_search"
    return ["setpriv", f"--bounding-set={dropped}", f"--inh-caps={dropped}"]


@pytest.fixture
def repo_copy(tmp_path) -> Path:
    """A checkout of the suite in a folder of its own, for what a session does to its
    repository (the default results folder is `<repository>/perf_results/<time>`)."""
    copy = tmp_path / "checkout"
    ignore = shutil.ignore_patterns("__pycache__", "perf_results")
    for name in ("perf_tests", "rn50_model", "tools"):
        shutil.copytree(REPO_ROOT / name, copy / name, ignore=ignore)
    for name in ("conftest.py", "pytest.ini"):
        shutil.copy(REPO_ROOT / name, copy / name)
    return copy


@pytest.fixture(scope="session")
def shared_data_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("rn50-data-cache")


# A kept server that forked nothing for this long ends: most sessions share one environment,
# and a server of another (a test's own variable, another PYTHONPATH) is rarely asked again.
KEPT_SERVER_IDLE_SECONDS = 20


@pytest.fixture(scope="session", autouse=True)
def kept_fork_servers(tmp_path_factory):
    """One folder of fork servers for every session this test process starts, kept until it
    ends (perf_tests/runs/fork_servers.py, ServerFolder.for_session): the sessions of one stack
    share a server, whose imports (torch, torch._dynamo, the worker: about 3 s of a core) they
    each paid before. A test that needs its session's own folder removes the variable."""
    from perf_tests.runs.fork_servers import ServerFolder
    from rn50_model.host_state import SERVERS_VARIABLE
    folder = ServerFolder(idle_seconds=KEPT_SERVER_IDLE_SECONDS)
    os.environ[SERVERS_VARIABLE] = str(folder.path)
    yield folder
    os.environ.pop(SERVERS_VARIABLE, None)
    folder.close()


@pytest.fixture(scope="session")
def sessions_home(tmp_path_factory) -> Path:
    """The HOME of every session a test starts: one for all, since torch's imports read it
    (so a server serves only sessions of one HOME), where pytester gives each test its own."""
    return tmp_path_factory.mktemp("sessions-home")


def session_subprocess(command: list, cwd: Path, env: dict, timeout: float) -> pytest.RunResult:
    """`command` (a pytest session) run in `cwd` with `env` as a user's shell runs it, stdin
    closed: its outcome as pytester gives one. Not through pytester's own runner, which puts
    each test's folder first on PYTHONPATH: every session's workers would be of another
    environment, and none would share a fork server."""
    import time
    env.pop("USERPROFILE", None)   # pytester's home for Windows, a test's own
    started = time.monotonic()
    done = subprocess.run(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout)
    return pytest.RunResult(done.returncode, done.stdout.splitlines(), done.stderr.splitlines(),
                            time.monotonic() - started)


class SuiteRun:
    """One real `pytest perf_tests ...` session in a subprocess, and what it left behind."""

    def __init__(self, outcome, results_dir: Path, baseline_file: Path, cwd: Path) -> None:
        self.outcome = outcome
        self.results_dir = results_dir
        self.baseline_file = baseline_file
        self.cwd = cwd   # where the session ran

    @property
    def output(self) -> str:
        return "\n".join(self.outcome.outlines + self.outcome.errlines)

    @property
    def results(self) -> dict:
        import json
        return json.loads((self.results_dir / "results.json").read_text())

    @property
    def cases(self) -> dict:
        """The session's rows; each one's keys are all declared by its kind's type
        (perf_tests/core/rows.py), so every real session of the tests checks the schema."""
        from perf_tests.core.row_values import row_of
        cases = self.results["cases"]
        for case_id, row in cases.items():
            typed = row_of(case_id, row)
            undeclared = sorted(typed.unknown) + [
                f"{side}.{key}" for side in ("reference", "candidate")
                for key in getattr(getattr(typed, side, None), "unknown", {})]
            assert not undeclared, (f"{case_id}: results.json holds keys its {typed.kind} row "
                                    f"type does not declare: {undeclared}")
        return cases

    def baseline(self) -> dict:
        import json
        return json.loads(self.baseline_file.read_text())


def session_baseline_file(args, baseline: dict | None, baseline_file: Path | None,
                          default: Path) -> Path:
    """The --perf-baseline-file of a test's session: `baseline_file` as given, else `default`;
    `baseline` entries are written into it first."""
    import json
    if baseline_file is None:
        baseline_file = default
        # A named baseline file must exist unless the session records it; an A/B session
        # reads none (its tests check that it writes none either).
        if baseline is None and not any(
                str(arg).startswith(("--perf-update-baselines", "--perf-candidate"))
                for arg in args):
            empty_baseline(baseline_file)
    if baseline is not None:
        baseline_file.write_text(json.dumps(baseline))
    return baseline_file


def suite_arguments(args, results_dir: Path, baseline_file: Path, host_state: bool,
                    suite: tuple[str, ...] = (), plots: bool = False) -> list:
    """What follows `pytest` in a test's session: the suite, its private results folder and
    baseline file, and `host_state`: judge the host's marks (the tests run two at a time, so
    the other one marks most runs busy: a test not about the host's state ignores them). Without
    the hypothesis plugin that the tests' environment installs and a user's has not: loading it
    cost each session 0.6 s of its start (9.1 against 8.4 s for a session of one tiny run).
    `suite`: how the suite is named, where not as the checkout's folder (`--pyargs perf_tests`
    for an installed one). `plots`: draw the figures; a test that does not read them leaves
    them out (--perf-set plots=off), as loading matplotlib and drawing cost a session about a
    second of a core here, several hundred sessions in all."""
    return [*(suite or [str(REPO_ROOT / "perf_tests")]), "-p", "no:cacheprovider", "-p",
            "no:hypothesispytest",
            "-rA", "--perf-results", str(results_dir), "--perf-baseline-file", str(baseline_file),
            *([] if host_state else ["--perf-ignore-host-state"]),
            *([] if plots else ["--perf-set", "plots=off"]), *args]


@pytest.fixture
def run_suite(pytester, monkeypatch, tmp_path, shared_data_cache, sessions_home):
    """Run the suite as a user does (`pytest <repo>/perf_tests ...`) with a private results
    folder, baseline file and device lock; `baseline` entries are written first."""
    monkeypatch.setenv("RN50_PERF_DEVICE_LOCK", str(tmp_path / "device-lock"))
    monkeypatch.setenv("RN50_DATA_CACHE", str(shared_data_cache))
    monkeypatch.setenv("HOME", str(sessions_home))
    monkeypatch.delenv("RN50_FAULT", raising=False)
    counter = iter(range(1, 1000))

    def run(*args, baseline: dict | None = None, baseline_file: Path | None = None,
            results_dir: Path | None = None, timeout: float = 900,
            permissions_hold: bool = False, prefix: list[str] | None = None,
            host_state: bool = False, suite: tuple[str, ...] = (),
            plots: bool = False) -> SuiteRun:
        """`permissions_hold`: run it under `without_file_permission_override`; `prefix`: a
        command prefix that runs it elsewhere (on a test host: tests/two_hosts.py);
        `host_state`, `suite`, `plots`: see suite_arguments."""
        number = next(counter)
        results_dir = results_dir or tmp_path / f"results-{number}"
        baseline_file = session_baseline_file(args, baseline, baseline_file,
                                              tmp_path / f"baseline-{number}.json")
        command = suite_arguments(args, results_dir, baseline_file, host_state, suite, plots)
        if permissions_hold or prefix:
            prefix = without_file_permission_override() if permissions_hold else prefix
        else:
            prefix = []
            command.insert(0, f"--basetemp={pytester.path / f'basetemp-{number}'}")
        outcome = session_subprocess([*prefix, sys.executable, "-mpytest", *command],
                                     pytester.path, dict(os.environ), timeout)
        return SuiteRun(outcome, results_dir, baseline_file, pytester.path)

    return run


@pytest.fixture(scope="session")
def shared_suite(tmp_path_factory, shared_data_cache, sessions_home):
    """run_suite for a session that several tests read, where they differ only in what they
    assert: `shared_suite(*args, baseline=..., env=...)` in a module- or session-scoped fixture
    runs it once, as run_suite runs it (outside any one test, so not through pytester, whose
    folder and environment end with the test). `env`: variables to set (as RN50_FAULT). Its
    readers carry one `pytest.mark.xdist_group`, so that under `make test`'s `--dist loadgroup`
    one worker runs them all, and the session once; a reader that writes to its baseline file
    writes to a copy. `earlier`: files beside the results folder, by name (`s1/results.json`):
    the earlier sessions an auto band learns from."""
    def run(*args, baseline: dict | None = None, env: dict | None = None,
            timeout: float = 900, earlier: dict[str, str] | None = None,
            plots: bool = False) -> SuiteRun:
        folder = tmp_path_factory.mktemp("shared-session")
        for name, text in (earlier or {}).items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(text)
        results_dir = folder / "results"
        baseline_file = session_baseline_file(args, baseline, None, folder / "baseline.json")
        # As run_suite runs a session: no PYTEST_ADDOPTS, the sessions' home, no colours.
        environment = {name: value for name, value in os.environ.items()
                       if name not in ("PYTEST_ADDOPTS", "RN50_FAULT")}
        environment.update(RN50_PERF_DEVICE_LOCK=str(folder / "device-lock"),
                           RN50_DATA_CACHE=str(shared_data_cache), HOME=str(sessions_home),
                           PY_COLORS="0", **(env or {}))
        outcome = session_subprocess(
            [sys.executable, "-mpytest", f"--basetemp={folder / 'basetemp'}",
             *suite_arguments(args, results_dir, baseline_file, host_state=False,
                              plots=plots)], folder, environment, timeout)
        return SuiteRun(outcome, results_dir, baseline_file, folder)

    return run


# What the tiny recording below kept: the file held it before.
KEPT_ENTRIES = {"1n8g_amp_b256": {"median_ips": 6154.66, "source": "published"}}
# The tests that read the tiny recording: one worker runs them (make test's --dist loadgroup).
READS_TINY_RECORDING = pytest.mark.xdist_group("tiny-recording")


@pytest.fixture(scope="session")
def tiny_recording(shared_suite):
    """1n1g_fp32_b2 recorded from two tiny runs (forced: a baseline wants ten) into a baseline
    file that held KEPT_ENTRIES, under the default --perf-explain (auto), which stores the
    case's operator profile with its entry. Read by the update round trip
    (test_suite_sessions), the memory gate (test_footprint_sessions) and the stored profile
    (test_explain_sessions)."""
    return shared_suite("-k", "1n1g", "--perf-batches", "2", *TINY_CASE_ARGS,
                        "--perf-update-baselines=force", "--perf-runs", "2",
                        baseline=baseline_document(KEPT_ENTRIES))


# What pip needs to build the package from a copy of this tree: pyproject.toml names these.
PACKAGE_SOURCES = ("pyproject.toml", "README.md", "requirements.txt", "requirements-optional.txt",
                   "requirements-test.txt", "perf_tests", "rn50_model", "tools")
# The tests that use the installed suite: one worker builds it (make test's --dist loadgroup).
READS_INSTALLED_SUITE = pytest.mark.xdist_group("installed-suite")


@pytest.fixture(scope="session")
def installed_suite(tmp_path_factory) -> Path:
    """The bin folder of a fresh virtual environment into which torch (`pip install
    torch==2.13.0`, as README says) and the suite are installed for real, not editable, from a
    copy of this tree (pip builds in the source folder, which stays the checkout's): the suite as
    a user's CI project has it. Without compiling every installed module to bytecode
    (--no-compile: 37 s against 115 s for torch and the suite on the busy 2-core VM; a process
    compiles what it imports). Its readers carry READS_INSTALLED_SUITE."""
    folder = tmp_path_factory.mktemp("installed")
    source = folder / "rn50-perf"
    source.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "perf_results", "*.egg-info", "build")
    for name in PACKAGE_SOURCES:
        if (REPO_ROOT / name).is_dir():
            shutil.copytree(REPO_ROOT / name, source / name, ignore=ignore)
        else:
            shutil.copy(REPO_ROOT / name, source / name)
    venv = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    done = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                           "--no-compile", "torch==2.13.0", str(source)], capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return venv / "bin"


def processes_mentioning(text: str) -> list[str]:
    """Command lines of live processes that mention `text` (a results folder of the test)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                command = handle.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{pid}/stat") as handle:
                state = handle.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in command and state != "Z":
            found.append(f"{pid} {command}")
    return found


def available_or_skip(reason: str | None) -> None:
    """Skip with the reason a real part cannot run here (Slurm not installed, not root...)."""
    if reason:
        pytest.skip(reason)


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory):
    """A real one-node Slurm cluster for the session (tests/slurm_cluster.py); skips with the
    reason where Slurm is not installed or the tests do not run as root."""
    from slurm_cluster import SlurmCluster, slurm_available

    available_or_skip(slurm_available())
    with SlurmCluster(tmp_path_factory.mktemp("slurm")) as started:
        yield started


@pytest.fixture(scope="session")
def two_hosts(tmp_path_factory):
    """Two hosts on this machine for the session (tests/two_hosts.py); skips with the reason
    where namespaces cannot be made (not root, no iproute2)."""
    from two_hosts import TwoHosts, two_hosts_available

    available_or_skip(two_hosts_available())
    with TwoHosts(tmp_path_factory.mktemp("hosts")) as started:
        yield started


@pytest.fixture(scope="session")
def two_host_slurm(two_hosts, tmp_path_factory):
    """A real Slurm cluster across the two hosts: a node on each, clients on node 1."""
    from slurm_cluster import SlurmCluster, slurm_available

    available_or_skip(slurm_available())
    with SlurmCluster(tmp_path_factory.mktemp("slurm2"), hosts=two_hosts) as started:
        yield started


def baseline_document(entries: dict, hardware: str | None = None) -> dict:
    """A baseline file's document; one that names no `hardware` is any machine's (a named one
    that is not this host's makes its entries not comparable)."""
    return {"schema_version": 1, **({"hardware": hardware} if hardware else {}),
            "entries": entries}


# Imported first by every Python process whose PYTHONPATH starts with its folder (the site
# module imports `sitecustomize`): the named packages then fail to import, as on a host that
# lacks them (the project's GPU machine has no DALI, ruptures or mlperf-logging).
HIDING_SITECUSTOMIZE = '''
import os
import sys

HIDDEN = tuple(filter(None, os.environ.get("RN50_TEST_HIDDEN_PACKAGES", "").split(",")))


class HiddenPackages:
    def find_spec(self, name, path=None, target=None):
        if any(name == hidden or name.startswith(hidden + ".") for hidden in HIDDEN):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, HiddenPackages())
'''


@pytest.fixture
def hide_packages(monkeypatch, tmp_path):
    """hide_packages("ruptures", "nvidia.dali"): every Python process this test starts from
    then on (pytest sessions, torchrun workers, tools) fails to import them."""
    folder = tmp_path / "hide-packages"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(HIDING_SITECUSTOMIZE)

    def hide(*names: str) -> dict:
        monkeypatch.setenv("RN50_TEST_HIDDEN_PACKAGES", ",".join(names))
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
            filter(None, [str(folder), str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
        return dict(os.environ)

    return hide


@pytest.fixture
def mode_context(tmp_path, monkeypatch):
    """`made(**options)`: a mode's `Context` on a CPU host under the smoke profile, its results,
    baseline file and device lock in this test's folder; nothing is probed or launched."""
    from perf_tests.cli.settings import Settings
    from perf_tests.context.baseline_store import BaselineStore
    from perf_tests.context.context import make_context
    from perf_tests.core.cases import SMOKE
    from perf_tests.results.folder import ResultsFolder
    from perf_tests.runs.device_lock import DEVICE_LOCK_VARIABLE
    from perf_tests.runs.host import HostFacts
    from perf_tests.runs.launchers import make_launcher

    monkeypatch.setenv(DEVICE_LOCK_VARIABLE, str(tmp_path / "device-lock"))

    def made(**options):
        settings = Settings(profile=SMOKE, **options)
        return make_context(
            requested=settings, settings=settings.resolved(SMOKE), profile=SMOKE,
            host=HostFacts({"device_count": 0, "cpu_count": 2, "hardware": "cpu"}),
            rootdir=tmp_path, results=ResultsFolder(tmp_path / "results"),
            baselines=BaselineStore(tmp_path / "baseline.json", "cpu"),
            launcher=make_launcher("local", None), progress=print)
    return made
