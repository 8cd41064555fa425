"""The pytest plugin: command-line options and hooks only; the work is in `session.py`.

Registered by the repository's root conftest.py. The options are the rows of
`settings.OPTIONS`; every one states its default, and a bad value is a usage error naming the
option.
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from pathlib import Path

import pytest

from rn50_model.config import ConfigError
from rn50_model.dataset import resolve_data_dir

from . import time_to_train
from .exports import GITHUB_STEP_SUMMARY, ExportRequests, write_exports
from .max_batch import DEFAULT_BATCH_STEP, DEFAULT_MAX_BATCH_LIMIT
from .report import (NoPlot, ab_plot_sources, batch_plot, markdown_report, scaling_plot,
                     split_kinds, terminal_table)
from .results import ResultsFolder, ResultsFolderError, create_default_folder, create_new_folder
from .session import PerfSession, PerfUsageError
from .settings import OPTIONS, Settings, settings_of
from .time_to_train import TimeToTrain, split_cases
from .verdicts import SKIPPED

SESSION_KEY = pytest.StashKey[PerfSession]()
TIME_TO_TRAIN_KEY = pytest.StashKey[TimeToTrain]()
SIGNALS_KEY = pytest.StashKey[dict]()
# A CI runner that cancels or times out a job sends SIGTERM (a closed terminal, SIGHUP): end the
# session as Ctrl-C does, so every launched process tree is ended and the finished runs kept.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
PREPARE_ERROR_KEY = pytest.StashKey[str]()
CREATED_RESULTS_KEY = pytest.StashKey[bool]()
RESULTS_INPUT = "rn50_perf_results"
XDIST_GROUP = "rn50-perf-devices"
TIME_TO_TRAIN_MODULE = "test_time_to_train.py"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("rn50-perf", "ResNet50 v1.5 training throughput suite")
    for option in OPTIONS:
        option.add_to(group.addoption)


def settings_from(config: pytest.Config) -> Settings:
    """The command line as `Settings`, after the rules between options: each broken rule is one
    usage-error line."""
    settings = settings_of(config.getoption)
    if settings.launcher == "mpirun" and not settings.hostfile:
        raise pytest.UsageError("--launcher mpirun needs --hostfile FILE (one line per node, "
                                "e.g. 'node1 slots=8')")
    if settings.hostfile and not Path(settings.hostfile).is_file():
        raise pytest.UsageError(f"--hostfile {settings.hostfile} is not a file; pass an OpenMPI "
                                "hostfile")
    if settings.max_runs and settings.runs and settings.max_runs < settings.runs:
        raise pytest.UsageError(f"--perf-max-runs {settings.max_runs} is below --perf-runs "
                                f"{settings.runs}; raise it or leave it out")
    if settings.candidate and settings.update_baselines:
        raise pytest.UsageError("--update-baselines with a candidate (--perf-candidate-*): an "
                                "A/B session compares two stacks and never writes a baseline; "
                                "drop one of them")
    for single_stack, asked in (("--perf-find-max-batch", settings.find_max_batch),
                                ("--perf-time-to-train", settings.time_to_train)):
        if settings.candidate and asked:
            raise pytest.UsageError(f"{single_stack} with a candidate (--perf-candidate-*): it "
                                    "runs on one stack; run it in a session of its own")
    for flag, value in (("--perf-batch-step", settings.batch_step),
                        ("--perf-max-batch-limit", settings.max_batch_limit)):
        if value is not None and not settings.find_max_batch:
            raise pytest.UsageError(f"{flag} applies to the max batch search; add "
                                    "--perf-find-max-batch")
    batch_step = settings.batch_step or DEFAULT_BATCH_STEP
    max_batch_limit = settings.max_batch_limit or DEFAULT_MAX_BATCH_LIMIT
    if max_batch_limit < batch_step:
        raise pytest.UsageError(f"--perf-max-batch-limit {max_batch_limit} is below "
                                f"--perf-batch-step {batch_step}; raise the limit or lower "
                                "the step")
    if settings.data_dir:
        if settings.data_backend == "synthetic":
            raise pytest.UsageError("--data-dir needs a real-data backend; add --data-backend "
                                    "dali-gpu, dali-cpu or torch")
        try:
            resolve_data_dir(settings.data_dir)
        except ConfigError as error:
            raise pytest.UsageError(f"--data-dir: {error}") from None
    return settings


def is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "perf_case: a measured ResNet50 throughput case")
    settings = settings_from(config)
    rootdir = Path(config.rootpath)
    if is_xdist_worker(config):
        results_dir = Path(config.workerinput[RESULTS_INPUT])
    elif config.option.help:
        return  # nothing is measured: no results folder
    else:
        # Created (and checked writable) now, so an unwritable location is a usage error
        # before anything is measured, and a concurrent session can never get the same folder.
        results_dir = config.getoption("perf_results")
        created = results_dir is None or not results_dir.exists()
        try:
            if results_dir is None:
                results_dir = create_default_folder(rootdir)
            else:
                create_new_folder(results_dir)
        except ResultsFolderError as error:
            raise pytest.UsageError(str(error)) from None
        config.stash[CREATED_RESULTS_KEY] = created
    config.stash[SESSION_KEY] = PerfSession(settings, rootdir, results_dir,
                                            progress=progress_writer(config))
    config.stash[TIME_TO_TRAIN_KEY] = TimeToTrain(config.stash[SESSION_KEY])
    config.stash[SIGNALS_KEY] = stop_on_signals()


def pytest_unconfigure(config: pytest.Config) -> None:
    for signum, previous in config.stash.get(SIGNALS_KEY, {}).items():
        signal.signal(signum, previous)
    if config.stash.get(CREATED_RESULTS_KEY, False):
        config.stash[SESSION_KEY].results.remove_if_empty()


def progress_writer(config: pytest.Config):
    """Lines on long work (a run ended, a wait for the device lock), shown as they happen, past
    output capture: through the terminal reporter; on an xdist worker, whose terminal goes
    nowhere, on its stderr, which the controller's terminal shows. None under -qq."""
    def write(line: str) -> None:
        if config.getoption("verbose") < -1:
            return
        capture = config.pluginmanager.get_plugin("capturemanager")
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            if is_xdist_worker(config):
                sys.stderr.write(f"[{config.workerinput['workerid']}] {line}\n")
                sys.stderr.flush()
                return
            reporter = config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None:
                reporter.write_line(line)
                reporter.flush()
    return write


def stop_on_signals() -> dict:
    """SIGTERM and SIGHUP raise KeyboardInterrupt where nobody else handles them; returns the
    handlers to put back."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    replaced = {}
    for signum in STOP_SIGNALS:
        if signal.getsignal(signum) is signal.SIG_DFL:
            replaced[signum] = signal.signal(signum, _interrupt)
    return replaced


def _interrupt(signum: int, frame) -> None:
    raise KeyboardInterrupt(f"pytest received {signal.Signals(signum).name}")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """pytest-xdist: every worker writes into the one results folder the controller chose."""
    node.workerinput[RESULTS_INPUT] = str(node.config.stash[SESSION_KEY].results.path)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The time-to-train test module is collected only where a `_ttt` case is asked for
    (--perf-time-to-train or --perf-case ..._ttt): otherwise the session is as before."""
    if collection_path.name != TIME_TO_TRAIN_MODULE:
        return None
    asked = config.getoption("perf_time_to_train") or any(
        case.time_to_train for case in config.getoption("perf_case"))
    return None if asked else True


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    fixture = next((name for name in ("perf_case", "ttt_case") if name in metafunc.fixturenames),
                   None)
    if fixture is None:
        return
    session = metafunc.config.stash[SESSION_KEY]
    try:
        session.prepare()
        if fixture == "perf_case":
            cases = [case for case in session.cases() if not case.time_to_train]
        else:
            cases = metafunc.config.stash[TIME_TO_TRAIN_KEY].cases()
    except PerfUsageError as error:
        metafunc.config.stash[PREPARE_ERROR_KEY] = str(error)
        cases = []
    metafunc.parametrize(fixture, cases, ids=[case.case_id for case in cases])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if PREPARE_ERROR_KEY in config.stash:
        raise pytest.UsageError(config.stash[PREPARE_ERROR_KEY])
    for item in items:
        if {"perf_case", "ttt_case"} & set(getattr(item, "fixturenames", ())):
            # Cases measure the devices: under pytest-xdist --dist loadgroup they stay on one
            # worker; under any other mode a host-wide lock still runs them one at a time.
            item.add_marker(pytest.mark.perf_case)
            item.add_marker(pytest.mark.xdist_group(XDIST_GROUP))


@pytest.fixture(scope="session")
def perf_session(request: pytest.FixtureRequest) -> PerfSession:
    return request.config.stash[SESSION_KEY]


@pytest.fixture(scope="session")
def time_to_train_cases(request: pytest.FixtureRequest) -> TimeToTrain:
    return request.config.stash[TIME_TO_TRAIN_KEY]


def every_case_skipped(cases: dict) -> bool:
    return bool(cases) and all(row.get("verdict") == SKIPPED for row in cases.values())


def strictness(config: pytest.Config) -> str | None:
    """The option that makes a session without a single measured case fail, if given."""
    requested = config.stash[SESSION_KEY].requested
    return ("--require-baseline" if requested.require_baseline
            else "--perf-strict" if requested.strict else None)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Under --require-baseline or --perf-strict a session in which every case skipped fails:
    a CI gate must not be green for a host that measured nothing."""
    config = session.config
    if is_xdist_worker(config) or SESSION_KEY not in config.stash or not strictness(config):
        return
    try:
        cases = (config.stash[SESSION_KEY].results.load() or {}).get("cases", {})
    except ValueError:
        return  # the terminal summary names the unreadable file
    if session.exitstatus == pytest.ExitCode.OK and every_case_skipped(cases):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    if is_xdist_worker(config) or SESSION_KEY not in config.stash:
        return
    results: ResultsFolder = config.stash[SESSION_KEY].results
    try:
        document = results.load()
    except ValueError:
        terminalreporter.write_line(f"{results.results_file} does not read as JSON")
        return
    if not document or not document.get("cases"):
        return
    throughput_cases, ttt_cases = split_cases(document["cases"])
    if throughput_cases:
        terminalreporter.section("ResNet50 training throughput")
        for line in terminal_table(throughput_cases):
            terminalreporter.write_line(line)
    if ttt_cases:
        terminalreporter.section("ResNet50 time to train")
        for line in time_to_train.terminal_table(ttt_cases):
            terminalreporter.write_line(line)
    if every_case_skipped(document["cases"]):
        strict = strictness(config)
        terminalreporter.write_line(
            "every case skipped: nothing was measured; " + (
                f"the session fails ({strict})" if strict else
                "--require-baseline or --perf-strict make such a session fail"),
            red=bool(strict), yellow=not strict, bold=True)
    hardware = document.get("hardware", "unknown")
    title = f"ResNet50 v1.5 on {hardware}"
    report_path = results.path / "report.md"
    markdown = (markdown_report({**document, "cases": throughput_cases}) if throughput_cases
                else f"# ResNet50 v1.5 training: {hardware}\n")
    written = [str(results.results_file), str(report_path)]
    throughput, searches = split_kinds(throughput_cases)
    # Sessions of max-batch searches or time-to-train cases only have no scaling to plot.
    if throughput or not (searches or ttt_cases):
        try:
            sources = ab_plot_sources(throughput) or {"": throughput}
            written.append(str(scaling_plot(sources, results.path / "scaling.png", title)))
        except NoPlot as why:
            terminalreporter.write_line(f"no scaling plot: {why}")
    batches = batch_plot(throughput_cases, results.path / "batch.png", f"{title}: img/s by batch")
    if batches:
        written.append(str(batches))
    if ttt_cases:
        markdown += "\n" + time_to_train.markdown_section(ttt_cases)
        top1 = time_to_train.top1_plot(ttt_cases, results.path / "time_to_train.png",
                                       f"ResNet50 v1.5 top-1 against time on {hardware}")
        if top1:
            written.append(str(top1))
    report_path.write_text(markdown)
    terminalreporter.write_line("results: " + ", ".join(written))
    requested = config.stash[SESSION_KEY].requested
    requests = ExportRequests(benchmark_json=requested.benchmark_json,
                              exports=requested.exports,
                              step_summary=os.environ.get(GITHUB_STEP_SUMMARY))
    exported, errors = write_exports(requests, document, markdown, Path(config.rootpath))
    if exported:
        terminalreporter.write_line("exported: " + ", ".join(map(str, exported)))
    for error in errors:
        terminalreporter.write_line(error, red=True)
