"""What a mode is given to measure with: the session's settings, host, results folder, baseline
store and launcher, and a service for each job built on them (a case's workers, the settings
stored with a result, the rows the session keeps, the repro command). A mode never sees the
session; the session builds one `Context` (`make_context`)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from perf_tests.cli.repro import CommandLine
from perf_tests.cli.settings import Settings
from perf_tests.cli.values import NO_HISTORY
from perf_tests.context.baseline_store import BaselineStore
from perf_tests.context.perf_warnings import warn_case
from perf_tests.context.repro_commands import ReproCommands
from perf_tests.context.rows import SessionRows
from perf_tests.context.stored import StoredSettings
from perf_tests.context.workers import Workers
from perf_tests.core.cases import Profile
from perf_tests.environment.lock import StackReadings
from perf_tests.results.folder import ResultsFolder
from perf_tests.results.history import SessionHistory
from perf_tests.runs.host import HostFacts
from perf_tests.runs.launch import Launcher


@dataclass
class Context:
    requested: Settings          # the command line as given
    settings: Settings           # ... with every default settled for the profile
    profile: Profile
    host: HostFacts
    rootdir: Path
    results: ResultsFolder
    baselines: BaselineStore
    launcher: Launcher
    progress: Callable[[str], None]    # one line as a run ends, or while waiting for devices
    workers: Workers = field(repr=False, compare=False)
    stored: StoredSettings = field(repr=False, compare=False)
    rows: SessionRows = field(repr=False, compare=False)
    repro: ReproCommands = field(repr=False, compare=False)
    history: SessionHistory = field(repr=False, compare=False)

    @property
    def stacks(self) -> StackReadings | None:
        return self.workers.stacks

    def warn(self, case_id: str, text: str) -> None:
        """A PerfWarning about `case_id`, shown as at its results folder (perf_warnings.py)."""
        warn_case(self.results.path, case_id, text)


def make_context(*, requested: Settings, settings: Settings, profile: Profile, host: HostFacts,
                 rootdir: Path, results: ResultsFolder, baselines: BaselineStore,
                 launcher: Launcher, progress: Callable[[str], None],
                 header_extras: dict | None = None, command_line: CommandLine | None = None,
                 node_ids: dict[str, str] | None = None,
                 stacks: StackReadings | None = None) -> Context:
    """The context of a session (or of a test's mode, outside one: no command line, no stacks)."""
    return Context(
        requested=requested, settings=settings, profile=profile, host=host, rootdir=rootdir,
        results=results, baselines=baselines, launcher=launcher, progress=progress,
        workers=Workers(settings, profile, host, launcher, rootdir, results, stacks),
        stored=StoredSettings(settings, profile, host),
        rows=SessionRows(results, settings, profile, host, str(baselines.path),
                         header_extras or {}),
        repro=ReproCommands(command_line, rootdir, baselines.path,
                            node_ids if node_ids is not None else {}),
        history=history_of(settings, results))


def history_of(settings: Settings, results: ResultsFolder) -> SessionHistory:
    """The earlier sessions an auto band learns the host from: those beside this session's
    results folder and in each `--perf-set history` folder; none under `history=none`."""
    if NO_HISTORY in settings.history:
        return SessionHistory([])
    return SessionHistory([results.path.parent, *settings.history], results.path)
