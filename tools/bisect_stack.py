"""Which change made it slower: bisect between two software stacks, down to the component.

A probe of the candidate's components (tools/stack_components.py) runs the reference, a set of
the changes layered over it and two parts of that set in the same rounds, with the suite's own
run loop (tools/bisect_rounds.py), and asks which part carries the set's slowdown
(tools/bisect_rule.py). A probe of an ordered list of stacks (--stacks FILE; tools/stacks.py)
is a real A/B session of the suite (`python -m pytest perf_tests` with the candidate options;
its results.json read back). The search (tools/bisect_search.py) halves the changes so that k
changes take about log2(k) probes when one is at fault, and finds changes that are slow only
together. A probe still undecided at its cap is reported, never guessed. The answer is one
line, then the table of probes; every probe and the answer go to bisection.json in the work
folder as they happen (docs/bisect.md).

    python3 -m tools.bisect_stack -k 1n1g_fp32 --perf-candidate-env GOMP_SPINCOUNT=300 \
        --perf-candidate-env MALLOC_ARENA_MAX=1
    python3 -m tools.bisect_stack -k 1n1g_fp32 --perf-candidate-python /opt/new-env/bin/python
    python3 -m tools.bisect_stack -k 1n1g_fp32 --stacks nightlies.txt
"""
from __future__ import annotations

import argparse
import math
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from perf_tests.runs.launchers import Stack
from perf_tests.storage import write_json_atomically
from perf_tests.text import aligned
from perf_tests.values import whole_number
from tools.bisect_rounds import (MARKED_ROUNDS_FACTOR, ProbeFailed, RoundsProber, SuiteRuns,
                                 first_rounds, split_table)
from tools.bisect_rule import NOT_SLOW, NOT_SLOW_PRECISION, SLOW
from tools.bisect_search import (Finding, MemoSplit, ProbeAnswer, Undecided, find_components,
                                 first_slower, most_probes)
from tools.calibrate import CalibrationError, selected_cases, work_folder
from tools.cli import OneLineParser, tool_command
from tools.inputs import InputError, read_json, refused
from tools.stack_components import layered_stack, stack_components
from tools.stacks import (add_stack_options, describe, read_stack, read_stacks_file, reference_of,
                          stack_of)

PROG = tool_command(__file__)
REPO_ROOT = Path(__file__).resolve().parent.parent
# A probe's first try: this many pairs, judged at that cap on the 95% interval (6 pairs is the
# fewest that give one). A 21% slowdown is decided in 6 pairs on the 2-core VM (docs/bisect.md).
DEFAULT_PAIRS = 6
# An inconclusive probe is run again with the A/B protocol's own sequential rule: from 8 pairs
# (the 99% interval's fewest) up to this cap.
RERUN_PAIRS = 8
DEFAULT_MAX_PAIRS = 16
# What the estimate before the first probe assumes (the 2-core VM, smoke 1n1g_fp32_b8): a run
# (a fresh launch, mostly start-up) and a session's own start and end.
RUN_SECONDS, SESSION_SECONDS = 10.0, 25.0
# A run of a component probe's rounds, which one process runs (a fresh launch each, no session
# of its own): the 22 probes of docs/bisect.md's quiet repeats took 150-160 s for 7 rounds of 4
# runs where no round was set aside, about 5.5 s a run.
ROUND_RUN_SECONDS = 6.0
# A `pass` of a list's probe says "not slow" to the search only where its 95% interval's low end
# rules out a slowdown of half the one being bisected (the slow stack's ratio: a pass at 0.90
# or above against a 33% slowdown; `Prober.pass_precision`). Before any probe was slow, half of
# the smallest slowdown worth bisecting: 10%, as a component probe asks of the whole
# (tools/bisect_rule.py). At its cap A/B passes any ratio above its band, however wide the
# interval: on the busy VM 6 pairs of a 33% slowdown passed at ratio 1.005, interval 0.08-2.27
# (docs/bisect.md). Such a pass is run again, then reported as undecided. Only the low end
# counts: a burst on the reference's side widens the high end (0.952-3.47 after 16 pairs of two
# harmless settings), which says nothing about a slowdown.
PASS_PRECISION = NOT_SLOW_PRECISION
PROGRESS = re.compile(r"^\S+ pair \d")
# The A/B verdicts a probe can be decided from; any other (error, skip) measured nothing.
DECIDING = ("regression", "pass", "improvement", "inconclusive")


@dataclass
class Prober:
    """The probes of one bisection, each an A/B session of one case: the reference stack runs
    the session (its interpreter, its settings), the candidate is the layered or listed stack."""
    case_id: str
    reference: Stack
    pytest_args: list[str]
    work: Path
    pairs: int
    max_pairs: int
    log: dict
    # runs one A/B session (its command and settings) and returns its last lines of output
    run_session: Callable[[list[str], dict], str] = field(default=None)
    records: list[dict] = field(default_factory=list)
    # the ratio of the slowdown being bisected, once a probe measured it (`slowdown_found`)
    bisected_ratio: float | None = None

    def __post_init__(self) -> None:
        self.run_session = self.run_session or run_streaming

    def __call__(self, subject: str, candidate: Stack, members: list[str]) -> ProbeAnswer:
        number = len(self.records) + 1
        print(f"probe {number}: {subject}; candidate: {candidate.describe()}", flush=True)
        record = {"probe": number, "subject": subject, "members": members,
                  "candidate": candidate.describe(), "attempts": []}
        self.records.append(record)
        row = self.attempt(record, candidate, self.pairs, self.pairs)
        slow, why = self.decide(row)
        if slow is None and row.get("verdict") in DECIDING:
            print(f"probe {number}: {why}; again with {RERUN_PAIRS} to {self.max_pairs} pairs",
                  flush=True)
            row = self.attempt(record, candidate, min(RERUN_PAIRS, self.max_pairs),
                               self.max_pairs)
            slow, why = self.decide(row)
        record.update({key: row.get(key) for key in ("verdict", "ratio", "ratio_ci", "pairs")})
        record["seconds"] = round(sum(a["seconds"] for a in record["attempts"]), 1)
        measured = row.get("verdict") in DECIDING
        if measured and slow is None:
            record["verdict"] = "undecided"
        elif measured:
            record["answer"] = SLOW if slow else NOT_SLOW
        self.save()
        print(f"probe {number}: {row.get('verdict')}, {figures_text(record)}, "
              f"{record['seconds']:.0f} s", flush=True)
        if not measured:
            message = row.get("message") or f"verdict {row.get('verdict')}"
            raise ProbeFailed(f"probe {number} ({subject}) measured nothing: {message}")
        if slow is None:
            raise Undecided(frozenset(members), f"probe {number} ({subject}) stayed {why}",
                            row.get("ratio"))
        return ProbeAnswer(slow, row.get("ratio"), record)

    def decide(self, row: dict) -> tuple[bool | None, str]:
        """Slow (True), not slow (False), or undecided (None) with why, from an A/B row.

        Until a slowdown is measured, A/B's own answer: a regression is slow, a pass or an
        improvement whose interval rules out PASS_PRECISION is not. After, the question is
        which side of half the bisected slowdown the probe lies: its interval's low end above
        that line is not slow, whatever A/B's 5% band said (an `inconclusive` at 0.94 whose
        interval is 0.90-0.97 holds none of a 30% slowdown); a regression whose ratio is below
        the line is slow. Anything else needs more pairs.
        """
        verdict, ratio, pairs = row.get("verdict"), row.get("ratio"), row.get("pairs")
        low = (row.get("ratio_ci") or [None])[0]
        line = 1 - self.pass_precision
        reaches = f"its 95% interval reaches {low:.3f}" if low is not None else "no interval"
        if self.bisected_ratio is None or self.bisected_ratio >= 1:
            if verdict == "regression":
                return True, ""
            if verdict in ("pass", "improvement") and low is not None and low >= line:
                return False, ""
        else:
            if low is not None and low >= line:
                return False, ""
            if verdict == "regression" and ratio is not None and ratio < line:
                return True, ""
            if verdict == "regression":
                return None, (f"a regression after {pairs} pairs of {ratio_of(ratio, 3)}, "
                              f"less than half the slowdown bisected "
                              f"({self.bisected_ratio:.3f}), and {reaches}")
        if verdict == "inconclusive" and (low is None or low < line):
            return None, f"inconclusive after {pairs} pairs ({reaches})"
        return None, (f"a {verdict} after {pairs} pairs that does not rule out a slowdown of "
                      f"{self.pass_precision:.1%} ({reaches})")

    @property
    def pass_precision(self) -> float:
        """The slowdown a pass must rule out to answer "not slow": half the one bisected."""
        if self.bisected_ratio is None or self.bisected_ratio >= 1:
            return PASS_PRECISION
        return (1 - self.bisected_ratio) / 2

    def slowdown_found(self, answer: ProbeAnswer) -> None:
        """A slow probe whose ratio is the slowdown being bisected (the whole candidate's, or
        the latest slow stack's) sets what later passes must rule out."""
        if answer.slow and answer.ratio is not None:
            self.bisected_ratio = answer.ratio
            self.log["bisected_ratio"] = answer.ratio
            print(f"the slowdown bisected: ratio {answer.ratio:.3f}; a pass answers 'not slow' "
                  f"where its 95% interval rules out {self.pass_precision:.1%}", flush=True)

    def attempt(self, record: dict, candidate: Stack, pairs: int, max_pairs: int) -> dict:
        """One A/B session; its case's row of results.json ({} where it wrote none)."""
        folder = self.work / f"probe-{record['probe']}" / f"attempt-{len(record['attempts']) + 1}"
        command = [self.reference.python, "-m", "pytest", str(REPO_ROOT / "perf_tests"), "-q",
                   "-p", "no:cacheprovider", "-k", self.case_id, "--perf-results", str(folder),
                   "--perf-runs", str(pairs), "--perf-set", f"max-runs={max_pairs}",
                   *candidate_options(candidate), *image_options(self.reference, candidate),
                   *self.pytest_args]
        started = time.monotonic()
        tail = self.run_session(command, dict(self.reference.env))
        seconds = time.monotonic() - started
        results = folder / "results.json"
        row = (read_json(results, "probe results").get("cases", {}).get(self.case_id, {})
               if results.exists() else {})
        if not row:
            row = {"verdict": "error", "message": f"the session wrote no result for "
                   f"{self.case_id} ({tail.strip() or 'no output'}); rerun it to see why: "
                   f"{shlex.join(command)}"}
        record["attempts"].append({"command": shlex.join(command), "results": str(results),
                                   "seconds": round(seconds, 1),
                                   **{key: row.get(key) for key in
                                      ("verdict", "ratio", "ratio_ci", "pairs",
                                       "min_detectable_slowdown")}})
        return row

    def save(self) -> None:
        self.log["probes"] = self.records
        write_json_atomically(self.work / "bisection.json", self.log)


def candidate_options(candidate: Stack) -> list[str]:
    """The A/B options that make `candidate` the session's candidate (its interpreter: inside
    its image, the image's)."""
    return ((["--perf-candidate-image", candidate.image.name] if candidate.image
             else ["--perf-candidate-python", candidate.python])
            + (["--perf-candidate-prefix", shlex.join(candidate.prefix)] if candidate.prefix
               else [])
            + [f"--perf-candidate-env={key}={value}" for key, value in candidate.env])


def image_options(reference: Stack, candidate: Stack) -> list[str]:
    """The session's own image (the reference's) and the runtime and interpreter of both."""
    image = reference.image or candidate.image
    if image is None:
        return []
    return ([f"--perf-image={reference.image.name}"] if reference.image else []) + [
        f"--perf-container-runtime={image.runtime}", f"--perf-image-python={image.python}"]


def run_streaming(command: list[str], settings: dict) -> str:
    """Runs an A/B session, echoing its pair lines as they come; the last lines it wrote."""
    env = {**os.environ, **settings}
    tail: list[str] = []
    with subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, bufsize=1) as session:
        for line in session.stdout:
            if PROGRESS.match(line):
                print(f"    {line.rstrip()}", flush=True)
            tail = (tail + [line])[-3:]
    return "".join(tail)


def figures_text(record: dict) -> str:
    ci = record.get("ratio_ci")
    ratio = record.get("ratio")
    return (f"ratio {ratio:.3f}" if ratio is not None else "no ratio") + \
        (f" (95% CI {ci[0]:.3f}-{ci[1]:.3f})" if ci else "") + f", {record.get('pairs')} pairs"


def probe_table(records: list[dict]) -> list[str]:
    header = ("probe", "subset", "pairs", "ratio", "95% CI", "verdict", "seconds")
    rows = [(str(r["probe"]), r["subject"], str(r.get("pairs") or "-"),
             f"{r['ratio']:.3f}" if r.get("ratio") is not None else "-",
             "{:.3f}-{:.3f}".format(*r["ratio_ci"]) if r.get("ratio_ci") else "-",
             str(r.get("verdict") or "-")
             + (f" ({len(r['attempts'])} tries)" if len(r["attempts"]) > 1 else ""),
             f"{r['seconds']:.0f}") for r in records]
    return aligned([header, *rows], {1, 5})


def rounds_estimate_line(changes: int, count_low: int, count_high: int, rounds: int,
                         max_rounds: int) -> str:
    """What a component bisection's probes take: a stack per arm each round."""
    arms = ("the reference, the whole and its two parts" if changes > 1
            else "the reference and the change")
    count = 4 if changes > 1 else 2
    rounds = first_rounds(rounds)
    each = count * rounds * ROUND_RUN_SECONDS
    return (f"estimate: {changes} changes, {count_low}-{count_high} probes of {count} stacks a "
            f"round ({arms}), {rounds} rounds at least: about {each / 60:.0f} min a probe here "
            f"(runs of ~{ROUND_RUN_SECONDS:.0f} s), {count_low * each / 60:.0f}-"
            f"{count_high * each / 60:.0f} min; an undecided probe runs more rounds, up to "
            f"{max(max_rounds, rounds)} ({MARKED_ROUNDS_FACTOR * max(max_rounds, rounds)} in all "
            "with those the host marks)")


def estimate_line(probes: str, count_low: int, count_high: int, pairs: int,
                  max_pairs: int) -> str:
    each = SESSION_SECONDS + 2 * pairs * RUN_SECONDS
    return (f"estimate: {probes}, {count_low}-{count_high} probes of {pairs} pairs, about "
            f"{each / 60:.0f} min each here ({2 * pairs} runs of ~{RUN_SECONDS:.0f} s and "
            f"~{SESSION_SECONDS:.0f} s of session): {count_low * each / 60:.0f}-"
            f"{count_high * each / 60:.0f} min; an inconclusive probe runs again with "
            f"{RERUN_PAIRS}-{max_pairs} pairs")


# -- components ---------------------------------------------------------------------------------

def subset_text(members: list[str], total: int) -> str:
    if total > 1 and len(members) == total:
        return f"all {total} changes"
    shown = ", ".join(members) if len(members) <= 3 else \
        f"{', '.join(members[:2])} and {len(members) - 2} more"
    return f"{shown} ({len(members)} of {total})" if total > 1 else shown


def bisect_components(args: argparse.Namespace) -> int:
    candidate, reference = stack_of(args), reference_of(args)
    reference_facts = read_stack(reference, "the reference")
    candidate_facts = read_stack(candidate, "the candidate")
    components, left_out = stack_components(reference_facts, candidate_facts, candidate,
                                            reference)
    if not components:
        raise InputError(
            f"the candidate ({describe(candidate)}) differs from this stack in nothing a "
            "bisection can layer (no variable, distribution or prefix"
            + (f"; not layered: {'; '.join(left_out)}" if left_out else "")
            + "); pass a candidate that differs, e.g. --perf-candidate-env KEY=VALUE")
    print(f"reference: {describe(reference)}; candidate: {describe(candidate)}")
    print(f"{len(components)} changes: " + "; ".join(c.change for c in components))
    for line in left_out:
        print(f"not layered: {line}")
    if args.list:
        return 0
    case_id = selected_case(args)
    work = prepared_folder(args)
    by_label = {c.label: c for c in components}
    log = {"case": case_id, "reference": describe(reference), "candidate": describe(candidate),
           "components": [c.to_dict() for c in components], "not_layered": left_out,
           "probes": []}
    k = len(components)
    measure = SuiteRuns(case_id, args.pytest_args, work)
    prober = RoundsProber(work, args.perf_runs, args.perf_max_runs, log,
                          [c.label for c in components], lambda names: subset_text(names, k),
                          lambda names, folder: layered_stack([by_label[n] for n in names],
                                                              folder, reference), measure,
                          reference=reference)
    # one culprit: the whole split in halves, a probe per halving, one more where the search
    # ends on a change measured only among others
    low = max(1, math.ceil(math.log2(k)))
    print(rounds_estimate_line(k, low, low + (1 if k > 2 else 0), args.perf_runs,
                               args.perf_max_runs), flush=True)
    started = time.monotonic()
    try:
        finding = find_components([c.label for c in components], MemoSplit(prober))
    except Undecided as undecided:
        return undecided_end(prober, log, undecided, started, split_table)
    line = finding_line(finding, k)
    return finished(prober, log, line, started, split_table, {
        "groups": [list(g) for g in finding.groups], "group_ratios": finding.group_ratios,
        "others": list(finding.others), "others_ratio": finding.others_ratio,
        "alone_ratios": finding.alone_ratios, "whole_ratio": finding.whole_ratio,
        "others_undecided": finding.others_undecided, "probes": finding.probes, "changes": k})


def ratio_of(value: float | None, digits: int = 2) -> str:
    return f"ratio {value:.{digits}f}" if value is not None else "ratio not measured"


def finding_line(finding: Finding, k: int) -> str:
    """`the slowdown follows GOMP_SPINCOUNT=300 (ratio 0.79); the other 3 changes: ratio 1.00`."""
    if not finding.groups:
        return (f"no change is slower: all {k} layered together, "
                f"{ratio_of(finding.others_ratio)} (not a regression)")
    parts = []
    for group, ratio in zip(finding.groups, finding.group_ratios):
        if len(group) == 1:
            parts.append(f"{group[0]} ({ratio_of(ratio)})")
        else:
            alone = ", ".join(f"{name} alone {ratio_of(finding.alone_ratios.get(name))}"
                              for name in group)
            parts.append(f"the interaction of {' and '.join(group)} (together "
                         f"{ratio_of(ratio)}; {alone})")
    others = len(finding.others)
    rest = (f"the other {others} change{'s' if others != 1 else ''}: "
            f"{ratio_of(finding.others_ratio)}" if others else "no other change")
    if finding.others_undecided:
        rest += f", not shown to be harmless ({finding.others_undecided})"
    part = (f" in part: all {k} changes together, {ratio_of(finding.whole_ratio)}"
            if explains_part(finding) else "")
    return f"the slowdown follows {' and '.join(parts)}{part}; {rest}"


# A culprit is named as explaining part of the slowdown below this share of the whole's.
PART_SHARE = 0.75


def explains_part(finding: Finding) -> bool:
    """Whether the groups found explain less than three quarters of the whole candidate's
    slowdown (their ratios multiplied, as independent slowdowns would be): the answer then says
    the whole's ratio beside theirs, so a partial culprit does not read as the whole story."""
    if finding.whole_ratio is None or None in finding.group_ratios:
        return False
    explained = math.prod(finding.group_ratios)
    return 1 - explained < PART_SHARE * (1 - finding.whole_ratio)


# -- an ordered list of stacks -----------------------------------------------------------------

def bisect_list(args: argparse.Namespace) -> int:
    stacks = read_stacks_file(args.stacks, args)
    if len(stacks) < 2:
        raise InputError(f"--stacks {args.stacks} lists {len(stacks)} stack"
                         f"{'' if len(stacks) == 1 else 's'}; list at least two, one a line, "
                         "the known-good one first")
    reference = stacks[0]
    if reference.stack.prefix:
        raise InputError(f"--stacks {args.stacks}: the first stack ({reference.name}) has a "
                         "prefix, but the first stack runs the A/B sessions themselves; put a "
                         "stack without one first")
    if all(named.stack == reference.stack for named in stacks[1:]):
        raise InputError(f"--stacks {args.stacks}: every stack is the same as the first "
                         f"({reference.name}); list stacks that differ")
    base = dict(reference.stack.env)
    for named in stacks:
        read_stack(named.stack if named is not reference else
                   Stack(python=reference.stack.python, image=reference.stack.image),
                   named.name, base)
    print(f"{len(stacks)} stacks; reference: {reference.name} ({describe(reference.stack)})")
    if args.list:
        for named in stacks[1:]:
            print(f"{named.name}: {describe(named.stack)}")
        return 0
    case_id = selected_case(args)
    work = prepared_folder(args)
    log = {"case": case_id, "stacks": [{"name": s.name, "stack": describe(s.stack)}
                                       for s in stacks], "probes": []}
    session_stack = Stack(python=reference.stack.python, env=reference.stack.env,
                          image=reference.stack.image)
    prober = Prober(case_id, session_stack, args.pytest_args, work, args.perf_runs,
                    args.perf_max_runs, log)
    most = most_probes(len(stacks))
    print(estimate_line(f"{len(stacks) - 1} stacks after the reference", min(most, 2), most,
                        args.perf_runs, args.perf_max_runs), flush=True)
    answers: dict[int, ProbeAnswer] = {}

    def probe(index: int) -> ProbeAnswer:
        named = stacks[index]
        answers[index] = prober(f"{named.name} (stack {index + 1} of {len(stacks)})",
                                listed_candidate(reference.stack, named.stack), [named.name])
        prober.slowdown_found(answers[index])
        return answers[index]

    started = time.monotonic()
    try:
        first = first_slower(len(stacks), probe)
    except Undecided as undecided:
        return undecided_end(prober, log, undecided, started, probe_table)
    if first is None:
        last = max(answers) if answers else None
        line = (f"no stack of the {len(stacks)} is slower than {reference.name}"
                + (f" ({stacks[last].name}: {ratio_of(answers[last].ratio)})"
                   if last is not None else ""))
    else:
        before = (f"{stacks[first - 1].name} before it: {ratio_of(answers[first - 1].ratio)}"
                  if first - 1 in answers else f"{reference.name} before it is the reference")
        line = (f"the slowdown starts at {stacks[first].name} (stack {first + 1} of "
                f"{len(stacks)}; {ratio_of(answers[first].ratio)} against {reference.name}); "
                f"{before}")
    return finished(prober, log, line, started, probe_table, {
        "first_slower": stacks[first].name if first is not None else None,
        "first_slower_index": first + 1 if first is not None else None,
        "probes": len(answers), "stacks": len(stacks)})


def listed_candidate(reference: Stack, candidate: Stack) -> Stack:
    """`candidate` as the session's candidate when the session runs in `reference`'s settings:
    a variable the reference sets and the candidate does not is unset before its prefix."""
    own = dict(candidate.env)
    unset = [key for key, _ in reference.env if key not in own]
    wrapper = ("env", *[part for key in unset for part in ("-u", key)]) if unset else ()
    return Stack(python=candidate.python, prefix=wrapper + candidate.prefix, env=candidate.env,
                 image=candidate.image)


# -- both -------------------------------------------------------------------------------------

def selected_case(args: argparse.Namespace) -> str:
    """The one case `-k` selects (collected as the sessions will), or InputError."""
    case_ids = selected_cases(["-k", args.select, *args.pytest_args])
    if len(case_ids) != 1:
        raise InputError(f"-k {args.select!r} selects {len(case_ids)} cases"
                         + (f" ({', '.join(case_ids)})" if case_ids else "")
                         + "; a bisection follows one case: name one, e.g. -k 1n1g_fp32_b8")
    return case_ids[0]


def prepared_folder(args: argparse.Namespace) -> Path:
    try:
        work = work_folder(args.work_dir)
    except CalibrationError as error:
        raise InputError(str(error)) from None
    print(f"work folder: {work}", flush=True)
    return work


Table = Callable[[list[dict]], list[str]]


def answered(prober: Prober | RoundsProber, log: dict, line: str, started: float, table: Table,
             finding: dict | None) -> None:
    """The answer and the finding into bisection.json, then the line and the table of probes."""
    log.update({"finding": finding, "answer": line,
                "seconds": round(time.monotonic() - started, 1)})
    prober.save()
    print(line)
    for row in table(prober.records):
        print(row)


def finished(prober: Prober | RoundsProber, log: dict, line: str, started: float, table: Table,
             finding: dict) -> int:
    answered(prober, log, line, started, table, finding)
    probes = len(prober.records)
    print(f"{probes} probe{'' if probes == 1 else 's'} in {log['seconds'] / 60:.1f} min; "
          f"bisection: {prober.work / 'bisection.json'}")
    return 0


def undecided_end(prober: Prober | RoundsProber, log: dict, undecided: Undecided,
                  started: float, table: Table) -> int:
    answered(prober, log, f"undecided: {undecided}; rerun with a higher --perf-max-runs or on "
             "a quieter host", started, table, None)
    return 1


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog=PROG, description=__doc__.split("\n\n")[0],
                           epilog="Arguments after -- (--perf-* options) go to every probe's "
                                  "runs.")
    parser.add_argument("-k", dest="select", default="1n1g_fp32",
                        help="the case, as pytest -k; it must select one (default 1n1g_fp32)")
    add_stack_options(parser)
    parser.add_argument("--stacks", type=Path, metavar="FILE",
                        help="an ordered list of stacks, one a line, the known-good first: find "
                             "the first slower one (docs/bisect.md; default: bisect the "
                             "candidate's components)")
    parser.add_argument("--perf-runs", type=whole_number(1), default=DEFAULT_PAIRS,
                        metavar="ROUNDS", help="the rounds a component probe starts with, and "
                        f"is first judged after: at least {first_rounds(1)}, the fewest that "
                        "give its 97%% interval (fewer are raised to it); the pairs a list's "
                        f"probe starts with (default {DEFAULT_PAIRS})")
    parser.add_argument("--perf-max-runs", type=whole_number(1), default=DEFAULT_MAX_PAIRS,
                        metavar="ROUNDS", help="the most rounds an undecided component probe "
                        "runs, the most pairs an inconclusive list probe is re-run with (default "
                        f"{DEFAULT_MAX_PAIRS})")
    parser.add_argument("--work-dir", type=Path,
                        help="a new (or empty) folder for the probes' sessions and "
                             "bisection.json (default: a new folder under the system's "
                             "temporary folder, named at the start)")
    parser.add_argument("--list", action="store_true",
                        help="list the changes (or stacks) and stop, measuring nothing")
    parser.add_argument("pytest_args", nargs="*", help="more pytest options, after --")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    has_candidate = (args.perf_candidate_python or args.perf_candidate_prefix
                     or args.perf_candidate_env or args.perf_candidate_image)
    if args.stacks and has_candidate:
        parser.error("--stacks with --perf-candidate-*: the stacks file names every stack; "
                     "drop one of them")
    if not args.stacks and not has_candidate:
        parser.error("nothing to bisect: pass the candidate's --perf-candidate-* options, or "
                     "--stacks FILE")
    if args.perf_max_runs < args.perf_runs:
        parser.error(f"argument --perf-max-runs: {args.perf_max_runs} is below --perf-runs "
                     f"{args.perf_runs}; raise it")
    work_dir = args.work_dir
    if work_dir and work_dir.exists() and (not work_dir.is_dir() or any(work_dir.iterdir())):
        parser.error(f"argument --work-dir: {work_dir} exists and is not an empty folder; pass "
                     "a new folder")
    try:
        return (bisect_list if args.stacks else bisect_components)(args)
    except (InputError, ProbeFailed, CalibrationError) as error:
        return refused(PROG, error)


if __name__ == "__main__":
    sys.exit(main())
