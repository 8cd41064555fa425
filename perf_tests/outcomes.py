"""A verdict as pytest's outcome: fail, skip, warn or pass, with the line the user reads (a pass
warns too where its runs could not have seen a slowdown of its tolerance: detectable.py)."""
from __future__ import annotations

import pytest

from .case_result import CaseResult
from .context import Context
from .detectable import blind_pass_warning
from .differences import explained, recorded_in
from .verdicts import (ERROR, HOST_UNFIT, IMPROVEMENT, INCONCLUSIVE, NO_BASELINE, OOM, PASS,
                       REGRESSION, SKIPPED)


def fails(settings, result: CaseResult) -> str | None:
    """Whether `result` fails its test: None where it does not, else what the failure line
    ends with ('' for a failure in any session, ' (--perf-strict)' where an option made it
    one). A baseline update never fails the old entry's verdict."""
    verdict = result.verdict
    if result.details.get("baseline_update"):
        return None
    if verdict in (REGRESSION, ERROR) or (verdict == OOM and result.baseline_entry is not None):
        return ""
    if verdict == NO_BASELINE and settings.require_baseline:
        return " (--perf-require-baseline)"
    if verdict in (INCONCLUSIVE, HOST_UNFIT) and settings.strict:
        return " (--perf-strict)"
    return None


def enforce(context: Context, result: CaseResult, failing: str | None,
            uses_baseline: bool = True) -> None:
    """pytest's outcome for `result`; `failing`: whether it fails, as its mode's `fails` said."""
    lines = [explained(result.message, result.details.get("environment_diff"),
                       result.details.get("settings_diff"))]
    if result.baseline_entry is not None or (result.verdict in (REGRESSION, OOM)
                                             and uses_baseline):
        elsewhere = recorded_in(result.baseline_entry.environment or {},
                                result.details.get("environment") or {}) \
            if result.baseline_entry is not None else ""
        lines[0] += f" [baseline {context.baselines.path}" + \
            (f", {elsewhere}]" if elsewhere else "]")
    if failing is not None:
        repro = result.details.get("repro")
        lines[0] += failing + (f"; repro: {repro}" if repro else "")
    text = "\n".join(lines + result.explanation + result.failure_tail)
    update = result.details.get("baseline_update")
    if update:
        context.warn(result.case_id, f"{result.case_id}: baseline updated {update} "
                                     f"({result.verdict} against the old one)")
        return
    if result.verdict == SKIPPED:
        pytest.skip(result.message.split("skipped: ", 1)[-1])
    if failing is not None:
        pytest.fail(text, pytrace=False)
    if result.verdict in (OOM, NO_BASELINE, INCONCLUSIVE, HOST_UNFIT, IMPROVEMENT):
        context.warn(result.case_id, text)
    else:
        assert result.verdict == PASS, result.verdict
        blind = blind_pass_warning(result.case_id, result.details)
        if blind:
            context.warn(result.case_id, blind)
