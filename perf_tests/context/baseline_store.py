"""The session's baseline file, as every mode reads and updates it.

`lookup` finds a case's entry in a section of the file and says why there is none to compare
with (missing, or recorded under other settings); `record` writes one entry atomically, keeping
all others, and where the file cannot be written, fails the case with a line that says how its
measured figures can still be kept. The file format is perf_tests/baselines/file.py's.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from perf_tests.baselines.file import (BaselineEntry, BaselineError, BaselineFile, check_writable,
                                       incomparable_settings, load_baseline_file,
                                       update_baseline_file)
from perf_tests.baselines.lineage import ACCEPTED
from perf_tests.core.cases import Case
from perf_tests.environment.differences import machine_differences
from perf_tests.judging.verdicts import ERROR
from perf_tests.results.case_result import CaseResult

ENTRIES, MAX_BATCH = "entries", "max_batch"   # the file's sections
T = TypeVar("T")


class OtherMachine(str):
    """Why a case has no entry to compare with, where the one there is another machine's
    (environment/differences.py `machine_differences`): a mode judges such a case
    `not-comparable` (judging/verdicts.py), never a regression; a mode that does not tell it
    apart reads it as any reason there is no entry. `differences`: the clauses that differ."""
    differences: tuple[str, ...] = ()

    def __new__(cls, text: str, differences: list[str]) -> "OtherMachine":
        reason = super().__new__(cls, text)
        reason.differences = tuple(differences)
        return reason


@dataclass(frozen=True)
class Lookup:
    """How a mode names its entries in the lines a missing or incomparable one gets."""
    noun: str = "baseline entry"           # "no {noun} for {case} in {path}"
    recorded: str = "the baseline"         # "{recorded} for {case} in {path} was ..."
    verb: str = "recorded"                 # "... was {verb} under other settings"
    record_with: str = "--perf-update-baselines"


@dataclass(frozen=True)
class Update:
    """One entry to write: its section, the entry, how its change reads ('12.0 -> 13.1 img/s'
    from the old entry or None), what the line says to do when it cannot be written, why
    the entry cannot be trusted (baselines/checks.py `refusals`; written only when forced) or
    cannot be true (`impossible`; never written, forced or not), and the measures on
    which its runs fail the gate against the entry they would replace (judging/verdicts.py
    `failed_measures`: a refresh that would record a regression is written only when forced,
    and then the lineage item of the replaced entry keeps what was accepted)."""
    section: str
    entry: dict
    change: Callable[[dict | None], str]
    unwritten: Callable[[str], str]
    refusals: tuple[str, ...] = ()
    impossible: tuple[str, ...] = ()
    gate_failures: tuple[str, ...] = ()

    def refused(self, force: bool) -> bool:
        """Whether `record` leaves it unwritten: never where impossible, else where refused
        or failing the gate, and not forced."""
        return bool(self.impossible) or bool(self.refusals or self.gate_failures) and not force

    def failing_text(self) -> str:
        """'these runs fail the gate against the entry they would replace: peak memory ...'."""
        return ("these runs fail the gate against the entry they would replace: "
                + "; ".join(self.gate_failures))


class BaselineStore:
    def __init__(self, path: Path, hardware: str, environment: dict | None = None) -> None:
        self.path = Path(path)
        self.hardware = hardware
        self.environment = environment or {}   # this host's, as probed: the machine it is
        self._file: BaselineFile | None = None

    @property
    def file(self) -> BaselineFile:
        """The file as last read (a missing file reads as empty); re-read after each write,
        since other sessions may have written entries too."""
        if self._file is None:
            self._file = load_baseline_file(self.path)
        return self._file

    def check(self, writing: bool, named: bool = False) -> None:
        """BaselineError now, before anything is measured, for a file that cannot be read (or,
        `writing`, written), and for one `named` on the command line that does not exist
        unless this session creates it: a mistyped path would pass every case as no-baseline."""
        if named and not writing and not self.path.exists():
            raise BaselineError(f"baseline file {self.path} (--perf-baseline-file) does not exist; "
                                "check the path, or create it with --perf-update-baselines")
        load_baseline_file(self.path)   # a file that does not read stops the session now
        if writing:
            check_writable(self.path)

    def section(self, name: str) -> dict[str, dict]:
        return self.file.max_batch if name == MAX_BATCH else self.file.entries

    def lookup(self, case_id: str, current: dict, section: str = ENTRIES,
               names: Lookup = Lookup(), usable: Callable[[dict], bool] = lambda raw: True,
               read: Callable[[str, dict], T] = BaselineEntry.from_dict) -> tuple[T | None, str]:
        """The entry for `case_id` recorded under the settings `current` holds (its kind's
        comparable ones: baselines/file.py `COMPARABLE_SETTINGS`), as `read` makes it of the
        file's (a throughput entry unless another is named), or None and the line that says why
        there is none."""
        raw = self.section(section).get(case_id)
        if raw is None or not usable(raw):
            return None, (f"no {names.noun} for {case_id} in {self.path}; record one with "
                          f"{names.record_with}")
        elsewhere = self.other_machine(raw)
        if elsewhere:
            return None, OtherMachine(
                f"not comparable: {names.recorded} for {case_id} in {self.path} was recorded on "
                f"another machine ({'; '.join(elsewhere)}); record this machine's with "
                f"{names.record_with} into its own file (baselines/{self.hardware}.json, the "
                "default), or pass this machine's file with --perf-baseline-file", elsewhere)
        differences = incomparable_settings(raw.get("settings") or {}, current, tuple(current))
        if differences:
            return None, (f"{names.recorded} for {case_id} in {self.path} was {names.verb} "
                          f"under other settings ({'; '.join(differences)}): not comparable; "
                          f"record one for these settings with {names.record_with}")
        return read(case_id, raw), ""

    def other_machine(self, raw: dict) -> list[str]:
        """How the machine the entry `raw` (as the file stores it) was recorded on differs from
        this host: the file's hardware key, then the entry's device and CPUs; empty where they
        are the same or the file does not say."""
        file_hardware = self.file.hardware
        clauses = [f"the file is for {file_hardware}, this host is {self.hardware}"] \
            if file_hardware and self.hardware and file_hardware != self.hardware else []
        return clauses + machine_differences(raw.get("environment") or {}, self.environment)

    def speedup_of(self, case: Case) -> float | None:
        """`case`'s stored speedup, else its median over the file's own 1n1g median."""
        return self.file.speedup_of(case)

    def record(self, result: CaseResult, update: Update, force: bool = False) -> CaseResult:
        """Write `update` for `result`'s case. The result it returns says what happened: where
        written, the change (its row's `baseline_update`) and what was forced past the checks
        (`baseline_forced`); where not, the case is an error whose line says what
        to do, or, where its runs only fail the gate, the regression it was judged, its line
        saying which measures and how to accept them (`recorded` tells written from not)."""
        case_id = result.case_id
        if update.refused(force):
            reasons = update.impossible + update.refusals
            never = " (not even with --perf-update-baselines=force)" if update.impossible else ""
            clauses = reasons + ((update.failing_text(),) if update.gate_failures else ())
            why = f"baseline not recorded{never}: {'; '.join(clauses)}"
            advice = "" if update.impossible else (
                "rerun on a quiet host, or record it anyway with --perf-update-baselines=force; "
                if reasons else "where the change is wanted, accept it with "
                "--perf-update-baselines=force (the lineage keeps what was accepted); ")
            # Runs that only fail the gate keep their verdict (a regression); runs that cannot
            # be trusted or be true are an error of the recording.
            return result.amended(ERROR if reasons else None,
                                  f"{case_id}: {why}; {advice}{update.unwritten(why)}",
                                  baseline_refused=list(reasons + update.gate_failures))
        entry = {**update.entry, ACCEPTED: list(update.gate_failures)} \
            if update.gate_failures else update.entry
        try:
            before = update_baseline_file(self.path, self.hardware, {case_id: entry},
                                          section=update.section)
        except (BaselineError, OSError) as error:
            why = str(error) if isinstance(error, BaselineError) else \
                f"baseline file {self.path} could not be written ({error.strerror})"
            return result.amended(ERROR, f"{case_id}: {why}; {update.unwritten(why)}",
                                  baseline_write_failed=why)
        self._file = None
        old = (before.max_batch if update.section == MAX_BATCH else before.entries).get(case_id)
        forced = {"baseline_forced": list(update.refusals + update.gate_failures)} \
            if update.refusals or update.gate_failures else {}
        return result.amended(baseline_update=update.change(old), **forced)


def recorded(result: CaseResult) -> bool:
    """Whether `BaselineStore.record` wrote the case's entry."""
    return result.row.baseline_update is not None


def kept_runs(context, result: CaseResult, refused: bool, promotable: bool = True):
    """The line's end where a measured entry cannot be written: the runs are kept in
    results.json, and the command that promotes them later (with --force where the checks
    refused them: the promotion tool applies the same checks); where no promotion can record
    them (`promotable` false: an impossible speedup), what to measure again instead."""
    def unwritten(why: str) -> str:
        results_file, path = context.results.results_file, context.baselines.path
        if not promotable:
            single = result.case.single_device.case_id
            return (f"its {len(result.runs_ips)} measured runs are kept in {results_file}; no "
                    f"promotion records this speedup: record {single} and {result.case_id} "
                    f"again, on a quiet host")
        force = " --force" if refused else ""
        return (f"its {len(result.runs_ips)} measured runs are kept in {results_file}: promote "
                f"them later with (cd {context.rootdir} && rn50-perf promote "
                f"{results_file} -k {result.case_id} --baseline-file {path}{force})")
    return unwritten
