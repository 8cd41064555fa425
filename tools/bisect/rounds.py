"""A component bisection's probe: the reference, a set of the candidate's changes layered over it
(the whole) and two parts of that set, run in the same rounds by the suite's own loop
(`perf_tests.runs.protocol.run_rounds`: one fresh launch per stack a round, in a Williams
square's order, so drift falls on every stack alike), and judged after every round from the
first to the cap by `tools/bisect/rule.py`; more rounds only while it is undecided.

`SuiteRuns` runs the rounds from this process as an A/B session runs its pairs (the session's
settings from the options after `--`, the host probed once, the launcher, the device lock), each
run's record in the probe's folder. A round in which the worker marked a run (other processes
on the cores during its timed window, `host_marks.run_marks`) is set aside and run again, as a
baseline's recording runs a marked run again: on a host shared with other jobs such a run is
several times slower, whichever stack it was (`--perf-ignore-host-state` keeps every round).
`RoundsProber` asks one split: its record in bisection.json keeps every round judged (img/s by
stack) and those set aside, so the answer can be judged again from it (the tests do).
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from perf_tests.cli.settings import SettingsError, settings_from_args
from perf_tests.core.cases import Case, CaseIdError
from perf_tests.core.stats import deciding_pairs
from perf_tests.core.storage import write_json_atomically
from perf_tests.core.text import aligned
from perf_tests.judging.host_marks import busy_tag, run_marks
from perf_tests.results.folder import ResultsFolder
from perf_tests.runs.device_lock import DeviceLockError, device_lock_path, holding_devices
from perf_tests.runs.host import ProbeError
from perf_tests.runs.launch import LauncherError, Stack
from perf_tests.runs.protocol import run_rounds
from perf_tests.session.session import PerfSession, check_settings
from rn50_model.config import ConfigError
from tools.bisect.rule import (BOTH, CONFIDENCE, FIRST, NEITHER, NOT_SLOW, REFERENCE, SECOND, SLOW,
                               WHOLE, Judgement, judge_rounds)
from tools.bisect.search import Split, SplitAnswer, Undecided
from tools.cli import SUITE_ROOT
from tools.inputs import InputError

ARMS = (WHOLE, FIRST, SECOND)
ANSWER_TEXT = {NOT_SLOW: "not slow", SLOW: "slow", FIRST: "the first part carries it",
               SECOND: "the second part carries it", BOTH: "each part holds some",
               NEITHER: "slow only together", None: "undecided"}
# A marked round runs again, up to this many times the rounds a probe may judge in all.
MARKED_ROUNDS_FACTOR = 2
# rounds, the stacks by side, what wants more rounds, what hears each run -> img/s by side in
# the rounds judged, the side of each run in the order they ran, and the rounds set aside with
# why (round -> the marks of its runs)
Measure = Callable[..., tuple[dict[str, list[float]], list[str], dict[int, list[str]]]]


class ProbeFailed(Exception):
    """A probe whose runs failed (a layered stack that does not start...)."""


def first_rounds(rounds: int) -> int:
    """The rounds a probe takes at least: those asked, and no fewer than give an interval."""
    return max(rounds, deciding_pairs(CONFIDENCE))


def session_settings(pytest_args: list[str]):
    """The suite's settings from the options after `--` (`--perf-set iters=60`...), checked as
    a session checks them (perf_tests/cli/settings.py's `settings_from_args`); InputError in one
    line."""
    try:
        settings, unknown = settings_from_args(pytest_args)
    except SettingsError as error:
        raise InputError(f"after --: {error}") from None
    if unknown:
        raise InputError(f"after --: {' '.join(unknown)} is not an option of the suite's runs; "
                         "pass --perf-* options there (python -m pytest perf_tests --help)")
    if settings.candidate is not None:
        raise InputError("after --: --perf-candidate-* names the candidate; give it before --")
    try:
        check_settings(settings)
    except SettingsError as error:
        raise InputError(f"after --: {error}") from None
    return settings


class SuiteRuns:
    """Rounds of one case, run from this process as the suite runs an A/B session's pairs."""

    def __init__(self, case_id: str, pytest_args: list[str], work: Path) -> None:
        session = PerfSession(session_settings(pytest_args), SUITE_ROOT, work / "session",
                              progress=lambda line: print(f"    {line}", flush=True))
        try:
            self.case = Case.parse(case_id)
            self.context = session.context
            reason = self.context.workers.skip_reason(self.case)
            if reason:
                raise InputError(f"{case_id} cannot run here: {reason}")
            self.config = self.context.workers.train_config(self.case)
            self.config.validate(self.context.host.device_type)
            self.context.launcher.check_usable()
        except (CaseIdError, ProbeError, LauncherError, ConfigError) as error:
            raise InputError(f"{case_id}: {error}") from None

    def __call__(self, stacks: dict[str, Stack], folder: Path, rounds: int, max_rounds: int,
                 more_wanted: Callable[[dict[str, list[float]]], bool], report_run: Callable
                 ) -> tuple[dict[str, list[float]], list[str], dict[int, list[str]]]:
        case_id = self.case.case_id
        request_for = self.context.workers.launch_requests(self.case, self.config,
                                                   folder / case_id / "config.json")
        keep_all = self.context.settings.ignore_host_state
        try:
            with holding_devices(device_lock_path(), self.context.progress, case_id):
                runs = run_rounds(
                    self.case, self.context.launcher, request_for,
                    partial(ResultsFolder(folder).run_dir, case_id), rounds, max_rounds,
                    stacks=stacks, more_wanted=lambda runs: more_wanted(runs.complete_rounds()),
                    report_run=lambda runs: report_run(runs.round_number, runs.in_round),
                    counts=lambda in_round: keep_all or not round_marks(in_round),
                    most_rounds=MARKED_ROUNDS_FACTOR * max_rounds)
        except DeviceLockError as error:
            raise ProbeFailed(str(error)) from None
        if runs.failed is not None:
            raise ProbeFailed(f"{runs.failed.message} ({runs.failed_side}: "
                              f"{stacks[runs.failed_side].describe()})")
        set_aside = {number: round_marks({side: runs.by_side[side][number - 1]
                                          for side in stacks})
                     for number in runs.set_aside}
        return runs.complete_rounds(), runs.order, set_aside


@dataclass
class RoundsProber:
    """The split probes of one component bisection, each a folder `probe-N` in `work`."""
    work: Path
    rounds: int
    max_rounds: int
    log: dict
    names: list[str]                              # the changes, in their order
    subject: Callable[[list[str]], str]           # a set of changes in words
    stack_for: Callable[[list[str], Path], Stack]  # the layered stack of some changes
    measure: Measure
    records: list[dict] = field(default_factory=list)
    reference: Stack = Stack()                    # this stack, or inside an image

    def __call__(self, split: Split) -> SplitAnswer:
        number = len(self.records) + 1
        members = {arm: [name for name in self.names if name in subset]
                   for arm, subset in zip(ARMS, (split.whole, split.first, split.second))
                   if subset}
        folder = self.work / f"probe-{number}"
        stacks = {REFERENCE: self.reference,
                  **{arm: self.stack_for(names, folder / "overlay" / arm)
                     for arm, names in members.items()}}
        subjects = {arm: self.subject(names) for arm, names in members.items()}
        print(f"probe {number}: " + "; ".join(f"{arm}: {subjects[arm]}" for arm in members),
              flush=True)
        record = {"probe": number, "arms": members, "subjects": subjects,
                  "candidates": {arm: stacks[arm].describe() for arm in members},
                  "folder": str(folder)}
        self.records.append(record)
        started = time.monotonic()

        def more_wanted(measured: dict[str, list[float]]) -> bool:
            return judge_rounds(measured).answer is None

        def report_run(round_number: int, in_round: dict) -> None:
            if len(in_round) == len(stacks) or any(run.outcome != "ok"
                                                   for run in in_round.values()):
                print("    " + round_line(round_number, stacks, in_round), flush=True)

        try:
            measured, order, set_aside = self.measure(
                stacks, folder, first_rounds(self.rounds),
                max(self.max_rounds, first_rounds(self.rounds)), more_wanted, report_run)
        finally:
            record["seconds"] = round(time.monotonic() - started, 1)
            self.save()
        judged = judge_rounds(measured)
        record.update({"rounds": measured, "run_order": order,
                       "set_aside": {str(number): why for number, why in set_aside.items()},
                       **judgement_fields(judged)})
        self.save()
        aside = (f", {len(set_aside)} more set aside (the host marked a run)" if set_aside
                 else "")
        print(f"probe {number}: {ANSWER_TEXT[judged.answer]} after {judged.rounds} "
              f"rounds{aside}; {figures_text(judged)}; {record['seconds']:.0f} s", flush=True)
        if judged.answer is None:
            raise Undecided(split.whole, f"probe {number} ({subjects[WHOLE]}) stayed undecided "
                            f"after {judged.rounds} rounds{aside}: {judged.why}",
                            judged.whole.ratio)
        by_set = {arm: frozenset(names) for arm, names in members.items()}
        return SplitAnswer(judged.answer,
                           {by_set[arm]: ratio for arm, ratio in judged.ratios().items()},
                           frozenset(by_set[arm] for arm in judged.slow_arms()), record)

    def save(self) -> None:
        self.log["probes"] = self.records
        write_json_atomically(self.work / "bisection.json", self.log)


def round_marks(in_round: dict) -> list[str]:
    """`whole: other processes used 1.0 of 2 cores`, a line per marked run of a round."""
    return [f"{side}: {mark}" for side, run in in_round.items() for mark in run_marks(run)]


def judgement_fields(judged: Judgement) -> dict:
    """A probe's answer and figures as bisection.json keeps them."""
    figures = {WHOLE: judged.whole.to_dict()}
    for arm, part in judged.parts.items():
        figures[arm] = {**part.to_reference.to_dict(), "side": part.side, "slow": part.slow,
                        "to_midpoint": part.to_midpoint.to_dict()["ratio_ci"],
                        "to_whole": part.to_whole.to_dict()["ratio_ci"]}
    return {"answer": judged.answer, "why": judged.why, "judged_rounds": judged.rounds,
            "confidence": judged.whole.confidence, "figures": figures}


def round_line(round_number: int, stacks: dict[str, Stack], in_round: dict) -> str:
    """`round 3: reference 20.1, whole 14.2, first 14.0, second 19.8 img/s`, and the marks of
    a round the host marked."""
    ordered = dict(sorted(in_round.items(), key=lambda item: list(stacks).index(item[0])))
    values = ", ".join(f"{side} " + (f"{run.global_ips:.3g}" if run.outcome == "ok"
                                     else run.outcome) for side, run in ordered.items())
    return f"round {round_number}: {values} img/s{busy_tag(round_marks(ordered))}"


def figures_text(judged: Judgement) -> str:
    """`whole ratio 0.702 (97% CI 0.65-0.74); first 0.99, less than half; second ...`."""
    whole = judged.whole
    ci = (f" ({whole.confidence:.0%} CI {whole.low:.3f}-{whole.high:.3f})"
          if whole.low is not None else "")
    parts = "".join(f"; {arm} ratio {part.to_reference.ratio:.3f}, {part.side}"
                    for arm, part in judged.parts.items())
    return f"whole ratio {whole.ratio:.3f}{ci}{parts}"


def split_table(records: list[dict]) -> list[str]:
    """A row per stack of each probe: its ratio to the reference, its interval, and where it
    lies against the whole's slowdown; the probe's answer and seconds on its whole's row."""
    header = ("probe", "stack", "rounds", "ratio", f"{CONFIDENCE:.0%} CI", "of the slowdown",
              "answer", "seconds")
    rows = []
    for record in records:
        figures = record.get("figures", {})
        for arm in ARMS:
            if arm not in record["arms"]:
                continue
            measured = figures.get(arm, {})
            ci = measured.get("ratio_ci")
            first_row = arm == WHOLE
            rows.append((str(record["probe"]) if first_row else "",
                         f"{arm}: {record['subjects'][arm]}",
                         str(record.get("judged_rounds", "-")) if first_row else "",
                         f"{measured['ratio']:.3f}" if measured.get("ratio") else "-",
                         f"{ci[0]:.3f}-{ci[1]:.3f}" if ci else "-",
                         measured.get("side", "-") if arm != WHOLE else "-",
                         ANSWER_TEXT[record.get("answer")] if first_row else "",
                         f"{record['seconds']:.0f}" if first_row else ""))
    return aligned([header, *rows], {1, 5, 6})
