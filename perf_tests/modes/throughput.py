"""The throughput gate (the default mode): each case's runs against its stored baseline entry.

A case runs the profile's runs in fresh worker processes, and more while the verdict is unclear
(up to --perf-set max-runs); its median img/s and, on several devices, its speedup over the
1n1g case are judged against the baseline entry through the gate's protocol
(perf_tests/judging/gate_protocol.py, perf_tests/judging/throughput_verdict.py): this module
gathers the figures and builds the result. Under --perf-update-baselines the runs become the
entry.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial

from perf_tests.baselines.checks import (impossible, marked_refusal, out_of_reach, recordable_runs,
                                         recordable_speedup, refusals, refused_reference,
                                         unmarked_needed)
from perf_tests.baselines.entries import entry_from_row
from perf_tests.baselines.file import BaselineEntry
from perf_tests.baselines.lineage import lineage_text
from perf_tests.context.baseline_store import ENTRIES, OtherMachine, Update, kept_runs
from perf_tests.core.cases import THROUGHPUT, Case, Profile, profile_cases
from perf_tests.core.stats import summarize
from perf_tests.core.text import ips
from perf_tests.environment.differences import environment_diff, settings_diff
from perf_tests.judging.footprint import memory_change, run_figures
from perf_tests.judging.gate_protocol import GateProtocol, run_counts
from perf_tests.judging.host_marks import busy_tag, marked_runs, run_marks, throttling_note
from perf_tests.judging.scaling_loss import probe_skipped
from perf_tests.judging.throughput_verdict import (CaseFacts, failure_verdict,
                                                   throughput_verdict, with_drift)
from perf_tests.judging.tolerance_band import Band
from perf_tests.judging.verdicts import NOT_COMPARABLE, Judgement, failed_measures
from perf_tests.modes.base import EntryPlan, Mode, Report
from perf_tests.modes.explain.comparison import markdown_section
from perf_tests.modes.explain.profiling import profile_operators
from perf_tests.report.plots import throughput_figures
from perf_tests.report.scaling import breakdown
from perf_tests.report.tables import (markdown_table, per_batch_tables, throughput_table,
                                      verdict_messages)
from perf_tests.results.case_result import CaseResult
from perf_tests.runs.outcome import RunOutcome
from perf_tests.runs.protocol import Runs, run_rounds


def run_line(case_id: str, run: RunOutcome, planned: int, max_runs: int,
             why_more: str = "more runs to decide") -> str:
    """`1n1g_fp32_b8 run 2/3: 6.69 img/s`, with why the host was busy where the run was
    marked."""
    count = (f"{run.index}/{planned}" if run.index <= planned
             else f"{run.index} ({why_more}, up to {max_runs})")
    outcome = f"{ips(run.global_ips)} img/s" if run.outcome == "ok" else run.outcome
    if run.relaunched:
        why = run.message.removeprefix(f"run {run.index}: ")
        return f"{case_id} run {count}: {run.outcome} ({why}); launching it again"
    return f"{case_id} run {count}: {outcome}{busy_tag(run_marks(run))}"


@dataclass
class Plan(EntryPlan):
    given_tolerance: float | str | None   # --perf-tolerance: a number, auto or None
    profile: Profile                      # its band for entries that store none, and its floor
    reference: float | None          # the 1n1g median a speedup is taken over
    baseline_speedup: float | None
    max_runs: int
    confirm_runs: int                # a regression stands on this many runs (or all allowed)
    recording: bool = False          # --perf-update-baselines: no run added to decide a verdict
    shared: str | None = None        # --perf-set share-devices=on: '2 ranks on 1 CUDA device'
    history: list[list[float]] | None = None   # the host's earlier unchanged sessions' runs

    @property
    def protocol(self) -> GateProtocol:
        """How its runs are judged (perf_tests/judging/gate_protocol.py)."""
        return GateProtocol(self.case, self.entry, self.given_tolerance, self.profile,
                            self.max_runs, self.confirm_runs, self.recording, self.history,
                            self.reference, self.baseline_speedup)

    def band(self, runs_ips: list[float]) -> Band:
        return self.protocol.band(runs_ips)

    def judgement(self, runs_ips: list[float], final: bool = False) -> Judgement | None:
        """The verdict on these runs against the entry; None without one."""
        return None if self.entry is None else self.protocol.judgement(runs_ips, final)

    def host_aware(self, runs_ips: list[float], marked: dict[int, list[str]],
                   decided: Judgement) -> Judgement:
        return self.protocol.host_aware(runs_ips, marked, decided)


class Throughput(Mode):
    kind = THROUGHPUT
    report = Report(throughput_table, (markdown_table, per_batch_tables, breakdown,
                                       verdict_messages, markdown_section), throughput_figures)

    @staticmethod
    def wanted(settings) -> bool:
        return not (settings.candidate or settings.find_max_batch or settings.collectives)

    def cases(self) -> list[Case]:
        return profile_cases(self.context)

    # -- one case --------------------------------------------------------------------------

    def baseline_entry(self, case: Case) -> tuple[BaselineEntry | None, str]:
        """The comparable entry for `case`, or None and why there is none."""
        return self.context.baselines.lookup(case.case_id, self.context.stored.comparable(case))

    def session_single_ips(self, case: Case) -> float | None:
        """This session's 1n1g median of `case`'s precision and batch (its unmarked runs', as
        its baseline entry is made of them); None where the session did not measure it."""
        measured = self.context.rows.measured(case.single_device.case_id)
        if measured is not None and measured.median_ips:
            return summarize(recordable_runs(list(measured.runs_ips),
                                             measured.marked_runs)).median
        return None

    def reference_ips(self, case: Case) -> float | None:
        """The 1n1g median for speedup: this session's, else the baseline's."""
        measured = self.session_single_ips(case)
        if measured is not None:
            return measured
        entry, _ = self.baseline_entry(case.single_device)
        return entry.median_ips if entry else None

    def plan(self, case: Case) -> Plan:
        context = self.context
        config = context.workers.train_config(case)
        config.validate(context.host.device_type)
        shared = context.workers.sharing(case)
        # Ranks sharing devices measure the path, not the case: no entry, no speedup is theirs.
        entry, no_entry_reason = (None, "") if shared else self.baseline_entry(case)
        single = case.devices == 1
        counts = run_counts(context.settings.runs, context.settings.max_runs)
        return Plan(case, config, entry, no_entry_reason, context.settings.tolerance,
                    context.profile, reference=None if shared else 1.0 if single
                    else self.reference_ips(case), baseline_speedup=1.0 if single else (
                        context.baselines.speedup_of(case) if entry else None),
                    max_runs=counts.max_runs, confirm_runs=counts.confirm_runs,
                    recording=context.settings.update_baselines, shared=shared,
                    history=context.history.runs(case.case_id, entry) if entry else None)

    def run(self, plan: Plan) -> Runs:
        context, case = self.context, plan.case
        request_for = context.workers.launch_requests(case, plan.config,
                                              context.results.path / case.case_id / "config.json")

        # Recording a baseline: a marked run is run again rather than recorded, and the old
        # entry's verdict asks for no more runs. Gating: every run counts, more while unclear.
        settings = context.settings
        rerun_marked = plan.recording and not settings.ignore_host_state
        # Unforced, a recording short of unmarked runs is refused whatever the rest measure.
        needed = unmarked_needed(context.profile.baseline_runs, settings.runs) \
            if rerun_marked and not settings.force_baselines else 0

        def report_run(runs: Runs) -> None:
            context.progress(run_line(case.case_id, runs.latest, settings.runs, plan.max_runs,
                                      "again for a marked run" if rerun_marked else
                                      "more runs to decide"))

        def more_runs_wanted(runs: Runs) -> bool:
            return plan.protocol.more_wanted(runs.runs_ips)

        def refused_anyway(runs: Runs) -> bool:
            unmarked = sum(1 for run in runs.runs if not run_marks(run))
            return out_of_reach(unmarked, len(runs.runs), plan.max_runs, needed)

        measured = run_rounds(case, context.launcher, request_for,
                              partial(context.results.run_dir, case.case_id),
                              settings.runs, plan.max_runs, more_wanted=more_runs_wanted,
                              report_run=report_run,
                              counts=(lambda in_round: not any(map(run_marks, in_round.values())))
                              if rerun_marked else (lambda in_round: True),
                              give_up=refused_anyway)
        done = measured.runs
        if measured.failed is None and len(done) < plan.max_runs and refused_anyway(measured):
            context.progress(f"{case.case_id}: no more runs: the host marked "
                             f"{len(marked_runs(done))} of its {len(done)} runs, and the "
                             f"{plan.max_runs - len(done)} more --perf-set max-runs="
                             f"{plan.max_runs} allows cannot make up the {needed} unmarked "
                             "runs a recording needs")
        return measured

    def judge(self, plan: Plan, runs: Runs) -> CaseResult:
        context, case, entry = self.context, plan.case, plan.entry
        records = [run.record for run in runs.runs if run.record]
        environment = context.stored.first_environment(records)
        band = plan.band(runs.runs_ips)
        details = {"tolerance": band.tolerance, "environment": environment,
                   "settings": context.stored.recorded(case, records),
                   "throttled_runs": [run.index for run in runs.runs
                                      if run.record and run.record.get("throttled")],
                   "marked_runs": {} if context.settings.ignore_host_state
                   else marked_runs(runs.runs),
                   "run_phases": runs.median_phases()}
        if plan.shared:
            details["shared_devices"] = plan.shared
        if entry is not None:
            if band.reason:
                details["tolerance_reason"] = band.reason
            details["baseline_ips"] = entry.median_ips
            details["baseline_speedup"] = plan.baseline_speedup
            details["environment_diff"] = environment_diff(entry.environment, environment)
            details["settings_diff"] = settings_diff(entry.settings, details["settings"])
        failed = runs.failed
        if failed is not None:
            verdict, message = failure_verdict(case.case_id, failed, entry)
            return self.result(case, verdict, message, runs_ips=runs.runs_ips,
                               failure_tail=failed.stderr_tail, baseline_entry=entry, **details)

        summary = summarize(runs.runs_ips)
        ok_records = [run.record or {} for run in runs.runs if run.outcome == "ok"]
        details.update(run_figures(ok_records))
        if case.devices > 1:
            details.update(probe_skipped(ok_records))
        reference = plan.reference
        speedup = 1.0 if case.devices == 1 else (summary.median / reference if reference
                                                 else None)
        details.update(summary.to_dict())
        details["speedup"] = speedup
        details["efficiency"] = speedup / case.devices if speedup else None
        verdict, message, details = throughput_verdict(plan.protocol, runs.runs_ips, details,
                                                       self.facts(plan, runs))
        return self.result(case, verdict, message, runs_ips=runs.runs_ips, baseline_entry=entry,
                           **details)

    def facts(self, plan: Plan, runs: Runs) -> CaseFacts:
        """What the verdict weighs beside the runs (perf_tests/judging/throughput_verdict.py)."""
        settings, reason = self.context.settings, plan.no_entry_reason
        single = plan.case.devices == 1
        return CaseFacts(
            settings.drift, settings.drift_window, settings.memory_tolerance, reason,
            reason.differences if isinstance(reason, OtherMachine) else None, plan.shared,
            None if single else self.session_single_ips(plan.case),
            None if single else self.baseline_entry(plan.case.single_device)[0],
            throttling_note([(run.index, run.record) for run in runs.runs if run.record]))

    def with_drift(self, entry: BaselineEntry, median: float, band: Band, details: dict,
                   message: str) -> tuple[str, str]:
        """A pass and its line with its drift named, under this session's --perf-drift
        (perf_tests/judging/throughput_verdict.py)."""
        settings = self.context.settings
        return with_drift(entry, median, band.tolerance, details, message, settings.drift,
                          settings.drift_window)

    def repro_cases(self, result: CaseResult) -> list[str]:
        """A multi-device case after its 1n1g case where this session measured that one: its
        speedup was taken over this session's 1n1g median (`reference_ips`), which a run of the
        case alone would take from the baseline instead; and where its recording was refused
        as impossible, which only recording its 1n1g reference again mends."""
        if result.case.devices == 1:
            return [result.case_id]
        single = result.case.single_device.case_id
        measured = self.context.rows.measured(single)
        slow_reference = bool(result.row.baseline_refused) and impossible(
            recorded_speedup(result), result.case.devices)
        return [single, result.case_id] if slow_reference or (
            measured is not None and measured.median_ips) else [result.case_id]

    def follow_up(self, plan: Plan, result: CaseResult, update: Update | None
                  ) -> tuple[CaseResult, Update | None]:
        """The operator profile; under --perf-update-baselines, for the entry it is stored with
        only where that entry can be written (a refused one would only cost a launch)."""
        recording = update is not None and not update.refused(self.context.settings.force_baselines)
        profiled = profile_operators(self.context, plan.case, plan.config, result, recording)
        if not recording or not profiled.row.op_profile:
            return profiled, update
        return profiled, replace(update, entry={**update.entry,
                                                "op_profile": dict(profiled.row.op_profile)})

    def baseline_update(self, result: CaseResult) -> Update | None:
        if not result.runs_ips or result.row.shared_devices:
            return None   # a shared case's refusal is in its line (shared_line)
        context = self.context
        marked = result.row.marked_runs
        recorded = recordable_runs(result.runs_ips, marked)
        speedup = recorded_speedup(result)
        entry = entry_from_row(result.case_id, result.row, environment=dict(result.environment),
                               source="measured", tolerance=context.settings.tolerance)

        def change(old: dict | None) -> str:
            """'20.4 -> 22.5 img/s, peak memory (...) 782 MiB -> 1.08 GiB (+41%); environment:
            torch 2.13.0 -> 2.11.0; accepted with ...; lineage ...'."""
            old_text = f"{old['median_ips']:.1f}" if old else "none"
            of_runs = (f" (the {len(recorded)} unmarked of {len(result.runs_ips)} runs)"
                       if len(recorded) < len(result.runs_ips) else "")
            memory = memory_change(old, entry) if old else ""
            changed = environment_diff(old["environment"], entry["environment"]) \
                if old and old.get("environment") and entry.get("environment") else ""
            extends = lineage_text(old, entry["median_ips"])
            return (f"{old_text} -> {entry['median_ips']:.1f} img/s{of_runs}"
                    + (f", {memory}" if memory else "")
                    + (f"; environment: {changed}" if changed else "")
                    + (f"; accepted with --perf-update-baselines=force: {'; '.join(failing)}"
                       if failing else "")
                    + (f"; lineage {extends}" if extends else ""))

        wanted = context.profile.baseline_runs
        untrusted = marked_refusal(marked, len(result.runs_ips),
                                   unmarked_needed(wanted, context.settings.runs)) + refusals(
            recorded, wanted_runs=wanted,
            tolerance=context.profile.tolerance, speedup=speedup, devices=result.case.devices,
            refused_reference=refused_reference(result.case_id, context.rows.measured_rows()))
        if result.verdict == NOT_COMPARABLE:
            untrusted.append(f"the entry it would replace is another machine's ("
                             f"{'; '.join(result.row.other_machine)}); this machine's "
                             f"entries belong in its own file "
                             f"(baselines/{context.baselines.hardware}.json)")
        never = impossible(speedup, result.case.devices)
        failing = failed_measures(result.verdict, result.row)
        return Update(ENTRIES, entry, change,
                      kept_runs(context, result, bool(untrusted or failing), promotable=not never),
                      tuple(untrusted), tuple(never), tuple(failing))


def recorded_speedup(result: CaseResult) -> float | None:
    """The speedup an entry of `result` stores: its unmarked runs' (`recordable_speedup`)."""
    return recordable_speedup(result.row.speedup, result.runs_ips,
                              recordable_runs(result.runs_ips, result.row.marked_runs),
                              result.case.devices)
