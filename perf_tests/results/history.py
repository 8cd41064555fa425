"""The sessions already run: every results.json in the folders a gate learns its host from, and
per case the runs of those that ran it unchanged against a baseline entry.

The folders are the one this session's results folder is in (`perf_results/` by default, where
every earlier session's folder is) and any `--perf-set history` names; each is a session folder or a
folder of them. A session counts for an entry where it ran the case on the entry's machine and
stack (no environment change against the entry's: image, versions, packages, compared
variables) and with its settings (no workload or comparable setting changed): an unchanged
session, whose runs say how the host moved with nothing changed
(perf_tests/judging/tolerance_band.py). A/B cases are
not a stack's own sessions, and the runs the host marked measured the host: both are left out.
Two facts of the environment are not compared: the host's name (identical nodes share one
baseline, and so its history) and the suite's commit (a gate in CI runs a new one with every
change to its repository, most of which change nothing a worker runs; a session slowed by one
that did is one slow session, which the band's rule does not learn from).
The newest `RECENT` such sessions count: the host as it is now.

Files are read once, when the first case asks; one that cannot be read (another tool's JSON, a
file cut short by a full disk) is not a session, and is counted in `unreadable`.
"""
from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Mapping
from pathlib import Path

from perf_tests.baselines.checks import unmarked_runs
from perf_tests.baselines.file import COMPARABLE_SETTINGS, BaselineEntry
from perf_tests.core.cases import THROUGHPUT
from perf_tests.core.rows import ThroughputRow
from perf_tests.core.row_values import row_of
from perf_tests.environment.differences import (WORKLOAD_SETTINGS, environment_changes,
                                                machine_differences, settings_diff)
from perf_tests.results.document import RESULTS_FILE, ResultsFileError, read_results

RECENT = 30
NOT_COMPARED = ("host", "commit")
SETTINGS = (*COMPARABLE_SETTINGS[THROUGHPUT], *WORKLOAD_SETTINGS)


@dataclass(frozen=True)
class EarlierSession:
    path: Path
    started_at: str
    environment: dict
    cases: dict


def results_files(folder: Path) -> list[Path]:
    """A session folder's results.json, or those of the session folders in `folder`."""
    own = folder / RESULTS_FILE
    return [own] if own.is_file() else sorted(folder.glob(f"*/{RESULTS_FILE}"))


def read_session(path: Path) -> EarlierSession | None:
    """The session a results.json holds (read through results/document.py); None where it holds
    none."""
    try:
        document = read_results(path)
    except ResultsFileError:
        return None
    environment = document.get("environment")
    return EarlierSession(path, str(document.get("started_at") or ""),
                          environment if isinstance(environment, dict) else {},
                          document["cases"])


def stack_of(environment: dict) -> dict:
    return {key: value for key, value in environment.items() if key not in NOT_COMPARED}


def unchanged(session: EarlierSession, row: ThroughputRow, entry: BaselineEntry) -> bool:
    """Whether `session` ran `row` on `entry`'s machine, stack and settings (a row that records
    none is not known to be unchanged)."""
    settings = row.settings
    return (bool(entry.environment) and isinstance(settings, Mapping) and bool(settings)
            and not machine_differences(entry.environment, session.environment)
            and not environment_changes(stack_of(entry.environment),
                                        stack_of(session.environment))
            and not settings_diff(entry.settings, settings, SETTINGS))


def session_runs(row: ThroughputRow) -> list[float]:
    """The runs the host did not mark, of a session that ended well; none where none is left."""
    runs = row.runs_ips
    if not isinstance(runs, tuple) or row.verdict in ("error", "oom"):
        return []
    return unmarked_runs([value for value in runs if isinstance(value, (int, float))
                          and value > 0],
                         row.marked_runs if isinstance(row.marked_runs, Mapping) else None)


class SessionHistory:
    """The earlier sessions in `folders` (this session's own folder, `own`, left out)."""

    def __init__(self, folders: list[Path], own: Path | None = None) -> None:
        self.folders = folders
        self.own = own.resolve() if own else None
        self._sessions: list[EarlierSession] | None = None
        self.unreadable = 0

    @property
    def sessions(self) -> list[EarlierSession]:
        if self._sessions is None:
            found: dict[Path, EarlierSession] = {}
            for folder in self.folders:
                for path in results_files(folder) if folder.is_dir() else []:
                    where = path.parent.resolve()
                    if where == self.own or where in found:
                        continue
                    session = read_session(path)
                    if session is None:
                        self.unreadable += 1
                    else:
                        found[where] = session
            self._sessions = sorted(found.values(), key=lambda session: session.started_at)
        return self._sessions

    def runs(self, case_id: str, entry: BaselineEntry) -> list[list[float]]:
        """The runs of each of the newest `RECENT` unchanged sessions of `case_id` against
        `entry`, oldest first."""
        found = []
        for session in self.sessions:
            written = session.cases.get(case_id)
            row = row_of(case_id, written) if isinstance(written, dict) else None
            if not isinstance(row, ThroughputRow) or not unchanged(session, row, entry):
                continue
            runs = session_runs(row)
            if runs:
                found.append(runs)
        return found[-RECENT:]
