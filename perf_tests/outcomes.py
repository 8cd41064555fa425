"""A verdict as pytest's outcome: fail, skip, warn or pass, with the line the user reads (a pass
warns too where its runs could not have seen a slowdown of its tolerance: detectable.py)."""
from __future__ import annotations

import pytest

from .case_result import CaseResult
from .context import Context
from .detectable import blind_pass_warning
from .verdicts import (ERROR, HOST_UNFIT, IMPROVEMENT, INCONCLUSIVE, NO_BASELINE, OOM, PASS,
                       REGRESSION, SKIPPED, explained)


def enforce(context: Context, result: CaseResult, uses_baseline: bool = True) -> None:
    settings = context.settings
    lines = [explained(result.message, result.details.get("environment_diff"),
                       result.details.get("settings_diff"))]
    if result.baseline_entry is not None or (result.verdict in (REGRESSION, OOM)
                                             and uses_baseline):
        lines[0] += f" [baseline {context.baselines.path}]"
    text = "\n".join(lines + result.explanation + result.failure_tail)
    update = result.details.get("baseline_update")
    if update:
        context.warn(result.case_id, f"{result.case_id}: baseline updated {update} "
                                     f"({result.verdict} against the old one)")
        return
    if result.verdict == SKIPPED:
        pytest.skip(result.message.split("skipped: ", 1)[-1])
    if result.verdict in (REGRESSION, ERROR):
        pytest.fail(text, pytrace=False)
    if result.verdict == OOM:
        if result.baseline_entry is not None:
            pytest.fail(text, pytrace=False)
        context.warn(result.case_id, text)
    elif result.verdict == NO_BASELINE:
        if settings.require_baseline:
            pytest.fail(text + " (--require-baseline)", pytrace=False)
        context.warn(result.case_id, text)
    elif result.verdict in (INCONCLUSIVE, HOST_UNFIT):
        if settings.strict:
            pytest.fail(text + " (--perf-strict)", pytrace=False)
        context.warn(result.case_id, text)
    elif result.verdict == IMPROVEMENT:
        context.warn(result.case_id, text)
    else:
        assert result.verdict == PASS, result.verdict
        blind = blind_pass_warning(result.case_id, result.details)
        if blind:
            context.warn(result.case_id, blind)
