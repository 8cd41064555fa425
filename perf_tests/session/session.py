"""One suite session: the command line checked, the host probed once, the modes it runs, and
each case handed to the mode that measures it.

`PerfSession` builds the `Context` every mode is given (settings, host, results folder,
baseline store, launcher) when the first case needs it, and writes the environment lock as the
first case starts; the measuring itself is
perf_tests/session/measure.py, the verdict's outcome the mode's `enforce`.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from perf_tests.baselines.checks import busy_recording_line
from perf_tests.baselines.file import BaselineError
from perf_tests.cli.repro import CommandLine
from perf_tests.cli.settings import Settings, check
from perf_tests.containers import ContainerError, check_image
from perf_tests.context.baseline_store import BaselineStore
from perf_tests.context.context import Context, make_context
from perf_tests.core.cases import PROFILES
from perf_tests.environment.lock import StackReadings, write_environment_lock
from perf_tests.modes import MODES
from perf_tests.modes.base import Mode
from perf_tests.results.case_result import CaseResult
from perf_tests.results.document import new_document
from perf_tests.results.folder import ResultsFolder
from perf_tests.runs.device_lock import DeviceLockError, check_device_lock, device_lock_path
from perf_tests.runs.fork_servers import ServerFolder
from perf_tests.runs.host import HostFacts, ProbeError, probe_host
from perf_tests.runs.launch import LauncherError
from perf_tests.runs.launchers import make_launcher
from perf_tests.session.measure import measure


class PerfUsageError(Exception):
    """A setting of this session that cannot work; reported as a pytest usage error."""


def check_settings(settings: Settings) -> None:
    """Every rule between options, the shared ones and each mode's (SettingsError)."""
    check(settings)
    for mode in MODES:
        mode.check(settings)


def project_folder(rootpath: Path, inipath: Path | None, rootdir_option: str | None,
                   invocation_dir: Path) -> Path:
    """The user's project, where the default baseline file (`baselines/<hardware>.json`) and
    results (`perf_results/`) belong, wherever the plugin is installed: pytest's rootdir where an
    ini file or `--rootdir` fixed it, else the folder pytest runs in. Without either pytest
    derives its rootdir from the command line's paths, before an installed plugin's options are
    known: `--perf-image /images/b` made it /images."""
    return rootpath if inipath is not None or rootdir_option else invocation_dir


class PerfSession:
    def __init__(self, requested: Settings, rootdir: Path, results_dir: Path,
                 progress: Callable[[str], None] = lambda line: None,
                 command_line: CommandLine | None = None, shared_results: bool = False) -> None:
        self.requested = requested
        self.rootdir = rootdir
        self.command_line = command_line or CommandLine((), rootdir)
        self.node_ids: dict[str, str] = {}   # case id -> its test's node id (the plugin's)
        # shared_results: other processes of the session (pytest-xdist workers) write there too
        self.results = ResultsFolder(results_dir, shared=shared_results)
        self.progress = progress
        self._context: Context | None = None
        self._modes: list[Mode] | None = None
        self._mode_of: dict[str, Mode] = {}   # case id -> the mode that measures it
        self._started = False
        self._interrupted: dict | None = None   # results.json's note of a stopped session
        # The fork servers of its probe and its workers (perf_tests/runs/fork_servers.py),
        # created with the context where --perf-set fork-server is on and the stack has no image
        self._servers: ServerFolder | None = None

    @property
    def context(self) -> Context:
        """Built once, when the first case needs it: probing the host happens here."""
        if self._context is None:
            # The header's environment carries the variables the records will: one reading.
            stacks = StackReadings(self.rootdir)
            own = self.requested.stack
            if own.image is not None:
                check_image(own.image)
            if self.requested.fork_server and own.image is None:
                self._servers = ServerFolder.for_session()
            host = HostFacts(stacks.stamped(probe_host(self.rootdir, own, "this session's "
                                                       "stack", self._servers), own))
            profile = self.requested.profile or PROFILES[
                "full" if host.device_type == "cuda" else "smoke"]
            settings = self.requested.resolved(profile)
            path = settings.baseline_file or self.rootdir / "baselines" / f"{host.hardware}.json"
            header = {}
            for mode in MODES:
                if mode.wanted(settings):
                    header.update(mode.header(settings))
            self._context = make_context(
                requested=self.requested, settings=settings, profile=profile, host=host,
                rootdir=self.rootdir, results=self.results,
                baselines=BaselineStore(path, host.hardware, host.environment),
                launcher=make_launcher(settings.launcher, settings.hostfile,
                                       self._servers),
                progress=self.progress, header_extras=header,
                command_line=self.command_line, node_ids=self.node_ids, stacks=stacks)
        return self._context

    @property
    def modes(self) -> list[Mode]:
        if self._modes is None:
            context = self.context
            self._modes = [mode(context) for mode in MODES if mode.wanted(context.settings)]
        return self._modes

    def close(self) -> None:
        """The session is over: its fork servers end, and any worker of theirs."""
        if self._servers is not None:
            self._servers.close()
            self._servers = None

    def prepare(self) -> None:
        """Everything that can fail before any measurement, as PerfUsageError."""
        try:
            context = self.context
            if any(mode.uses_baseline for mode in self.modes):
                context.baselines.check(writing=context.settings.update_baselines,
                                        named=context.settings.baseline_file is not None)
            context.launcher.check_usable()
            for mode in self.modes:
                mode.prepare()
            check_device_lock(device_lock_path())
        except (ProbeError, BaselineError, LauncherError, DeviceLockError,
                ContainerError) as error:
            raise PerfUsageError(str(error)) from None

    def cases(self, fixture: str) -> list:
        """The cases of the modes whose test function takes `fixture`."""
        cases = []
        for mode in self.modes:
            if mode.fixture == fixture:
                for case in mode.cases():
                    self._mode_of[case.case_id] = mode
                    cases.append(case)
        return cases

    def mode_of(self, case) -> Mode:
        if case.case_id not in self._mode_of:   # a worker of pytest-xdist collects anew
            for mode in self.modes:
                self.cases(mode.fixture)
        return self._mode_of[case.case_id]

    def measure(self, case) -> CaseResult:
        """`case`'s result; before the first, the host's preflight line (what is off on it),
        where a recording starts on a busy host what that costs, and the session's environment
        lock written into its results folder."""
        if not self._started:
            self._started = True
            host, settings = self.context.host, self.context.settings
            line = host.preflight_line()
            if line:
                self.progress(line)
            if settings.update_baselines and not settings.ignore_host_state:
                line = busy_recording_line(host.preflight_off())
                if line:
                    self.progress(line)
            write_environment_lock(self.results.path, self.rootdir,
                                   self.context.settings.candidate, self.context.stacks,
                                   own=self.context.settings.stack)
        return measure(self.mode_of(case), case)

    def all_cases(self) -> list:
        """Every case of this session's modes before -k selects; [] where the host was not
        probed (a usage error came first)."""
        if self._context is None:
            return []
        return [case for mode in self.modes for case in mode.cases()]

    def record_interruption(self, planned: list[str]) -> dict | None:
        """results.json's note that the session was stopped (ResultsFolder.record_interruption);
        None where nothing had been measured, or the host not even probed."""
        if self._context is None:
            return None
        self._interrupted = self.results.record_interruption(planned,
                                                             self._context.rows.header())
        return self._interrupted

    def results_document(self) -> dict | None:
        """The session's results, as results.json holds them: from this process's rows where it
        measured the cases, or what it wrote (the file is written for the user, never read
        back); from the file where other processes did (pytest-xdist workers); None where no
        case ended."""
        if self._context is not None and self._context.rows.saved:
            rows = self._context.rows
            document = new_document(rows.header(), rows.saved)
            if self._interrupted:
                document["interrupted"] = self._interrupted
            return document
        return self.results.document or self.results.load()

    def enforce(self, result: CaseResult) -> None:
        self.mode_of(result.case).enforce(result)
