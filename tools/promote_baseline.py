"""Promote measured results to baseline entries: a results.json in, a reviewed baseline file out.

Every measured case of the results file (or those a `-k` expression selects: substrings of the case
id joined with `and`, `or`, `not` and parentheses, as in pytest -k) becomes an entry of the baseline
file: median_ips, runs_ips, cv, speedup, tolerance, recorded_at, source ("promoted from <results
file>"), environment, settings and, where the case was profiled (--perf-explain), its op_profile,
shaped as `--perf-update-baselines` writes them, and the lineage of the entry it replaces
(perf_tests/baselines/lineage.py), which it prints. The tolerance is `auto` (each gate derives its
band from the noise of the entry's runs and its own, docs/verdicts.md), as `--perf-update-baselines`
stores it, unless `--tolerance` sets a number. A time-to-train case (`_ttt`) also keeps its time to
train and top-1 figures, takes no tolerance derived from its img/s (the time-to-train profile's band
applies) and is recorded from its profile's trainings (3 in smoke). Cases that were not measured
(skipped, oom, an error without runs, a time-to-train case without its figures) and max-batch
searches (`--perf-find-max-batch --perf-update-baselines` records their boundary) are listed and not
promoted. A/B cases are refused, even with `--force`: their runs are a candidate stack's, in pairs,
and `--perf-update-baselines` refuses a candidate too; so is a speedup over 1.1 x its devices, which
cannot be true (its 1n1g reference ran slow). A case measured on fewer runs than a baseline is
recorded from (the profile's, 10), or whose verdict was regression, error or not-converged, is
promoted only with `--force` (an error only in writing the baseline after measuring is no reason:
its runs are good): without it nothing is written and one line says which cases and why. The
old/new/delta table is printed (and a time-to-train case's old and new time and top-1); the file is
written atomically under its lock, keeping every other entry. `--dry-run` writes nothing.

    rn50-perf promote perf_results/20261122-023119/results.json -k "fp32 and not 2n"

Default baseline file: baselines/<hardware of the results>.json in the current folder (the
project pytest runs in, as the suite's default: a checkout's root, or the folder of an installed
suite's user). Exit status:
0 written (or would be, with --dry-run), 1 nothing measured to promote, 2 a bad input, an A/B
case or a case that needs --force.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from perf_tests.baselines.checks import impossible, marked_refusal, refusals, refused_reference
from perf_tests.baselines.entries import entry_from_row
from perf_tests.baselines.file import BaselineError, load_baseline_file, update_baseline_file
from perf_tests.baselines.lineage import ACCEPTED, lineage_text
from perf_tests.cli.selection import KeywordError, keyword_selector
from perf_tests.cli.values import tolerance
from perf_tests.core.cases import (AB, MAX_BATCH, PROFILES, TIME_TO_TRAIN, TIME_TO_TRAIN_PROFILES,
                                   Case, is_time_to_train)
from perf_tests.core.rows import Row, ThroughputRow
from perf_tests.core.row_values import marked_runs_of, row_of, rows_of
from perf_tests.core.text import aligned, counted, ips, seconds_text
from perf_tests.judging.verdicts import (ERROR, NOT_CONVERGED, OOM, REGRESSION, SKIPPED,
                                         failed_measures)
from perf_tests.report.tables import ordered
from rn50_model.op_profile import summary_problem
from tools import moved_line
from tools.cli import OneLineParser
from tools.command import verb_command
from tools.inputs import InputError, check_rows, read_results_file, refused

PROG = verb_command("promote")
UNMEASURED = (SKIPPED, ERROR, OOM)
# Verdicts whose runs are not a baseline unless the user says so: a slowdown the gate caught, or
# a case whose runs were measured but then failed (e.g. the baseline file could not be written).
NEEDS_FORCE = (REGRESSION, ERROR, NOT_CONVERGED)


# -- -k expressions: pytest's own, matched against the case id ------------------------------

def keyword_matcher(expression: str):
    """A predicate on case ids for pytest's -k `expression`; InputError where pytest would not
    parse it, or where it is empty (without -k every case is promoted)."""
    advice = "use words joined by and/or/not, e.g. -k \"1n8g and not amp\""
    if not expression.strip():
        raise InputError(f"-k {expression!r}: is empty; {advice}")
    try:
        selects = keyword_selector(expression)
    except KeywordError as error:
        raise InputError(f"{error}; {advice}") from None
    return lambda case_id: selects([case_id])


# -- entries -------------------------------------------------------------------------------------

def unmeasured_reason(case_id: str, row: Row | dict) -> str | None:
    """Why a case cannot become a baseline entry, or None if it can."""
    row = row_of(case_id, row)
    runs = row.runs_ips
    measured = (isinstance(runs, tuple) and runs
                and all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
                        for v in runs))
    shared = row.shared_devices if isinstance(row, ThroughputRow) else None
    if shared:
        return (f"its ranks shared devices ({shared}, --perf-set share-devices=on): a path "
                "check, never a baseline")
    if row.kind == MAX_BATCH:
        return "a max-batch search: record it with --perf-find-max-batch --perf-update-baselines"
    if row.verdict in UNMEASURED and not (measured and row.verdict in NEEDS_FORCE):
        return str(row.verdict)
    if not measured:
        return "no runs"
    if row.kind == TIME_TO_TRAIN and not row.runs_time_to_train_s:
        # A training that crashed keeps the img/s of those that ended, but no time to train.
        return "no time-to-train figures"
    return None


def op_profile_problem(row: Row) -> str | None:
    """What is wrong with the case's operator profile (--perf-explain), or None where it has
    a good one or none."""
    if not isinstance(row, ThroughputRow):
        return None
    if "op_profile" in row.nulls:
        return summary_problem(None)
    return summary_problem(dict(row.op_profile)) if row.op_profile else None


def baseline_runs(document: dict, case_id: str = "") -> int:
    """The runs a baseline is recorded from under the results' profile (any profile's most,
    where the file names none); for a time-to-train case, the trainings its profile runs."""
    if is_time_to_train(case_id):
        profiles = TIME_TO_TRAIN_PROFILES
        profile = profiles.get(document.get("profile"))
        return profile.runs if profile else max(p.runs for p in profiles.values())
    profile = PROFILES.get(document.get("profile"))
    return profile.baseline_runs if profile else max(p.baseline_runs for p in PROFILES.values())


def force_reasons(entries: dict[str, dict], rows: dict[str, Row | dict],
                  document: dict) -> list[str]:
    """'1n1g_fp32_b8, 1n2g_fp32_b8 have 3 runs ...': why these entries need --force, by the
    rule --perf-update-baselines applies (perf_tests/baselines/checks.py)."""
    rows = rows_of(rows)
    reasons = []
    required_of = {case_id: baseline_runs(document, case_id) for case_id in entries}
    marked = {case_id: marked_refusal(marked_runs_of(rows[case_id]),
                                      len(rows[case_id].runs_ips), required_of[case_id])
              for case_id in entries}
    reasons += [f"{case_id}: {clause[0]}" for case_id, clause in marked.items() if clause]
    for required in sorted(set(required_of.values())):
        few = [case_id for case_id, entry in entries.items() if not marked[case_id]
               and required_of[case_id] == required and len(entry["runs_ips"]) < required]
        if few:
            counts = sorted({len(entries[case_id]["runs_ips"]) for case_id in few})
            reasons.append(f"{', '.join(few)} {'has' if len(few) == 1 else 'have'} "
                           f"{'/'.join(map(str, counts))} runs, fewer than the {required} a "
                           f"baseline is recorded from (rerun with --perf-runs {required})")
    profile = PROFILES.get(document.get("profile"))
    for case_id, entry in entries.items():
        # The suite's other checks on a baseline (the run count is above, for all at once).
        row = rows[case_id]
        throughput = row.kind != TIME_TO_TRAIN
        untrusted = refusals(entry["runs_ips"], wanted_runs=0,
                             tolerance=profile.tolerance if profile and throughput else None,
                             speedup=entry.get("speedup") if throughput else None,
                             devices=row.devices,
                             refused_reference=refused_reference(case_id, document["cases"])
                             if throughput else None)
        if untrusted:
            reasons.append(f"{case_id}: {'; '.join(untrusted)}")
    for verdict in NEEDS_FORCE:
        # An error only in writing the baseline after measuring (the suite says so) leaves
        # good runs: promoting them is what its message tells the user to do.
        cases = [case_id for case_id in entries if rows[case_id].verdict == verdict
                 and not rows[case_id].baseline_write_failed]
        named = {case_id: failed_measures(verdict, rows[case_id]) for case_id in cases}
        reasons += [f"{case_id} fails the gate: {'; '.join(measures)}"
                    for case_id, measures in named.items() if measures]
        cases = [case_id for case_id in cases if not named[case_id]]
        if cases:
            reasons.append(f"{', '.join(cases)} {'was' if len(cases) == 1 else 'were'} "
                           f"judged {verdict}")
    return reasons


def promoted_entry(case_id: str, row: Row | dict, document: dict, source: str,
                   tolerance: float | str | None) -> dict:
    """The entry `--perf-update-baselines` would have written for this case: its band `auto`
    unless `--tolerance` gives a number. A time-to-train case keeps its time and top-1 figures,
    and no tolerance unless `--tolerance` gives one: a band derived from its img/s would judge
    its time (the time-to-train profile's band applies)."""
    return entry_from_row(case_id, row, environment=document.get("environment") or {},
                          source=source, tolerance=tolerance)


def shown_path(path: Path) -> str:
    """Inside the current folder (the project), relative to it: the text a reviewer sees in the
    diff."""
    resolved = path.resolve()
    try:
        return str(resolved.relative_to(Path.cwd()))
    except ValueError:
        return str(resolved)


def promotion_table(entries: dict[str, dict], before: dict[str, dict]) -> list[str]:
    header = ("case", "old img/s", "new img/s", "delta", "runs", "cv", "old tolerance",
              "new tolerance")
    rows = []
    for case_id, entry in ordered(entries_as_rows(entries)):
        old = before.get(case_id) or {}
        old_ips = old.get("median_ips")
        rows.append((case_id, ips(old_ips) if old_ips else "none", ips(entry["median_ips"]),
                     f"{entry['median_ips'] / old_ips - 1:+.1%}" if old_ips else "new",
                     str(len(entry["runs_ips"])), f"{entry['cv']:.1%}",
                     str(old.get("tolerance", "-")), str(entry.get("tolerance", "-"))))
    return aligned([header] + rows, {0})


def time_to_train_lines(entries: dict[str, dict], before: dict[str, dict]) -> list[str]:
    """What a time-to-train entry is judged on, old against new, one line per case."""
    def figures(entry: dict) -> str:
        seconds = entry.get("time_to_train_s")
        top1 = entry.get("top1")
        return (f"{seconds_text(seconds) if seconds else 'not converged'}, "
                f"top-1 {f'{top1:.1%}' if top1 is not None else '-'}")

    return [f"{case_id}: time to train {figures(before[case_id]) if case_id in before else 'none'}"
            f" -> {figures(entry)}"
            for case_id, entry in sorted(entries.items()) if is_time_to_train(case_id)]


def lineage_lines(entries: dict[str, dict], before: dict[str, dict]) -> list[str]:
    """'1n1g_fp32_b8: lineage 20.1 (2026-11-20) -> 19.8 (2026-11-25) -> 19.5 img/s': the lineage
    each promoted entry extends (perf_tests/baselines/lineage.py), for those that replace one."""
    return [f"{case_id}: lineage {lineage_text(before[case_id], entry['median_ips'])}"
            + (f"; accepted with --force: {'; '.join(entry[ACCEPTED])}"
               if entry.get(ACCEPTED) else "")
            for case_id, entry in sorted(entries.items()) if before.get(case_id)]


def entries_as_rows(entries: dict[str, dict]) -> dict[str, dict]:
    """Entries keyed by case id, with the shape fields `ordered` sorts on."""
    rows = {}
    for case_id, entry in entries.items():
        case = Case.parse(case_id)
        rows[case_id] = {**entry, "nodes": case.nodes, "gpus_per_node": case.gpus_per_node,
                         "precision": case.precision, "batch_per_device": case.batch_per_device}
    return rows


# -- command line ------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, metavar="RESULTS_JSON",
                        help="a session's results.json")
    parser.add_argument("--baseline-file", type=Path,
                        help="baseline file to update (default: baselines/<hardware>.json in "
                             "the current folder, the hardware named in the results)")
    parser.add_argument("-k", dest="keyword", metavar="EXPR",
                        help="promote only the case ids this selects, as pytest -k does "
                             "(default: every measured case)")
    parser.add_argument("--tolerance", type=tolerance,
                        help="tolerance to store in every promoted entry, a fraction (default: "
                             "auto, a band each gate derives from the noise of the entry's runs "
                             "and its own, docs/verdicts.md)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the table, write nothing (default: write)")
    parser.add_argument("--force", action="store_true",
                        help="promote cases with fewer runs than a baseline is recorded from, "
                             "or judged regression, error or not-converged; never an A/B case "
                             "(default: refuse, saying which)")
    return parser


def run(args: argparse.Namespace) -> int:
    document = read_results_file(args.results, "results file")
    cases = rows_of(check_rows(args.results, document["cases"]))
    hardware = document.get("hardware")
    if not args.baseline_file and not isinstance(hardware, str):
        raise InputError(f"results file {args.results} names no hardware; pass --baseline-file")
    baseline_path = args.baseline_file or Path.cwd() / "baselines" / f"{hardware}.json"

    selected = cases
    if args.keyword is not None:
        matches = keyword_matcher(args.keyword)
        selected = {case_id: row for case_id, row in cases.items() if matches(case_id)}
        if not selected:
            raise InputError(f"-k {args.keyword!r} selects none of the cases in {args.results} "
                             f"({', '.join(sorted(cases))})")
    ab_cases = [case_id for case_id, row in ordered(selected) if row.kind == AB]
    if ab_cases:
        # As --perf-update-baselines refuses a candidate: the runs are the candidate stack's, and
        # their count is of pairs.
        raise InputError(f"not promoted: {', '.join(ab_cases)} "
                         f"{'is an A/B case' if len(ab_cases) == 1 else 'are A/B cases'}, a "
                         "candidate stack's runs in pairs with this stack's, never a baseline "
                         "(not even with --force); rerun without --perf-candidate-*, or with "
                         "--perf-update-baselines on the stack you want as the baseline, or leave "
                         "those cases out with -k")
    source = f"promoted from {shown_path(args.results)}"
    entries, skipped = {}, []
    for case_id, row in ordered(selected):
        reason = unmeasured_reason(case_id, row)
        problem = op_profile_problem(row)
        if problem:
            raise InputError(f"results file {args.results}: case {case_id} has an op_profile "
                             f"that {problem}; fix it, or leave the case out with -k")
        if reason:
            skipped.append(f"{case_id} ({reason})")
        else:
            entries[case_id] = promoted_entry(case_id, row, document, source, args.tolerance)
            accepted = failed_measures(row.verdict, row)
            if accepted:   # promoted only with --force: its lineage item keeps what it accepted
                entries[case_id][ACCEPTED] = accepted

    try:
        current = load_baseline_file(baseline_path)
    except BaselineError as error:
        raise InputError(str(error)) from None
    if current.hardware and hardware and current.hardware != hardware:
        raise InputError(f"baseline file {baseline_path} is for {current.hardware}, results "
                         f"{args.results} are from {hardware}; pass the baseline file of "
                         f"{hardware} with --baseline-file")
    if not entries:
        print(f"nothing to promote from {args.results}: not measured: {', '.join(skipped)}")
        return 1
    never = [f"{case_id}: {clause}" for case_id, entry in entries.items()
             if selected[case_id].kind != TIME_TO_TRAIN
             for clause in impossible(entry.get("speedup"), selected[case_id].devices)]
    if never:
        raise InputError(f"not promoted (not even with --force): {'; '.join(never)}; record "
                         "the 1n1g case and these again, on a quiet host, or leave these out "
                         "with -k")
    reasons = force_reasons(entries, selected, document)
    if reasons and not args.force:
        raise InputError(f"not promoted: {'; '.join(reasons)}; pass --force to promote "
                         "anyway, or leave those cases out with -k")
    if args.dry_run:
        before = current
    else:
        try:
            before = update_baseline_file(baseline_path, hardware or current.hardware or "unknown",
                                          entries)
        except BaselineError as error:
            raise InputError(str(error)) from None
        except OSError as error:
            raise InputError(f"cannot write baseline file {baseline_path} "
                             f"({error.strerror or error}); check the folder's permissions") \
                from None

    print("\n".join(promotion_table(entries, before.entries)
                    + time_to_train_lines(entries, before.entries)
                    + lineage_lines(entries, before.entries)))
    if skipped:
        print(f"not promoted (not measured): {', '.join(skipped)}")
    written = counted(len(entries), "entry", "entries")
    kept = counted(len(set(before.entries) - set(entries)), "other entry", "other entries")
    if args.dry_run:
        print(f"dry run: {baseline_path} not changed ({written} would be written, {kept} kept)")
    else:
        print(f"wrote {written} to {baseline_path} (kept {kept}); review it with git diff")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return run(args)
    except InputError as error:
        return refused(PROG, error)


if __name__ == "__main__":
    raise SystemExit(moved_line("promote_baseline"))
