"""How one case is measured, in every mode: skip, plan, hold the devices and run, judge,
follow up, save, update the baseline. The mode supplies each step's substance
(perf_tests/modes/base.py); the order and the error handling are here, once."""
from __future__ import annotations

from perf_tests.context.baseline_store import recorded
from perf_tests.judging.verdicts import ERROR, SKIPPED
from perf_tests.modes.base import Mode
from perf_tests.results.case_result import CaseResult
from perf_tests.results.folder import ResultsFolderError
from perf_tests.runs.device_lock import DeviceLockError, device_lock_path, holding_devices
from rn50_model.config import ConfigError


def measure(mode: Mode, case) -> CaseResult:
    """The case's result, written to results.json once, when every step has added its part
    (and, under --perf-update-baselines, its entry to the baseline file). Each step returns a new
    result; the judged one never changes. Should a step after the verdict fail, the verdict is
    saved before the failure goes on."""
    judged = attempt(mode, case)
    try:
        result = settled(mode, judged)
    except BaseException:
        mode.context.rows.save(judged)
        raise
    mode.context.rows.save(result)
    return result


def settled(mode: Mode, result: CaseResult) -> CaseResult:
    """The judged result with its baseline recording and, where it fails, its repro command."""
    context = mode.context
    unrecorded = False   # a recording refused or unwritable: the repro command redoes it
    if context.settings.update_baselines and result.verdict not in (SKIPPED, ERROR):
        update = mode.baseline_update(result)
        if update is not None:
            result = context.baselines.record(result, update, context.settings.force_baselines)
            unrecorded = not recorded(result)
            if not unrecorded and update.refusals:
                context.warn(result.case_id, f"{result.case_id}: baseline recorded with "
                             f"--perf-update-baselines=force although {'; '.join(update.refusals)}")
            if not unrecorded and update.gate_failures:
                context.warn(result.case_id, f"{result.case_id}: baseline recorded with "
                             f"--perf-update-baselines=force although {update.failing_text()}; "
                             "the lineage keeps what was accepted")
    if mode.fails(result) is not None:   # after the update: an updated entry fails nothing
        result = result.amended(repro=context.repro.command(
            mode.repro_cases(result), mode.uses_baseline, result, recording=unrecorded))
    return result


def attempt(mode: Mode, case) -> CaseResult:
    reason = mode.skip_reason(case)
    if reason:
        return mode.result(case, SKIPPED, f"{case.case_id}: skipped: {reason}",
                           details={"skip_reason": reason})
    try:
        plan = mode.plan(case)
    except (ConfigError, ResultsFolderError) as error:
        return mode.result(case, ERROR, f"{case.case_id}: {error}")
    try:
        # Held through the follow-up too: a profiled run (perf_tests/modes/explain/profiling.py) is
        # this case's.
        with holding_devices(device_lock_path(), mode.context.progress, case.case_id):
            return mode.follow_up(plan, mode.judge(plan, mode.run(plan)))
    except (DeviceLockError, ResultsFolderError) as error:
        return mode.result(case, ERROR, f"{case.case_id}: {error}")
