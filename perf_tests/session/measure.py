"""How one case is measured, in every mode: skip, plan, hold the devices and run, judge, ask
for its baseline update (once), follow up, update the baseline, save. The mode supplies each
step's substance (perf_tests/modes/base.py); the order and the error handling are here, once."""
from __future__ import annotations

from perf_tests.context.baseline_store import Update, recorded
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
    judged, update = attempt(mode, case)
    try:
        result = settled(mode, judged, update)
    except BaseException:
        mode.context.rows.save(judged)
        raise
    mode.context.rows.save(result)
    return result


def settled(mode: Mode, result: CaseResult, update: Update | None) -> CaseResult:
    """The judged result with its baseline `update` recorded and, where it fails, its repro
    command."""
    context = mode.context
    unrecorded = False   # a recording refused or unwritable: the repro command redoes it
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


def attempt(mode: Mode, case) -> tuple[CaseResult, Update | None]:
    """The case judged and followed up, and what --perf-update-baselines writes for it (asked of
    the mode once, before the follow-up, which needs to know whether it will be written)."""
    reason = mode.skip_reason(case)
    if reason:
        return mode.result(case, SKIPPED, f"{case.case_id}: skipped: {reason}",
                           skip_reason=reason), None
    try:
        plan = mode.plan(case)
    except (ConfigError, ResultsFolderError) as error:
        return mode.result(case, ERROR, f"{case.case_id}: {error}"), None
    try:
        # Held through the follow-up too: a profiled run (perf_tests/modes/explain/profiling.py) is
        # this case's.
        with holding_devices(device_lock_path(), mode.context.progress, case.case_id):
            judged = mode.judge(plan, mode.run(plan))
            return mode.follow_up(plan, judged, baseline_update(mode, judged))
    except (DeviceLockError, ResultsFolderError) as error:
        return mode.result(case, ERROR, f"{case.case_id}: {error}"), None


def baseline_update(mode: Mode, judged: CaseResult) -> Update | None:
    """What --perf-update-baselines writes for the judged case; None where nothing."""
    if not mode.context.settings.update_baselines or judged.verdict in (SKIPPED, ERROR):
        return None
    return mode.baseline_update(judged)
