"""A/B on one host: this session's stack (the reference) against a candidate stack, no baseline.

For each case, runs alternate reference and candidate in ABBA order (pair 1 reference first,
pair 2 candidate first, ...), each a fresh launch, so the host's drift over minutes falls on
both sides alike (perf_tests/runs/protocol.py's run loop, which a stack bisection's probes use
with more stacks a round). After the profile's runs per side, more pairs follow while the verdict is
undecided, up to the cap. The verdict is on the pairs: the median per-pair ratio (candidate
over reference) and a distribution-free 95% interval for it (`stats.paired_ratio`: the sign
test's, which one wild run cannot widen; it takes 6 pairs). Before the cap, where the verdict
is looked at after every pair, it is taken on a 99% interval (8 pairs at least), so that the
looks do not add up to false alarms; the verdict reported is on the 95% one. The ratio of the
two sides' medians is recorded beside it; it is not judged, since the host's drift over the
session moves it and the pairs cancel that drift.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from perf_tests.cli.settings import SettingsError
from perf_tests.containers import check_image
from perf_tests.core.cases import AB as AB_KIND
from perf_tests.core.cases import CANDIDATE, REFERENCE, Case, profile_cases
from perf_tests.core.rows import ABRow
from perf_tests.core.stats import deciding_pairs, paired_ratio, summarize
from perf_tests.core.text import ips
from perf_tests.environment.differences import environment_diff
from perf_tests.judging.detectable import paired_min_detectable
from perf_tests.judging.footprint import memory_growth, run_figures, with_memory
from perf_tests.judging.host_marks import busy_tag, run_marks
from perf_tests.judging.paired import AB_TOLERANCE, INTERIM_CONFIDENCE, judge_pairs
from perf_tests.judging.verdicts import AMBIGUOUS, ERROR, INCONCLUSIVE, OOM, Judgement
from perf_tests.modes.base import Mode, Report
from perf_tests.report.ab import ab_figures, ab_table, sides_of, terminal_table
from perf_tests.report.tables import markdown_table, per_batch_tables, verdict_messages
from perf_tests.results.case_result import CaseResult
from perf_tests.runs.host import probe_host
from perf_tests.runs.launch import Stack
from perf_tests.runs.outcome import RunOutcome
from perf_tests.runs.protocol import Runs, run_rounds
from rn50_model.config import TrainConfig

FIRST_PAIRS = deciding_pairs(INTERIM_CONFIDENCE)   # the default: a verdict may follow them
MORE_PAIRS_FACTOR = 5


def pair_line(case_id: str, pair: int, pairs: int, max_pairs: int,
              in_pair: dict[str, RunOutcome]) -> str:
    """The progress line of the run that just ended, counted in pairs as the tables count:
    `1n1g_fp32_b8 pair 3/8, candidate: 20.1 img/s (pair ratio 0.991)`, with why the host was
    busy where the run was marked, as a throughput run's line says it."""
    side, run = list(in_pair.items())[-1]
    count = (f"{pair}/{pairs}" if pair <= pairs
             else f"{pair} (more pairs to decide, up to {max_pairs})")
    line = f"{case_id} pair {count}, {side}: " + (
        f"{ips(run.global_ips)} img/s" if run.outcome == "ok" else run.outcome)
    if len(in_pair) == 2 and all(each.outcome == "ok" for each in in_pair.values()):
        ratio = in_pair[CANDIDATE].global_ips / in_pair[REFERENCE].global_ips
        line += f" (pair ratio {ratio:.3f})"
    return line + busy_tag(run_marks(run))


def reference_stack(settings) -> str:
    """How reports name the reference: its image (`image a (bwrap)`), else its interpreter."""
    reference = settings.stack
    return reference.describe() if reference.image else f"python {reference.python}"


def pair_counts(runs: int, max_runs: int, runs_given: bool, max_runs_given: bool
                ) -> tuple[int, int]:
    """The pairs a case starts with and its cap, from the profile's (or the user's) runs. By
    default a verdict may follow the first 8 pairs (the 99% interval's fewest) and more follow
    while undecided, up to 5 x as many. Counts the user gave are kept (below 6 pairs, the
    verdict says that a 95% interval takes 6)."""
    pairs = runs if runs_given else max(runs, FIRST_PAIRS)
    cap = max_runs if max_runs_given else max(max_runs, MORE_PAIRS_FACTOR * pairs)
    return min(pairs, cap), cap


@dataclass
class Plan:
    case: Case
    config: TrainConfig
    tolerance: float
    single: ABRow          # this session's row of the case's 1n1g case (empty where none ran)
    pairs: int
    max_pairs: int

    def judgement(self, reference: list[float], candidate: list[float],
                  more_runs: bool) -> Judgement:
        single_ratio = self.single.ratio if self.case.devices > 1 else None
        return judge_pairs(reference, candidate, self.tolerance, more_runs, single_ratio)


class AB(Mode):
    """A/B on one host: each case on this session's stack and on the candidate, in pairs."""
    kind = AB_KIND
    uses_baseline = False
    report = Report(terminal_table,
                    (markdown_table, ab_table, per_batch_tables, verdict_messages), ab_figures)

    @staticmethod
    def wanted(settings) -> bool:
        return settings.candidate is not None

    @staticmethod
    def check(settings) -> None:
        if not settings.candidate:
            return
        if settings.update_baselines:
            raise SettingsError("--perf-update-baselines with a candidate (--perf-candidate-*): an "
                                "A/B session compares two stacks and never writes a baseline; "
                                "drop one of them")
        for single_stack, asked in (("--perf-find-max-batch", settings.find_max_batch),
                                    ("--perf-time-to-train", settings.time_to_train)):
            if asked:
                raise SettingsError(f"{single_stack} with a candidate (--perf-candidate-*): it "
                                    "runs on one stack; run it in a session of its own")

    @staticmethod
    def header(settings) -> dict:
        return {"reference": reference_stack(settings), "candidate": settings.candidate.describe(),
                "baseline_file": None}

    @property
    def candidate(self) -> Stack:
        return self.context.settings.candidate

    def prepare(self) -> None:
        if self.candidate.image is not None:
            check_image(self.candidate.image)
        probe_host(self.context.rootdir, self.candidate)  # its torch imports there

    def cases(self) -> list[Case]:
        return profile_cases(self.context)

    # -- one case --------------------------------------------------------------------------

    def plan(self, case: Case) -> Plan:
        context = self.context
        config = context.workers.train_config(case)
        config.validate(context.host.device_type)
        tolerance = context.settings.fixed_tolerance
        single_id = case.case_id if case.devices == 1 else case.single_device.case_id
        single = sides_of(single_id, context.rows.measured(single_id) or {})
        pairs, max_pairs = pair_counts(context.settings.runs, context.settings.max_runs,
                                       context.requested.runs, context.requested.max_runs)
        return Plan(case, config, AB_TOLERANCE if tolerance is None else tolerance,
                    single, pairs, max_pairs)

    def run(self, plan: Plan) -> Runs:
        context, case = self.context, plan.case
        request_for = context.workers.launch_requests(case, plan.config,
                                              context.results.path / case.case_id / "config.json")

        def report_run(runs: Runs) -> None:
            context.progress(pair_line(case.case_id, runs.round_number, plan.pairs,
                                       plan.max_pairs, runs.in_round))

        def more_pairs_wanted(runs: Runs) -> bool:
            pairs = runs.complete_rounds()
            reference, candidate = pairs[REFERENCE], pairs[CANDIDATE]
            more_runs = len(reference) < plan.max_pairs
            return plan.judgement(reference, candidate, more_runs).verdict == AMBIGUOUS

        return run_rounds(case, context.launcher, request_for,
                          partial(context.results.run_dir, case.case_id), plan.pairs,
                          plan.max_pairs, more_wanted=more_pairs_wanted, report_run=report_run,
                          stacks={REFERENCE: context.settings.stack, CANDIDATE: self.candidate})

    def judge(self, plan: Plan, runs: Runs) -> CaseResult:
        case, single = plan.case, plan.single
        describe = self.candidate.describe()
        sides = {}
        for side in (REFERENCE, CANDIDATE):
            records = [run.record for run in runs.by_side[side] if run.record]
            values = runs.ips(side)
            sides[side] = {"runs_ips": values,
                           "median_ips": summarize(values).median if values else None,
                           "environment": records[0]["environment"] if records else {},
                           # peak memory and the rest, per run and their medians, as a
                           # throughput row keeps them (judging/footprint.py)
                           **run_figures([run.record or {} for run in runs.by_side[side]
                                          if run.outcome == "ok"]),
                           # pair number -> why the host was unfit during that side's run
                           "marked_runs": {number: run_marks(run) for number, run
                                           in enumerate(runs.by_side[side], 1)
                                           if run.outcome == "ok" and run_marks(run)}}
        if sides[CANDIDATE]["environment"] and sides[REFERENCE]["environment"]:
            change = environment_diff(sides[REFERENCE]["environment"],
                                      sides[CANDIDATE]["environment"])
        else:
            change = None
        details = {REFERENCE: sides[REFERENCE], CANDIDATE: sides[CANDIDATE],
                   "reference_stack": reference_stack(self.context.settings),
                   "candidate_stack": describe, "run_order": runs.order,
                   "environment_diff": change}
        if runs.failed is not None:
            failed = runs.failed
            verdict = OOM if failed.outcome == "oom" else ERROR
            stack = (f"the candidate: {describe}" if runs.failed_side == CANDIDATE
                     else "the reference: this session's stack")
            return self.result(case, verdict, f"{case.case_id}: {failed.message} ({stack})",
                               runs_ips=runs.ips(CANDIDATE), failure_tail=failed.stderr_tail,
                               **details)
        complete = runs.complete_rounds()
        reference, candidate = complete[REFERENCE], complete[CANDIDATE]
        measured = paired_ratio(reference, candidate)
        decided = plan.judgement(reference, candidate, False)
        summary = summarize(candidate)
        details.update(summary.to_dict())
        details.update(measured.to_dict())
        details["delta"] = measured.ratio - 1
        details["tolerance"] = plan.tolerance
        details["min_detectable_slowdown"] = paired_min_detectable(measured, plan.tolerance)
        if case.devices > 1 and single.reference.median_ips and single.candidate.median_ips:
            details[REFERENCE]["speedup"] = sides[REFERENCE]["median_ips"] / \
                single.reference.median_ips
            details[CANDIDATE]["speedup"] = sides[CANDIDATE]["median_ips"] / \
                single.candidate.median_ips
            details["speedup"] = details[CANDIDATE]["speedup"]
            # What the verdict judged: the paired ratio over the 1n1g case's paired ratio (each
            # side's own speedup above is from its medians, as the stored-baseline gate's is).
            details["speedup_ratio"] = (measured.ratio / single.ratio if single.ratio
                                        else details["speedup"] / details[REFERENCE]["speedup"])
        elif case.devices == 1:
            details["speedup"] = 1.0
        verdict, message = decided.verdict, f"{case.case_id}: {decided.message}"
        if verdict == AMBIGUOUS:
            verdict = INCONCLUSIVE
            message += " after the most pairs --perf-set max-runs allows; rerun or raise it"
        # Peak memory as the gate judges it (the medians of each side's runs, the gate's
        # memory tolerance), the reference in the baseline's place: a candidate that holds
        # more memory fails here as it fails the gate, however fast it ran.
        memory = memory_growth(case.case_id, sides[CANDIDATE], sides[REFERENCE],
                               self.context.settings.memory_tolerance, was="reference")
        details.update(memory)
        if memory.get("memory_regression"):
            details["throughput_verdict"] = verdict
        elif memory.get("memory_clause"):
            message += f"; {memory['memory_clause']}"
        verdict, message = with_memory(case.case_id, verdict, message,
                                       memory.get("memory_regression"))
        message += f"; candidate: {describe}"
        return self.result(case, verdict, message, runs_ips=candidate, **details)
