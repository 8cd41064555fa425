"""The mode interface: what the session asks of every mode, and nothing more.

A mode answers one question about the training (is it as fast as its baseline? as fast as a
candidate stack? how large a batch fits? how long to a target accuracy?). It checks its own options,
collects its cases, plans and runs one case, judges it, says what a baseline update writes, turns
its verdict into pytest's outcome, and writes its section of the reports. The steps around them
(skip, validate, hold the devices, save, update the baseline) are written once, in
perf_tests/session/measure.py. A mode gets a `Context`, never the session; docs/adding-a-mode.md
says how a new one plugs in."""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perf_tests.baselines.file import BaselineEntry
from perf_tests.context.baseline_store import Update
from perf_tests.context.context import Context
from perf_tests.core.cases import Case
from perf_tests.modes.outcomes import enforce, fails
from perf_tests.results.case_result import CaseResult
from rn50_model.config import TrainConfig

THROUGHPUT_TITLE = "ResNet50 training throughput"

Rows = dict[str, dict]   # results.json's rows of one kind, by case id
Figures = Callable[[Rows, Path, str], tuple[list[Path], list[str]]]


@dataclass(frozen=True)
class Figure:
    """A mode's one figure: `draw(rows, path, title)` writes it into the folder as `file_name`
    and returns its path, or None where it has nothing to draw; `title` may name {hardware}."""
    draw: Callable[[Rows, Path, str], Path | None]
    file_name: str
    title: str

    def __call__(self, rows: Rows, folder: Path, hardware: str) -> tuple[list[Path], list[str]]:
        path = self.draw(rows, folder / self.file_name, self.title.format(hardware=hardware))
        return ([path] if path else []), []


@dataclass(frozen=True)
class Report:
    """A mode's section of the reports, from results.json's rows of its kind: the terminal's
    lines, report.md's parts in order (a part that returns a string is a table after a blank
    line; one that returns lines stands as it is, empty where it has nothing) and the figures
    (the files written, a line for each figure that could not be)."""
    terminal: Callable[[Rows], list[str]] | None = None
    markdown: tuple[Callable[[Rows], str | list[str]], ...] = ()
    figures: Figures | None = None


@dataclass
class EntryPlan:
    """The start of a plan for a case judged against a baseline entry: the training it runs, and
    its entry or why there is none (a mode's own `Plan` adds what it judges with)."""
    case: Case
    config: TrainConfig
    entry: BaselineEntry | None
    no_entry_reason: str


class Mode(ABC):
    kind: str                            # the `kind` of its rows in results.json
    title: str = THROUGHPUT_TITLE        # its section of the terminal summary
    fixture: str = "perf_case"           # the test function's fixture that runs its cases
    test_module: str = "test_resnet50_training.py"   # the perf_tests/ module of that function
    uses_baseline: bool = True           # judged against the baseline file (A/B is not)

    def __init__(self, context: Context) -> None:
        self.context = context

    # -- the command line ----------------------------------------------------------------

    @staticmethod
    @abstractmethod
    def wanted(settings) -> bool:
        """Whether a session with these settings runs this mode."""

    @staticmethod
    def check(settings) -> None:
        """The rules between this mode's options: raise SettingsError for a broken one."""

    @staticmethod
    def header(settings) -> dict:
        """Fields this mode adds to results.json's header."""
        return {}

    def prepare(self) -> None:
        """What can fail before any measurement, raised as an exception with one line."""

    # -- one case ------------------------------------------------------------------------

    @abstractmethod
    def cases(self) -> list:
        """The cases it measures, each with a `case_id` (the test id)."""

    def skip_reason(self, case) -> str | None:
        return self.context.workers.skip_reason(case)

    @abstractmethod
    def plan(self, case) -> Any:
        """Everything the runs need, decided before they start (the worker config, validated,
        and the baseline entry); raises ConfigError for a setting the case cannot take."""

    @abstractmethod
    def run(self, plan) -> Any:
        """The case's runs; called while this session holds the devices."""

    @abstractmethod
    def judge(self, plan, measured) -> CaseResult:
        """The verdict on what `run` measured."""

    def follow_up(self, plan, result: CaseResult, update: Update | None
                  ) -> tuple[CaseResult, Update | None]:
        """Work after the verdict, before the result is saved (an operator profile), knowing
        the baseline `update` --perf-update-baselines will write (None: none): the result and
        the update, each with what the work adds."""
        return result, update

    def baseline_update(self, result: CaseResult) -> Update | None:
        """What --perf-update-baselines writes for `result`; None: nothing."""
        return None

    def fails(self, result: CaseResult) -> str | None:
        """Whether the verdict fails its test (outcomes.fails): None, or the failure line's
        ending; a failed case's row gets its repro command."""
        return fails(self.context.settings, result)

    def repro_cases(self, result: CaseResult) -> list[str]:
        """The cases a failed case's repro command runs, itself last: those its figures were
        taken over in this session, then itself."""
        return [result.case_id]

    def enforce(self, result: CaseResult) -> None:
        """pytest's outcome for the verdict: fail, skip, warn or pass."""
        enforce(self.context, result, self.fails(result), self.uses_baseline)

    def result(self, case, verdict: str, message: str, **fields) -> CaseResult:
        """The case's result: its row of this mode's kind, with the session's input settings;
        a field the kind's row type does not declare fails here, named."""
        settings = self.context.settings
        return CaseResult.judged(case, self.kind, verdict, message, **{
            "image_size": settings.image_size, "data_backend": settings.data_backend, **fields})

    # -- reports: from results.json's rows of this kind, so tools can write them too ----------

    report: Report = Report()   # what the three below write, declared by each mode

    @classmethod
    def terminal_lines(cls, rows: Rows) -> list[str]:
        return cls.report.terminal(rows) if cls.report.terminal else []

    @classmethod
    def markdown(cls, rows: Rows) -> list[str]:
        lines: list[str] = []
        for part in cls.report.markdown:
            written = part(rows)
            lines += ["", written] if isinstance(written, str) else written
        return lines

    @classmethod
    def figures(cls, rows: Rows, folder: Path, hardware: str) -> tuple[list[Path], list[str]]:
        """(the figures written, a line for each figure that could not be)."""
        return cls.report.figures(rows, folder, hardware) if cls.report.figures else ([], [])
