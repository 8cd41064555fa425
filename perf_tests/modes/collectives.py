"""--perf-collectives: is the fabric itself slower? The interconnect probe alone, gated.

Each multi-device case's workers start as for a throughput run, in the same process group, but
run only the all-reduce probe (rn50_model/interconnect.py: a DDP bucket and the model's whole
gradient, nccl-tests' bus bandwidth), no training. The case's median `busbw_gbps` over its runs
is judged against the `busbw_gbps` its throughput baseline entry stores: below the band
(--perf-tolerance, default the profile's) in every run is a regression; a median below it that
not every run confirms takes more runs, up to --perf-set max-runs, and is inconclusive there. The
entries are recorded by the throughput gate (`--perf-update-baselines` without this flag), so this
mode never writes the baseline file. A one-device case has no interconnect: it skips, saying so.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from perf_tests.baselines.entries import BUSBW, GRADIENT_ALLREDUCE, median_of
from perf_tests.cli.settings import SettingsError
from perf_tests.core.cases import COLLECTIVES, Case, profile_cases
from perf_tests.judging.verdicts import (ERROR, IMPROVEMENT, INCONCLUSIVE, NO_BASELINE, PASS,
                                         REGRESSION)
from perf_tests.modes.base import EntryPlan, Mode, Report
from perf_tests.report.collectives import TITLE, markdown_section, terminal_table
from perf_tests.results.case_result import CaseResult
from perf_tests.runs.outcome import RunOutcome
from perf_tests.runs.protocol import Runs, run_rounds


@dataclass
class Plan(EntryPlan):
    tolerance: float
    max_runs: int


@dataclass(frozen=True)
class Judged:
    verdict: str
    message: str
    delta: float | None = None


def judge_busbw(case_id: str, runs: list[float], baseline: float | None, tolerance: float,
                more_runs: bool = False) -> Judged:
    """The runs' median bus bandwidth against the baseline's: a regression where the median
    and every run are below the band; a median below it that some run is not, undecided while
    more runs may come (`more_runs`) and inconclusive after."""
    median = median_of(runs)
    if baseline is None:
        return Judged(NO_BASELINE, f"{case_id}: busbw {median:.3g} GB/s; the baseline entry "
                      "stores no busbw_gbps: record one with --perf-update-baselines (without "
                      "--perf-collectives)")
    delta = median / baseline - 1
    floor = baseline * (1 - tolerance)
    text = (f"{case_id}: busbw {median:.3g} GB/s, {delta:+.0%} against the baseline "
            f"{baseline:.3g} GB/s (tolerance {tolerance:.0%}, runs "
            f"{', '.join(f'{value:.3g}' for value in runs)})")
    if median < floor:
        if all(value < floor for value in runs):
            return Judged(REGRESSION, text, delta)
        if more_runs:
            return Judged(INCONCLUSIVE, text, delta)
        return Judged(INCONCLUSIVE, text + ": not every run is below the band; rerun on a "
                      "quieter fabric or raise --perf-set max-runs", delta)
    if median > baseline * (1 + tolerance):
        return Judged(IMPROVEMENT, text + "; refresh the baseline with --perf-update-baselines",
                      delta)
    return Judged(PASS, text, delta)


def run_busbw(run: RunOutcome) -> float | None:
    return (run.record or {}).get(BUSBW)


class Collectives(Mode):
    kind = COLLECTIVES
    title = TITLE
    report = Report(terminal_table, (markdown_section,))

    @staticmethod
    def wanted(settings) -> bool:
        return settings.collectives

    @staticmethod
    def check(settings) -> None:
        if not settings.collectives:
            return
        for flag, asked in (("--perf-update-baselines", settings.update_baselines),
                            ("--perf-candidate-*", settings.candidate is not None),
                            ("--perf-find-max-batch", settings.find_max_batch),
                            ("--perf-time-to-train", settings.time_to_train)):
            if asked:
                raise SettingsError(
                    f"{flag} with --perf-collectives: the probe alone is judged against the "
                    "busbw_gbps the throughput entries store (recorded by --perf-update-baselines "
                    "without --perf-collectives); run them in sessions of their own")
        if settings.interconnect_iters < 1:
            raise SettingsError("--perf-collectives with --perf-set interconnect-iters=0 probes "
                                "nothing; give 1 or more (default 5)")

    def cases(self) -> list[Case]:
        return profile_cases(self.context)

    def skip_reason(self, case: Case) -> str | None:
        if case.devices < 2:
            return "one device: no interconnect to probe (--perf-collectives)"
        return self.context.workers.skip_reason(case)

    def plan(self, case: Case) -> Plan:
        context = self.context
        config = context.workers.train_config(case)
        config.validate(context.host.device_type)
        entry, reason = context.baselines.lookup(
            case.case_id, context.stored.comparable(case, COLLECTIVES))
        given = context.settings.fixed_tolerance
        tolerance = given if given is not None else context.profile.tolerance
        return Plan(case, config, entry, reason, tolerance, context.settings.max_runs)

    def run(self, plan: Plan) -> Runs:
        context, case = self.context, plan.case
        request_for = context.workers.launch_requests(
            case, plan.config, context.results.path / case.case_id / "config.json",
            extra_args=("--interconnect-only",))
        baseline = plan.entry.busbw_gbps if plan.entry else None

        def heard(runs: Runs) -> None:
            run = runs.latest
            busbw = run_busbw(run)
            context.progress(f"{case.case_id} probe {run.index}: "
                             + (f"busbw {busbw:.3g} GB/s" if busbw is not None else run.outcome))

        def more_runs_wanted(runs: Runs) -> bool:
            done = [run_busbw(run) for run in runs.runs if run_busbw(run) is not None]
            if not done or baseline is None or len(done) >= plan.max_runs:
                return False
            return judge_busbw(case.case_id, done, baseline, plan.tolerance,
                               more_runs=True).verdict == INCONCLUSIVE

        return run_rounds(case, context.launcher, request_for,
                          partial(context.results.run_dir, case.case_id), context.settings.runs,
                          plan.max_runs, more_wanted=more_runs_wanted, report_run=heard)

    def judge(self, plan: Plan, runs: Runs) -> CaseResult:
        case = plan.case
        ok = [run.record for run in runs.runs if run.outcome == "ok" and run.record]
        busbw = [record[BUSBW] for record in ok if record.get(BUSBW) is not None]
        details = {"tolerance": plan.tolerance, "runs_busbw_gbps": busbw,
                   "ranks": case.devices,
                   "environment": self.context.stored.first_environment(ok)}
        if plan.entry is not None and plan.entry.busbw_gbps is not None:
            details["baseline_busbw_gbps"] = plan.entry.busbw_gbps
        failed = runs.failed
        if failed is not None:
            return self.result(case, ERROR, f"{case.case_id}: {failed.message}",
                               failure_tail=failed.stderr_tail, **details)
        if not busbw:
            return self.result(case, ERROR, f"{case.case_id}: no run measured a bus bandwidth",
                               **details)
        details[BUSBW] = median_of(busbw)
        details[GRADIENT_ALLREDUCE] = median_of([record.get(GRADIENT_ALLREDUCE) for record in ok])
        details["messages"] = ok[-1]["interconnect"].get("messages")
        if plan.entry is None:
            return self.result(case, NO_BASELINE, f"{case.case_id}: busbw {details[BUSBW]:.3g} "
                               f"GB/s; {plan.no_entry_reason}", **details)
        judged = judge_busbw(case.case_id, busbw, plan.entry.busbw_gbps, plan.tolerance)
        details["busbw_delta"] = judged.delta
        return self.result(case, judged.verdict, judged.message, **details)
