"""The measurement protocol: the one run loop every mode and tool measures with.

A case is measured in rounds of independent runs, each a fresh launch of its workers, on one
stack or on several (an A/B session's two, a bisection's probes): one run per stack a round,
in the order of a Williams square (AB, BA, ... for two), so that the host's drift falls on every
stack alike. Each run's record is saved the moment it ends (`run-<k>.json` beside its folder
`run-<k>/`). The loop stops at a failure, except that the first run a launcher failed (the free
port it picked for the store was taken) is launched once more under its number, the first set
aside as `run-<k>-relaunched`. A round the caller does not count (a run
the host marked busy) is set aside and another runs in its place. Past the rounds asked for,
more run while the caller's question "more runs wanted?" says so, each mode answering it with
its own figure (img/s, bus bandwidth, seconds to a target, whether a batch fits).
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from perf_tests.core.cases import Case
from perf_tests.core.storage import write_json_atomically
from perf_tests.runs.launch import Launcher, LauncherError, LaunchRequest, Stack
from perf_tests.runs.outcome import RunOutcome, assemble_run, node_lines
from perf_tests.runs.phases import median_phases, run_phases
from perf_tests.runs.variables import with_variables
from rn50_model.record import RECORD_FILE

ONE_STACK = "run"   # the side of a case measured on one stack


def round_order(round_number: int, sides: list[str]) -> list[str]:
    """The order of round `round_number` (from 1) over `sides`: the rows of a Williams square
    (each side in each place once per len(sides) rounds, and after each other side once; mirrored
    on alternate passes where the count is odd). Two sides: AB, BA, AB, ... so neither always
    goes first; the drift over minutes falls on every side alike."""
    count = len(sides)
    first_row = [0] + [(j + 1) // 2 if j % 2 else count - j // 2 for j in range(1, count)]
    shift, mirrored = (round_number - 1) % count, (round_number - 1) // count % 2 == 1
    row = [sides[(place + shift) % count] for place in first_row]
    return row[::-1] if mirrored and count % 2 else row


def record_path(run_dir: Path) -> Path:
    """Where a run's record is saved: beside its folder, `run-3/` -> `run-3.json`."""
    return run_dir.with_name(run_dir.name + ".json")


def set_aside(run_dir: Path) -> None:
    """Move a run's folder and record to `<name>-relaunched`: the run a launcher failed and the
    loop launches again under the same number."""
    for source in (run_dir, record_path(run_dir)):
        if source.exists():
            os.replace(source, source.with_name(
                source.name.replace(run_dir.name, run_dir.name + "-relaunched", 1)))


@dataclass
class Runs:
    """The runs of one case, by side, in the rounds they ran."""
    by_side: dict[str, list[RunOutcome]]
    order: list[str] = field(default_factory=list)      # the side of run 1, 2, ...
    failed: RunOutcome | None = None
    failed_side: str | None = None
    set_aside: list[int] = field(default_factory=list)  # rounds that did not count
    # Runs a launcher failed that were launched again under the same number.
    relaunched: list[RunOutcome] = field(default_factory=list)
    latest: RunOutcome | None = None                    # the run that ended last
    round_number: int = 0                               # the round it ran in ...
    in_round: dict[str, RunOutcome] = field(default_factory=dict)   # ... and that round's runs

    @property
    def runs(self) -> list[RunOutcome]:
        """Every run, in the order they ran."""
        taken = {side: iter(runs) for side, runs in self.by_side.items()}
        return [next(taken[side]) for side in self.order]

    def ips(self, side: str = ONE_STACK) -> list[float]:
        return [run.global_ips for run in self.by_side[side] if run.outcome == "ok"]

    @property
    def runs_ips(self) -> list[float]:
        """The img/s of the runs that ended well, in the order they ran."""
        return [run.global_ips for run in self.runs if run.outcome == "ok"]

    def median_phases(self) -> dict[str, float]:
        """The median of each phase of the runs that ended well (perf_tests/runs/phases.py)."""
        return median_phases([run.phases for run in self.runs
                              if run.outcome == "ok" and run.phases])

    def complete_rounds(self) -> dict[str, list[float]]:
        """Each side's img/s in the rounds every side completed, less those set aside."""
        rounds = min(len(self.ips(side)) for side in self.by_side)
        kept = [number for number in range(1, rounds + 1) if number not in self.set_aside]
        return {side: [self.ips(side)[number - 1] for number in kept] for side in self.by_side}


def run_once(case: Case, launcher: Launcher, request: LaunchRequest, index: int,
             labels: dict | None = None, relaunch_allowed: bool = False) -> RunOutcome:
    """One launch of `case` as run `index`, its record saved beside its run folder (with
    `labels`, e.g. the A/B side) the moment it ends; marked `relaunched` where a launcher failed
    it and `relaunch_allowed` says its caller launches it again."""
    request.run_dir.mkdir(parents=True, exist_ok=True)   # its logs, and its agents' files
    started = time.time()
    try:
        launched = launcher.launch(request)
    except LauncherError as error:
        outcome = RunOutcome(index, "error", None, f"run {index}: {error}")
        write_json_atomically(record_path(request.run_dir), {
            **outcome.to_dict(case, launcher.name, [], 0.0), **(labels or {})})
        return outcome
    outcome = assemble_run(index, request.run_dir, launched, request.timeout)
    outcome.phases = run_phases(outcome.record and outcome.record.pop("marks", None), started,
                                time.time())
    if outcome.record is not None:
        # The stack's variables as the suite handed them over, not the worker's own (the agent
        # and torch add theirs): the same set as the session's header (variables.py).
        outcome.record["environment"] = {
            **with_variables(outcome.record.get("environment") or {}, request.variables),
            **request.stamp}
    if outcome.launch_failure == "port-in-use" and request.rdzv_port is None:
        # The launcher picked a free port and something took it before rank 0's store bound
        # it.
        outcome.message = (f"run {index}: the free rendezvous port the launcher picked was "
                           "taken before its store bound it")
    outcome.relaunched = (relaunch_allowed and outcome.launch_failure == "port-in-use"
                          and request.rdzv_port is None)
    if launched.network:
        outcome.network = {**launched.network,
                           "nodes": node_lines(request.run_dir, launched.stdout_paths)}
    write_json_atomically(record_path(request.run_dir), {
        **outcome.to_dict(case, launcher.name, launched.commands, launched.wait.elapsed_s),
        **(labels or {})})
    # The worker's record is held once: in run-<k>.json, stamped; the file it handed it over in
    # goes (assemble_run has read it).
    (request.run_dir / RECORD_FILE).unlink(missing_ok=True)
    return outcome


def run_rounds(case: Case, launcher: Launcher, request_for: Callable[..., LaunchRequest],
               run_dir: Callable[[int], Path], rounds: int, max_rounds: int, *,
               stacks: dict[str, Stack] | None = None,
               more_wanted: Callable[[Runs], bool] = lambda runs: False,
               report_run: Callable[[Runs], None] = lambda runs: None,
               counts: Callable[[dict[str, RunOutcome]], bool] = lambda in_round: True,
               give_up: Callable[[Runs], bool] = lambda runs: False,
               most_rounds: int | None = None) -> Runs:
    """`rounds` counted rounds of one run per side of `stacks` (the first the reference; None:
    one side, the request's own stack), then more while `more_wanted`, up to `max_rounds`
    counted and `most_rounds` (default `max_rounds`) in all, or until `give_up` says the runs so
    far make further ones pointless; stops at a failure. `run_dir(k)`: run k's folder, its record
    saved beside it. A round `counts` does not count is set aside, out of
    `Runs.complete_rounds`, and another runs in its place. Where there are several sides, each
    record names its side, its round (`pair`), its place and the round's order (`pair_order`, a
    letter per side in the order of `stacks`: AB or BA for two). `report_run(runs)` hears of
    each run (`runs.latest`) once its record is saved."""
    sides = list(stacks) if stacks else [ONE_STACK]
    letters = {side: chr(ord("A") + place) for place, side in enumerate(sides)}
    done = Runs(by_side={side: [] for side in sides})
    while True:
        done.round_number += 1
        order = round_order(done.round_number, sides)
        done.in_round = {}
        for place, side in enumerate(order, start=1):
            index = len(done.order) + 1
            labels = {"side": side, "pair": done.round_number, "place_in_pair": place,
                      "pair_order": "".join(letters[each] for each in order),
                      "stack": stacks[side].describe()} if stacks and len(sides) > 1 else None
            while True:
                folder = run_dir(index)
                request = request_for(folder, stacks[side]) if stacks else request_for(folder)
                outcome = run_once(case, launcher, request, index, labels,
                                   relaunch_allowed=not done.relaunched)
                done.latest = done.in_round[side] = outcome
                if not outcome.relaunched:
                    break
                report_run(done)
                set_aside(folder)
                done.relaunched.append(outcome)
            done.order.append(side)
            done.by_side[side].append(outcome)
            report_run(done)
            if outcome.outcome != "ok":
                done.failed, done.failed_side = outcome, side
                return done
        if not counts(done.in_round):
            done.set_aside.append(done.round_number)
        kept = done.round_number - len(done.set_aside)
        if done.round_number >= (most_rounds or max_rounds) or give_up(done) or (
                kept >= rounds and (kept >= max_rounds or not more_wanted(done))):
            return done
