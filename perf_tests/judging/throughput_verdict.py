"""A throughput case's verdict and line, from what the mode gathered: a failed run (out of memory,
an error); ranks that shared devices; no entry, or another machine's; else the protocol's verdict
on the runs (perf_tests/judging/gate_protocol.py: host-aware, an unclear one inconclusive), a
pass's drift against the entry's lineage, where a multi-device regression's loss went, the
memory beside the speed and the GPU's throttling. Pure: the mode gathers the figures and builds
the `CaseResult` (perf_tests/modes/throughput.py)."""
from __future__ import annotations

from dataclasses import dataclass

from perf_tests.baselines.entries import entry_figures
from perf_tests.baselines.file import BaselineEntry
from perf_tests.baselines.lineage import drift
from perf_tests.core.stats import summarize
from perf_tests.core.text import ips
from perf_tests.judging.detectable import detectable_figure
from perf_tests.judging.footprint import memory_growth, with_memory
from perf_tests.judging.gate_protocol import GateProtocol
from perf_tests.judging.scaling_loss import loss_causes
from perf_tests.judging.verdicts import (AMBIGUOUS, ERROR, NO_BASELINE, NOT_COMPARABLE, OOM, PASS,
                                         REGRESSION, SHARED_DEVICES, shared_line)
from perf_tests.runs.outcome import RunOutcome


@dataclass(frozen=True)
class CaseFacts:
    """What the mode knows of a case beside its runs and their figures."""
    drift: str                                # --perf-drift: warn, fail or off
    drift_window: int                         # --perf-set drift-window, days
    memory_tolerance: float                   # --perf-set memory-tolerance
    no_entry_reason: str = ""                 # why the protocol has no entry
    other_machine: tuple[str, ...] | None = None   # the entry there is another machine's: how
    shared: str | None = None                 # --perf-set share-devices=on: '2 ranks on 1 ...'
    single_ips: float | None = None           # this session's 1n1g median (a scaling loss's)
    single_entry: BaselineEntry | None = None  # the 1n1g case's entry
    throttling: str | None = None             # 'the GPU was slowed down in runs 2, 4 (...)'


def failure_verdict(case_id: str, failed: RunOutcome, entry: BaselineEntry | None
                    ) -> tuple[str, str]:
    """A case whose run failed: out of memory (with the speed the baseline ran at) or an
    error."""
    verdict = OOM if failed.outcome == "oom" else ERROR
    message = f"{case_id}: {failed.message}"
    if verdict == OOM and entry is not None:
        message += f"; the baseline ran at {ips(entry.median_ips)} img/s"
    return verdict, message


def throughput_verdict(protocol: GateProtocol, runs_ips: list[float], details: dict,
                       facts: CaseFacts) -> tuple[str, str, dict]:
    """The verdict on runs that all ended well, its line, and `details` (the figures the mode
    gathered: the band's `tolerance`, `marked_runs`, the runs' figures) with what judging
    added: the delta, the detectable slowdown, the drift, the memory's growth."""
    case, entry = protocol.case, protocol.entry
    details = dict(details)
    median = summarize(runs_ips).median
    if entry is not None:
        details.update(memory_growth(case.case_id, entry_figures(details), {
            "peak_memory_bytes": entry.peak_memory_bytes,
            "peak_memory_covers": entry.peak_memory_covers}, facts.memory_tolerance))
    marks_named = False
    if facts.shared:
        verdict, message = SHARED_DEVICES, shared_line(case, facts.shared, median,
                                                        protocol.recording)
    elif entry is None:
        verdict = NO_BASELINE
        if facts.other_machine is not None:
            verdict = NOT_COMPARABLE
            details["other_machine"] = list(facts.other_machine)
        message = f"{case.case_id}: {ips(median)} img/s; {facts.no_entry_reason}"
    else:
        judged = protocol.judgement(runs_ips)
        decided = protocol.host_aware(runs_ips, details["marked_runs"], judged)
        # The marks are in the line where the runs were slower (host_aware named them).
        marks_named = bool(details["marked_runs"]) and judged.verdict in (REGRESSION, AMBIGUOUS)
        details["delta"] = decided.delta
        details.update(detectable_figure(case.case_id, runs_ips, entry.runs_ips,
                                         entry.median_ips, details["tolerance"]))
        if decided.on_speedup:   # the table shows it: the delta column is throughput's
            details["speedup_delta"] = decided.speedup_delta
        settled = protocol.settled(decided, len(runs_ips))
        verdict, message = settled.verdict, settled.message
    if verdict == PASS and entry is not None:
        verdict, message = with_drift(entry, median, details["tolerance"], details, message,
                                      facts.drift, facts.drift_window)
    if verdict == REGRESSION and case.devices > 1 and "drift" not in details:
        message += "; " + loss_causes(details, entry, case.single_device.case_id,
                                      facts.single_ips, facts.single_entry,
                                      details["tolerance"])
    if details.get("memory_regression"):
        details["throughput_verdict"] = verdict   # the speed's own (explain profiles it)
    verdict, message = with_memory(case.case_id, verdict, message,
                                   details.get("memory_regression"))
    if facts.throttling and not marks_named:
        message += f"; {facts.throttling}"
    return verdict, message, details


def with_drift(entry: BaselineEntry, median: float, tolerance: float, details: dict,
               message: str, action: str, window_days: int) -> tuple[str, str]:
    """A pass, and its line, with the drift against the entry's lineage named
    (perf_tests/baselines/lineage.py; `details` gets it): still a pass that warns, or under
    --perf-drift fail (`action`) a regression."""
    if action == "off" or not entry.lineage:
        return PASS, message
    found = drift(median, entry.lineage, tolerance, window_days)
    if found is None:
        return PASS, message
    details["drift"] = found.to_dict()
    if action == "fail":
        return REGRESSION, f"{message}; but {found.text} (--perf-drift fail)"
    return PASS, f"{message}; but {found.text}"
