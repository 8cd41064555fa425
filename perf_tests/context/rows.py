"""The rows a session keeps: each case's row as it ends, in memory, and written into results.json
for the user and for the session's other processes (pytest-xdist workers). What a later case
reads of an earlier one is this process's row, never the file it wrote; the file is read only
where the folder is shared, for a case another process measured."""
from __future__ import annotations

from dataclasses import dataclass, field

from perf_tests.cli.settings import Settings
from perf_tests.core.cases import Profile
from perf_tests.core.rows import Row
from perf_tests.core.row_values import row_of, rows_of
from perf_tests.core.text import utc_now
from perf_tests.results.case_result import CaseResult
from perf_tests.results.folder import ResultsFolder
from perf_tests.runs.host import HostFacts


@dataclass
class SessionRows:
    results: ResultsFolder
    settings: Settings
    profile: Profile
    host: HostFacts
    baseline_file: str
    header_extras: dict = field(default_factory=dict)   # the modes' fields of the header
    # When the session started (its context is built as it collects): results.json is first
    # written as the first case ends, which may be many minutes later.
    started_at: str = field(default_factory=utc_now)
    saved: dict[str, dict] = field(default_factory=dict)   # this process's rows, by case id

    def header(self) -> dict:
        """results.json's fields beside its cases, as the file is first written."""
        return {"hardware": self.host.hardware, "profile": self.profile.name,
                "environment": self.host.environment, "launcher": self.settings.launcher,
                "baseline_file": self.baseline_file, "started_at": self.started_at,
                **self.header_extras}

    def save(self, result: CaseResult) -> None:
        """Keep the case's row, and merge it into results.json (written once, as it ends)."""
        self.saved[result.case_id] = result.row_dict()
        self.results.save_case(result.case_id, self.saved[result.case_id], self.header())

    def measured(self, case_id: str) -> Row | None:
        """This session's row of `case_id`, typed: as this process saved it, else as
        results.json has it where another process of the session measured it; None where none
        has ended."""
        if case_id in self.saved or not self.results.shared:
            row = self.saved.get(case_id)
        else:
            row = self.results.case(case_id)
        return None if row is None else row_of(case_id, row)

    def measured_rows(self) -> dict[str, Row]:
        """Every row this session has saved, typed: this process's, and those of other
        processes."""
        others = (self.results.load() or {}).get("cases", {}) if self.results.shared else {}
        return rows_of({**{case_id: row for case_id, row in others.items()
                           if case_id not in self.saved}, **self.saved})
