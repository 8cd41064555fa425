"""The pytest plugin: command-line options and hooks only; the work is in `session.py`.

Registered by the repository's root conftest.py. Every option states its default; a bad value
is a usage error naming the option.
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from pathlib import Path

import pytest

from rn50_model.config import DATA_BACKENDS, LOSS_SCALES, MEMORY_FORMATS, ConfigError
from rn50_model.dataset import resolve_data_dir

from . import options, time_to_train
from .cases import PROFILES
from .explain import EXPLAIN_MODES
from .exports import GITHUB_STEP_SUMMARY, ExportRequests, write_exports
from .launchers import LAUNCHERS, Stack
from .max_batch import DEFAULT_BATCH_STEP, DEFAULT_MAX_BATCH_LIMIT
from .report import (NoPlot, ab_plot_sources, batch_plot, markdown_report, scaling_plot,
                     split_kinds, terminal_table)
from .results import ResultsFolder, ResultsFolderError, create_default_folder, create_new_folder
from .session import PerfSession, PerfUsageError, Settings
from .time_to_train import TimeToTrain, TimeToTrainSettings, split_cases
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
    add = group.addoption
    add("--perf-profile", choices=("auto", "full", "smoke"), default="auto",
        help="the matrix and protocol: full (DLPerf: 5 runs x 20 warm-up x 100 iterations at "
             "224 px) or smoke (CPU CI, minutes); default auto: full with CUDA devices, else smoke")
    add("--perf-runs", type=options.whole_number(1), default=None,
        help="independent runs per case (default: the profile's, 5 full / 3 smoke)")
    add("--perf-max-runs", type=options.whole_number(1), default=None,
        help="runs a case may take when its first runs do not decide (default: 3 x "
             "--perf-runs; under --update-baselines, --perf-runs)")
    add("--perf-warmup", type=options.whole_number(0), default=None,
        help="warm-up iterations per run, not timed (default: the profile's, 20 full / 2 smoke)")
    add("--perf-iters", type=options.whole_number(1), default=None,
        help="timed iterations per run (default: the profile's, 100 full / 4 smoke)")
    add("--perf-image-size", type=options.whole_number(32, 1024), default=None,
        help="image side in pixels (default: the profile's, 224 full / 64 smoke)")
    add("--perf-precisions", type=options.precision_list, default=None,
        help="comma list of fp32,tf32,amp,bf16 to measure on every topology (default: the "
             "profile's: fp32 b128 and amp b256 in full, fp32 and 1n1g bf16 in smoke)")
    add("--perf-batches", type=options.batch_list, default=None,
        help="comma list of batch sizes per device, or 'sweep' for 32,64,128,160,256 "
             "(default: the profile's batch for each precision)")
    add("--perf-case", type=options.case_id, action="append", default=[],
        help="an extra case to measure, e.g. 1n4g_bf16_b192 (repeatable; default none)")
    add("--data-backend", choices=DATA_BACKENDS, default="synthetic",
        help="input pipeline: synthetic (device-resident batch), dali-gpu, dali-cpu or torch "
             "(default synthetic)")
    add("--data-dir", default=None,
        help="ImageNet-style folder <dir>/train/<class>/*.JPEG for the real-data backends "
             "(default: a generated JPEG set, cached)")
    add("--launcher", choices=LAUNCHERS, default=None,
        help="how workers start: local (torchrun here), simulated (several torchrun agents "
             "here as nodes), slurm (srun in an allocation), mpirun (--hostfile); default "
             "simulated for smoke, local for full")
    add("--hostfile", default=None,
        help="OpenMPI hostfile for --launcher mpirun: one line per node (default none)")
    add("--baseline-file", type=Path, default=None,
        help="baseline JSON to compare with and update (default "
             "baselines/<hardware-key>.json)")
    add("--update-baselines", action="store_true", default=False,
        help="write each measured case into the baseline file, keeping all other entries "
             "(default off)")
    add("--perf-tolerance", type=options.fraction, default=None,
        help="allowed slowdown as a fraction, over every entry's own (default: the entry's, "
             "else the profile's: 0.05 full / 0.15 smoke)")
    add("--require-baseline", action="store_true", default=False,
        help="fail cases that have no comparable baseline entry (default: warn)")
    add("--perf-strict", action="store_true", default=False,
        help="fail cases whose runs stay inconclusive after --perf-max-runs (default: warn)")
    add("--perf-results", type=Path, default=None,
        help="new folder for results.json, run records, report and plot (default "
             "perf_results/<UTC time>)")
    add("--perf-timeout", type=options.seconds, default=600.0,
        help="seconds one run may take before its processes are ended (default 600)")
    add("--perf-memory-format", choices=MEMORY_FORMATS, default="auto",
        help="tensor layout: channels_last or contiguous (default auto: channels_last)")
    add("--perf-threads", type=options.whole_number(1), default=None,
        help="CPU threads per worker (default: this host's cores split across its workers)")
    add("--perf-loss-scale", choices=LOSS_SCALES, default="dynamic",
        help="amp loss scaling, dynamic or static (default dynamic)")
    add("--perf-compile", action="store_true", default=False,
        help="train through torch.compile (default off)")
    add("--perf-cuda-graphs", action="store_true", default=False,
        help="replay each training step as a CUDA graph (default off)")
    add("--perf-rdzv-port", type=options.whole_number(1, 65535), default=None,
        help="c10d rendezvous port (default: a free port here, or a random one in "
             "29400-29999 on a remote first node)")
    add("--perf-memory-limit", type=options.byte_size, default=None,
        help="memory each worker may allocate for training, e.g. 40G; beyond it the run is "
             "an oom result (default: no limit)")
    add("--perf-find-max-batch", action="store_true", default=False,
        help="instead of throughput, find per topology and precision the largest batch per "
             "device that trains without running out of memory, by short real runs (default "
             "off)")
    add("--perf-batch-step", type=options.whole_number(1), default=None,
        help="with --perf-find-max-batch: the batches tried are multiples of this (default "
             f"{DEFAULT_BATCH_STEP})")
    add("--perf-max-batch-limit", type=options.whole_number(1), default=None,
        help="with --perf-find-max-batch: the largest batch per device tried (default "
             f"{DEFAULT_MAX_BATCH_LIMIT})")
    add("--perf-explain", choices=EXPLAIN_MODES, default="auto",
        help="operator profile of a case, in a short profiled run after its timed runs: auto "
             "(on a regression, naming the operators that slowed down against the baseline's "
             "profile, and under --update-baselines, to store one), always (every measured "
             "case), never (default auto)")
    add("--perf-benchmark-json", type=options.output_file, default=None,
        help="also write the session in pytest-benchmark's JSON format, one benchmark per case, "
             "for `pytest-benchmark compare` (default: not written)")
    add("--perf-export", type=options.export_target, action="append", default=[],
        metavar="FORMAT=PATH",
        help="also write the medians for a dashboard: github-action-benchmark=PATH "
             "(customBiggerIsBetter) or bencher=PATH (Bencher Metric Format); repeatable "
             "(default none)")
    add("--perf-candidate-python", type=options.interpreter, default=None, metavar="PATH",
        help="A/B: measure each case on this stack (the reference) and on a candidate running "
             "this interpreter, runs interleaved; no baseline file involved (default: no A/B)")
    add("--perf-candidate-prefix", type=options.command_prefix, default=None, metavar="CMD",
        help="A/B: a command that wraps each candidate launch, e.g. 'apptainer exec --nv "
             "new.sif' (default none)")
    add("--perf-candidate-env", type=options.env_setting, action="append", default=[],
        metavar="KEY=VALUE",
        help="A/B: a setting in the candidate's environment, e.g. NCCL_ALGO=Ring (repeatable; "
             "default none)")
    add("--perf-time-to-train", action="store_true", default=False,
        help="also train to a target top-1: the profile's ..._ttt cases, gated on "
             "time-to-train and accuracy (default off)")
    add("--perf-epochs", type=options.whole_number(1), default=None,
        help="most epochs a time-to-train run trains (default: the profile's, 90 full / 8 "
             "smoke)")
    add("--perf-target-top1", type=options.top1, default=None,
        help="validation top-1 at which a time-to-train run stops (default: the profile's, "
             "0.759 full (MLPerf's) / 0.8 smoke)")
    add("--perf-accuracy-tolerance", type=options.fraction, default=None,
        help="allowed top-1 drop below the baseline's, absolute (default: the profile's, 0.005 "
             "full / 0.05 smoke)")


def settings_from(config: pytest.Config) -> Settings:
    get = config.getoption
    profile_name = get("perf_profile")
    if get("launcher") == "mpirun" and not get("hostfile"):
        raise pytest.UsageError("--launcher mpirun needs --hostfile FILE (one line per node, "
                                "e.g. 'node1 slots=8')")
    if get("hostfile") and not Path(get("hostfile")).is_file():
        raise pytest.UsageError(f"--hostfile {get('hostfile')} is not a file; pass an OpenMPI "
                                "hostfile")
    if get("perf_max_runs") and get("perf_runs") and get("perf_max_runs") < get("perf_runs"):
        raise pytest.UsageError(f"--perf-max-runs {get('perf_max_runs')} is below --perf-runs "
                                f"{get('perf_runs')}; raise it or leave it out")
    candidate = candidate_stack(config)
    if candidate and get("update_baselines"):
        raise pytest.UsageError("--update-baselines with a candidate (--perf-candidate-*): an "
                                "A/B session compares two stacks and never writes a baseline; "
                                "drop one of them")
    for single_stack in ("perf_find_max_batch", "perf_time_to_train"):
        if candidate and get(single_stack):
            raise pytest.UsageError(f"--{single_stack.replace('_', '-')} with a candidate "
                                    "(--perf-candidate-*): it runs on one stack; run it in a "
                                    "session of its own")
    for name in ("perf_batch_step", "perf_max_batch_limit"):
        if get(name) is not None and not get("perf_find_max_batch"):
            raise pytest.UsageError(f"--{name.replace('_', '-')} applies to the max batch "
                                    "search; add --perf-find-max-batch")
    batch_step = get("perf_batch_step") or DEFAULT_BATCH_STEP
    max_batch_limit = get("perf_max_batch_limit") or DEFAULT_MAX_BATCH_LIMIT
    if max_batch_limit < batch_step:
        raise pytest.UsageError(f"--perf-max-batch-limit {max_batch_limit} is below "
                                f"--perf-batch-step {batch_step}; raise the limit or lower "
                                "the step")
    if get("data_dir"):
        if get("data_backend") == "synthetic":
            raise pytest.UsageError("--data-dir needs a real-data backend; add --data-backend "
                                    "dali-gpu, dali-cpu or torch")
        try:
            resolve_data_dir(get("data_dir"))
        except ConfigError as error:
            raise pytest.UsageError(f"--data-dir: {error}") from None
    return Settings(
        profile=None if profile_name == "auto" else PROFILES[profile_name],
        runs=get("perf_runs"), max_runs=get("perf_max_runs"), warmup_iters=get("perf_warmup"),
        timed_iters=get("perf_iters"), image_size=get("perf_image_size"),
        precisions=get("perf_precisions"), batches=get("perf_batches"),
        extra_cases=tuple(get("perf_case")), data_backend=get("data_backend"),
        data_dir=get("data_dir"), launcher=get("launcher"), hostfile=get("hostfile"),
        baseline_file=get("baseline_file"), update_baselines=get("update_baselines"),
        tolerance=get("perf_tolerance"), require_baseline=get("require_baseline"),
        strict=get("perf_strict"), timeout=get("perf_timeout"),
        memory_format=get("perf_memory_format"), threads=get("perf_threads"),
        loss_scale=get("perf_loss_scale"), compile=get("perf_compile"),
        cuda_graphs=get("perf_cuda_graphs"), rdzv_port=get("perf_rdzv_port"),
        memory_limit=get("perf_memory_limit"), candidate=candidate,
        find_max_batch=get("perf_find_max_batch"), batch_step=batch_step,
        max_batch_limit=max_batch_limit, explain=get("perf_explain"))


def candidate_stack(config: pytest.Config) -> Stack | None:
    """The candidate of an A/B session, None where no --perf-candidate-* option is given."""
    get = config.getoption
    if not (get("perf_candidate_python") or get("perf_candidate_prefix")
            or get("perf_candidate_env")):
        return None
    return Stack(python=get("perf_candidate_python") or sys.executable,
                 prefix=get("perf_candidate_prefix") or (),
                 env=tuple(get("perf_candidate_env")))


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
    config.stash[TIME_TO_TRAIN_KEY] = TimeToTrain(config.stash[SESSION_KEY], TimeToTrainSettings(
        enabled=config.getoption("perf_time_to_train"), epochs=config.getoption("perf_epochs"),
        target_top1=config.getoption("perf_target_top1"),
        accuracy_tolerance=config.getoption("perf_accuracy_tolerance")))
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
    requests = ExportRequests(benchmark_json=config.getoption("perf_benchmark_json"),
                              exports=tuple(config.getoption("perf_export")),
                              step_summary=os.environ.get(GITHUB_STEP_SUMMARY))
    exported, errors = write_exports(requests, document, markdown, Path(config.rootpath))
    if exported:
        terminalreporter.write_line("exported: " + ", ".join(map(str, exported)))
    for error in errors:
        terminalreporter.write_line(error, red=True)
