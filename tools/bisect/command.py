"""Which change made it slower: bisect between two software stacks, down to the component.

A probe of the candidate's components (tools/bisect/components.py) runs the reference, a set of
the changes layered over it and two parts of that set in the same rounds, with the suite's own
run loop (tools/bisect/rounds.py), and asks which part carries the set's slowdown
(tools/bisect/rule.py). A probe of an ordered list of stacks (--stacks FILE; tools/bisect/stacks.py)
is a real A/B session of the suite (`python -m pytest perf_tests` with the candidate options;
its results.json read back). The search (tools/bisect/search.py) halves the changes so that k
changes take about log2(k) probes when one is at fault, and finds changes that are slow only
together. A probe still undecided at its cap is reported, never guessed. The answer is one
line, then the table of probes; every probe and the answer go to bisection.json in the work
folder as they happen (docs/bisect.md).

    rn50-perf bisect -k 1n1g_fp32 --perf-candidate-env GOMP_SPINCOUNT=300 \
        --perf-candidate-env MALLOC_ARENA_MAX=1
    rn50-perf bisect -k 1n1g_fp32 --perf-candidate-python /opt/new-env/bin/python
    rn50-perf bisect -k 1n1g_fp32 --stacks nightlies.txt
"""
from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from pathlib import Path

from perf_tests.cli.values import whole_number
from perf_tests.runs.launch import Stack
from tools.bisect.components import layered_stack, not_layered_lines, stack_components
from tools.bisect.lines import (estimate_line, finding_line, probe_table, ratio_of,
                                rounds_estimate_line, subset_text)
from tools.bisect.prober import (Prober)
from tools.bisect.rounds import (ProbeFailed, RoundsProber, SuiteRuns, first_rounds, split_table)
from tools.bisect.search import (MemoSplit, ProbeAnswer, Undecided, find_components, first_slower,
                                 most_probes)
from tools.bisect.stacks import (add_stack_options, describe, read_stack, read_stacks_file,
                                 reference_of, stack_of)
from tools.calibrate.command import CalibrationError, selected_cases, work_folder
from tools.cli import OneLineParser, add_work_dir, refuse_used_work_dir
from tools.command import verb_command
from tools.inputs import InputError, refused

PROG = verb_command("bisect")
# A probe's first try: this many pairs, judged at that cap on the 95% interval (6 pairs is the
# fewest that give one). A 21% slowdown is decided in 6 pairs on the 2-core VM (docs/bisect.md).
DEFAULT_PAIRS = 6
DEFAULT_MAX_PAIRS = 16


















# -- components ---------------------------------------------------------------------------------



def bisect_components(args: argparse.Namespace) -> int:
    candidate, reference = stack_of(args), reference_of(args)
    reference_facts = read_stack(reference, "the reference")
    candidate_facts = read_stack(candidate, "the candidate")
    components, left_out = stack_components(reference_facts, candidate_facts, candidate,
                                            reference)
    left_out = not_layered_lines(left_out)
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
    add_work_dir(parser, "the probes' sessions and bisection.json")
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
    refuse_used_work_dir(parser, args.work_dir)
    try:
        return (bisect_list if args.stacks else bisect_components)(args)
    except (InputError, ProbeFailed, CalibrationError) as error:
        return refused(PROG, error)
