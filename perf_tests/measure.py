"""How one case is measured, in every mode: skip, plan, hold the devices and run, judge,
follow up, save, update the baseline. The mode supplies each step's substance
(perf_tests/modes/base.py); the order and the error handling are here, once."""
from __future__ import annotations

from rn50_model.config import ConfigError

from .case_result import CaseResult
from .runs.device_lock import DeviceLockError, device_lock_path, holding_devices
from .modes.base import Mode
from .verdicts import ERROR, SKIPPED


def measure(mode: Mode, case) -> CaseResult:
    """The case's result, saved in results.json (and, under --perf-update-baselines, in the
    baseline file) before it is returned."""
    context = mode.context
    result = attempt(mode, case)
    context.save(result)
    unrecorded = False   # a recording refused or unwritable: the repro command redoes it
    if context.settings.update_baselines and result.verdict not in (SKIPPED, ERROR):
        update = mode.baseline_update(result)
        if update is not None:
            recorded = context.baselines.record(result, update, context.settings.force_baselines)
            if recorded and update.refusals:
                context.warn(result.case_id, f"{result.case_id}: baseline recorded with "
                             f"--perf-update-baselines=force although {'; '.join(update.refusals)}")
            unrecorded = not recorded
            context.save(result)
    if mode.fails(result) is not None:   # after the update: an updated entry fails nothing
        result.details["repro"] = context.repro(mode.repro_cases(result), mode.uses_baseline,
                                                result, recording=unrecorded)
        context.save(result)
    return result


def attempt(mode: Mode, case) -> CaseResult:
    reason = mode.skip_reason(case)
    if reason:
        return mode.result(case, SKIPPED, f"{case.case_id}: skipped: {reason}",
                           details={"skip_reason": reason})
    try:
        plan = mode.plan(case)
    except ConfigError as error:
        return mode.result(case, ERROR, f"{case.case_id}: {error}")
    try:
        with holding_devices(device_lock_path(), mode.context.progress):
            measured = mode.run(plan)
    except DeviceLockError as error:
        return mode.result(case, ERROR, f"{case.case_id}: {error}")
    result = mode.judge(plan, measured)
    mode.follow_up(plan, result)
    return result
