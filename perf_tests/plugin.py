"""The pytest plugin: command-line options and hooks only, each delegating in a few lines.

Registered by its pytest11 entry point where the project is installed (pyproject.toml), else by
the checkout's root conftest.py. The options are the rows of perf_tests/cli/options.py's
`GROUPS`, one `--help` section a group (every one states its default; a bad value, or a spelling
from before the `--perf-` prefix (`RENAMED`), is a usage error naming the option); the rules
between them are `session.session.check_settings`, a case's measuring `session.session` and the
modes, the report `session.report`.
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import warnings
from pathlib import Path

import pytest

from perf_tests.cli.options import GROUPS, RENAMED, old_spellings, values_taken_for_paths
from perf_tests.cli.repro import CommandLine
from perf_tests.cli.selection import empty_selection_hint
from perf_tests.cli.settings import Settings, SettingsError, settings_of
from perf_tests.context.perf_warnings import PerfCommandLineWarning, perf_warning_format
from perf_tests.modes import MODES
from perf_tests.modes.outcomes import (NOT_COMPARABLE_EXIT_STATUS, UNJUDGED_EXIT_STATUS,
                                      not_comparable_cases, not_comparable_line, unjudged_cases,
                                      unjudged_line)
from perf_tests.report.exports import GITHUB_STEP_SUMMARY, ExportRequests, write_exports
from perf_tests.report.junit import add_suite_properties
from perf_tests.results.folder import (ResultsFolder, ResultsFolderError, create_default_folder,
                                       create_new_folder)
from perf_tests.runs.stop_signals import stop_on_signals
from perf_tests.session.report import every_case_skipped, interruption_line, write_report
from perf_tests.session.session import PerfSession, PerfUsageError, check_settings, project_folder

SESSION_KEY = pytest.StashKey[PerfSession]()
SIGNALS_KEY = pytest.StashKey[dict]()
PREPARE_ERROR_KEY = pytest.StashKey[str]()
CREATED_RESULTS_KEY = pytest.StashKey[bool]()
RESULTS_INPUT = "rn50_perf_results"
PROJECT_INPUT = "rn50_perf_project"
XDIST_GROUP = "rn50-perf-devices"
# The fixtures the modes' test functions take their cases by: a mode with a test function of its
# own names its fixture (`Mode.fixture`), and the plugin parametrizes it.
CASE_FIXTURES = tuple(dict.fromkeys(mode.fixture for mode in MODES))


def pytest_addoption(parser: pytest.Parser) -> None:
    for group in GROUPS:
        section = parser.getgroup(f"perf-{group.name}", f"ResNet50 perf suite: {group.title}")
        for option in group.options:
            option.add_to(section.addoption)
    for old in RENAMED:
        old.add_to(parser.addoption)


def requested_settings(config: pytest.Config) -> Settings:
    return settings_of(config.getoption)


def settings_from(config: pytest.Config) -> Settings:
    """The command line as `Settings`; a spelling from before the prefix, a bad value or a
    broken rule between options is one usage-error line."""
    typed = old_spellings(config.getoption)
    if typed:
        raise pytest.UsageError("; ".join(old.line for old in typed))
    try:
        settings = requested_settings(config)
        check_settings(settings)
    except SettingsError as error:
        raise pytest.UsageError(str(error)) from None
    return settings


def is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def user_project(config: pytest.Config) -> Path:
    """Where the default baselines and results go (`session.project_folder`): the controller's
    on a pytest-xdist worker. Says so, once, where pytest took one of the suite's option values
    for a test path and so read no ini file."""
    if is_xdist_worker(config):
        return Path(config.workerinput[PROJECT_INPUT])
    project = project_folder(Path(config.rootpath), config.inipath, config.option.rootdir,
                             config.invocation_params.dir)
    taken = values_taken_for_paths(config.invocation_params.args)
    if taken and config.inipath is None and not config.option.rootdir:
        config.issue_config_time_warning(PerfCommandLineWarning(
            f"pytest took the value of {taken[0]} for a test path when it looked for its "
            f"rootdir and ini file (before the suite's options are known), so its rootdir is "
            f"{config.rootpath} and it read no ini file; baselines and results go to {project} "
            f"all the same. Write {taken[0].replace(' ', '=', 1)} to keep pytest's rootdir "
            "and ini file here"), stacklevel=2)
    return project


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "perf_case: a measured ResNet50 throughput case")
    # Where pytest-xdist is not installed (a plain `make perf`), its mark is still known: every
    # case carries it, and an unknown mark warns once a session.
    config.addinivalue_line("markers", "xdist_group(name): cases that pytest-xdist keeps on one "
                            "worker (--dist loadgroup)")
    settings = settings_from(config)
    if config.option.help:
        return  # nothing is measured: no results folder
    rootdir = user_project(config)
    if is_xdist_worker(config):
        results_dir = Path(config.workerinput[RESULTS_INPUT])
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
    command_line = CommandLine.of(config.invocation_params.args, config.invocation_params.dir)
    config.stash[SESSION_KEY] = PerfSession(settings, rootdir, results_dir,
                                            progress=progress_writer(config),
                                            command_line=command_line,
                                            shared_results=is_xdist_worker(config))
    config.stash[SIGNALS_KEY] = stop_on_signals()
    warnings.formatwarning = perf_warning_format(warnings.formatwarning)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Each case's JUnit properties also go to the testsuite (after pytest's configure, which
    makes the JUnit writer), where junitparser's default reader reads them."""
    add_suite_properties(session.config)


def pytest_unconfigure(config: pytest.Config) -> None:
    if SESSION_KEY in config.stash:
        config.stash[SESSION_KEY].close()
    for signum, previous in config.stash.get(SIGNALS_KEY, {}).items():
        signal.signal(signum, previous)
    if SIGNALS_KEY in config.stash:   # configured past --help: the formatter was wrapped
        warnings.formatwarning = getattr(warnings.formatwarning, "original",
                                         warnings.formatwarning)
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


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """pytest-xdist: every worker writes into the one results folder the controller chose, and
    takes the default baseline file from the controller's project folder."""
    session = node.config.stash[SESSION_KEY]
    node.workerinput[RESULTS_INPUT] = str(session.results.path)
    node.workerinput[PROJECT_INPUT] = str(session.rootdir)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """A mode's test module is collected only where the mode runs (the time-to-train module
    where a `_ttt` case is asked for): otherwise the session is as before."""
    modules = {mode.test_module for mode in MODES}
    if collection_path.parent != Path(__file__).parent or collection_path.name not in modules:
        return None   # not a module of this package (tests/ has a test_time_to_train.py too)
    settings = requested_settings(config)
    wanted = any(mode.test_module == collection_path.name and mode.wanted(settings)
                 for mode in MODES)
    return None if wanted else True


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    fixture = next((name for name in CASE_FIXTURES if name in metafunc.fixturenames), None)
    if fixture is None:
        return
    session = metafunc.config.stash[SESSION_KEY]
    try:
        session.prepare()
        cases = session.cases(fixture)
    except PerfUsageError as error:
        metafunc.config.stash[PREPARE_ERROR_KEY] = str(error)
        cases = []
    metafunc.parametrize(fixture, cases, ids=[case.case_id for case in cases])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if PREPARE_ERROR_KEY in config.stash:
        raise pytest.UsageError(config.stash[PREPARE_ERROR_KEY])
    # A failed case's repro command names its test.
    config.stash[SESSION_KEY].node_ids.update(
        (case_id, item.nodeid) for case_id, item in case_items(items))
    for item in items:
        if set(CASE_FIXTURES) & set(getattr(item, "fixturenames", ())):
            # Cases measure the devices: under pytest-xdist --dist loadgroup they stay on one
            # worker; under any other mode a host-wide lock still runs them one at a time.
            item.add_marker(pytest.mark.perf_case)
            item.add_marker(pytest.mark.xdist_group(XDIST_GROUP))


@pytest.fixture(scope="session")
def perf_session(request: pytest.FixtureRequest) -> PerfSession:
    return request.config.stash[SESSION_KEY]


def strictness(config: pytest.Config) -> str | None:
    """The option that makes a session without a single measured case fail, if given."""
    requested = config.stash[SESSION_KEY].requested
    return ("--perf-require-baseline" if requested.require_baseline
            else "--perf-strict" if requested.strict else None)


def case_items(items: list[pytest.Item]) -> list[tuple[str, pytest.Item]]:
    """(case id, its test) of the selected cases, in the order they run."""
    found = []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        found += [(params[name].case_id, item) for name in CASE_FIXTURES if name in params]
    return found


def planned_cases(items: list[pytest.Item]) -> list[str]:
    """The ids of the selected cases, in the order they run."""
    return [case_id for case_id, _ in case_items(items)]


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """A stopped session says so in results.json (and so in report.md). Under
    --perf-require-baseline or --perf-strict a session in which every case skipped fails, and
    one that failed no case but could not judge one (host-unfit, inconclusive) exits
    UNJUDGED_EXIT_STATUS: a CI gate must not be green for a host that measured nothing, nor for a
    case it could not see. One whose only failures are cases judged against another machine's
    baseline (`not-comparable`) exits NOT_COMPARABLE_EXIT_STATUS, not a regression's 1."""
    config = session.config
    if is_xdist_worker(config) or SESSION_KEY not in config.stash:
        return
    if session.exitstatus == pytest.ExitCode.INTERRUPTED:
        config.stash[SESSION_KEY].record_interruption(planned_cases(session.items))
    if not strictness(config):
        return
    try:
        cases = (config.stash[SESSION_KEY].results_document() or {}).get("cases", {})
    except ResultsFolderError:
        return  # the terminal summary names the unreadable file
    if session.exitstatus == pytest.ExitCode.OK and every_case_skipped(cases):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    elif session.exitstatus == pytest.ExitCode.OK and unjudged_cases(cases):
        session.exitstatus = UNJUDGED_EXIT_STATUS
    elif session.exitstatus == pytest.ExitCode.TESTS_FAILED and \
            config.stash[SESSION_KEY].requested.require_baseline and \
            session.testsfailed == len(not_comparable_cases(cases)):
        session.exitstatus = NOT_COMPARABLE_EXIT_STATUS


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    if is_xdist_worker(config) or SESSION_KEY not in config.stash:
        return
    perf_session: PerfSession = config.stash[SESSION_KEY]
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and config.getoption("keyword"):
        here = perf_session.all_cases()
        if here:
            terminalreporter.write_line(empty_selection_hint(
                config.getoption("keyword"), here, perf_session.context.profile.name),
                yellow=True)
    results: ResultsFolder = perf_session.results
    try:
        document = perf_session.results_document()
    except ResultsFolderError as error:
        terminalreporter.write_line(str(error))
        return
    if not document or not (document.get("cases") or document.get("interrupted")):
        return

    def section(title: str, lines: list[str]) -> None:
        terminalreporter.section(title)
        for line in lines:
            terminalreporter.write_line(line)

    written = write_report(document, results.path, section, perf_session.requested.plots)
    if every_case_skipped(document["cases"]):
        strict = strictness(config)
        terminalreporter.write_line(
            "every case skipped: nothing was measured; " + (
                f"the session fails ({strict})" if strict else
                "--perf-require-baseline or --perf-strict make such a session fail"),
            red=bool(strict), yellow=not strict, bold=True)
    unjudged = unjudged_cases(document["cases"])
    if unjudged:
        gate = strictness(config)
        terminalreporter.write_line(unjudged_line(unjudged, perf_session.requested),
                                    red=bool(gate), yellow=not gate, bold=True)
    elsewhere = not_comparable_cases(document["cases"])
    if elsewhere:
        gate = perf_session.requested.require_baseline
        terminalreporter.write_line(not_comparable_line(elsewhere, perf_session.requested),
                                    red=gate, yellow=not gate, bold=True)
    stopped = interruption_line(document)
    if stopped:
        terminalreporter.write_line(stopped, red=True, bold=True)
    for note in written.notes:
        terminalreporter.write_line(note)
    terminalreporter.write_line("results: " + ", ".join(
        map(str, [results.results_file, *written.files])))
    requested = perf_session.requested
    requests = ExportRequests(exports=requested.exports,
                              step_summary=os.environ.get(GITHUB_STEP_SUMMARY))
    exported, errors = write_exports(requests, document, written.markdown,
                                     Path(config.rootpath))
    if exported:
        terminalreporter.write_line("exported: " + ", ".join(map(str, exported)))
    for error in errors:
        terminalreporter.write_line(error, red=True)
