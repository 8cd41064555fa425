"""The command a failed case's line ends with (perf_tests/cli/repro.py builds it from the command
line as typed), given what the session knows: each case's test, the baseline file, and the
variables the case's runs had where its baseline's differed."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from perf_tests.cli.repro import CommandLine, repro_command
from perf_tests.results.case_result import CaseResult
from perf_tests.runs.variables import env_prefix


@dataclass
class ReproCommands:
    command_line: CommandLine | None     # as typed; None outside a session
    rootdir: Path
    baseline_file: Path
    node_ids: dict[str, str] = field(default_factory=dict)   # case id -> its test's node id

    def command(self, case_ids: list[str], uses_baseline: bool,
                result: CaseResult | None = None, recording: bool = False) -> str | None:
        """The command that measures `case_ids` (the failed case last) as this session did, in
        the variables `result`'s runs had where its baseline's differed, and (`recording`: the
        session's recording was not written) records them again; None where a test is not
        known (a context outside a session)."""
        node_ids = [self.node_ids.get(case_id) for case_id in case_ids]
        if None in node_ids or self.command_line is None:
            return None
        baseline = self.baseline_file if uses_baseline and (
            recording or self.baseline_file.exists()) else None
        entry = result.baseline_entry if result is not None and uses_baseline else None
        prefix = env_prefix(entry.environment, result.environment) \
            if entry is not None else []
        return repro_command(self.command_line, self.rootdir, node_ids, baseline, prefix,
                             recording)
