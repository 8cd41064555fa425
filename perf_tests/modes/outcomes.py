"""A verdict as pytest's outcome: fail, skip, warn or pass, with the line the user reads (a pass
warns too where its runs could not have seen a slowdown of its tolerance: detectable.py); and
a gate's exit status where a case could not be judged."""
from __future__ import annotations

from collections.abc import Mapping

import pytest

from perf_tests.context.context import Context
from perf_tests.core.rows import Row, ThroughputRow
from perf_tests.core.row_values import rows_of
from perf_tests.environment.differences import explained, recorded_in
from perf_tests.judging.detectable import blind_pass_warning
from perf_tests.judging.verdicts import (ERROR, HOST_UNFIT, IMPROVEMENT, INCONCLUSIVE, NO_BASELINE,
                                         NOT_COMPARABLE, OOM, PASS, REGRESSION, SHARED_DEVICES,
                                         SKIPPED)
from perf_tests.results.case_result import CaseResult

# A gate (--perf-require-baseline) that could not judge a case (the host unfit, the runs
# inconclusive) and failed none exits with this status, not 0: sysexits.h's EX_TEMPFAIL, "try
# again later", which is what such a session asks for (a quiet host, more runs). CI tells it from
# a pass (0) and from a failure (1), e.g. GitLab's `allow_failure: exit_codes: [75]`.
UNJUDGED_EXIT_STATUS = 75
UNJUDGED = (HOST_UNFIT, INCONCLUSIVE)
# A gate (--perf-require-baseline) whose only failures are cases whose baseline is another
# machine's (`not-comparable`) exits with this status, not 1: sysexits.h's EX_CONFIG, the gate
# was pointed at the wrong baseline, which is no regression of the software; CI tells it from
# a regression (1) and from a case it could not judge (75).
NOT_COMPARABLE_EXIT_STATUS = 78


def fails(settings, result: CaseResult) -> str | None:
    """Whether `result` fails its test: None where it does not, else what the failure line
    ends with ('' for a failure in any session, ' (--perf-strict)' where an option made it
    one). A baseline update never fails the old entry's verdict."""
    verdict = result.verdict
    if result.row.baseline_update:
        return None
    if verdict in (REGRESSION, ERROR) or (verdict == OOM and result.baseline_entry is not None):
        return ""
    # A case whose ranks shared devices has no comparable entry by definition: a gate is not
    # green on it.
    if verdict in (NO_BASELINE, NOT_COMPARABLE, SHARED_DEVICES) and settings.require_baseline:
        return " (--perf-require-baseline)"
    if verdict in (INCONCLUSIVE, HOST_UNFIT) and settings.strict:
        return " (--perf-strict)"
    return None


def enforce(context: Context, result: CaseResult, failing: str | None,
            uses_baseline: bool = True) -> None:
    """pytest's outcome for `result`; `failing`: whether it fails, as its mode's `fails` said."""
    lines = [explained(result.message, result.row.environment_diff, result.row.settings_diff)]
    if result.baseline_entry is not None or (result.verdict in (REGRESSION, OOM)
                                             and uses_baseline):
        elsewhere = recorded_in(result.baseline_entry.environment or {},
                                result.environment) \
            if result.baseline_entry is not None else ""
        lines[0] += f" [baseline {context.baselines.path}" + \
            (f", {elsewhere}]" if elsewhere else "]")
    if failing is not None:
        repro = result.row.repro
        lines[0] += failing + (f"; repro: {repro}" if repro else "")
    text = "\n".join([*lines, *result.explanation, *result.failure_tail])
    update = result.row.baseline_update
    if update:
        context.warn(result.case_id, f"{result.case_id}: baseline updated {update} "
                                     f"({result.verdict} against the old one)")
        return
    if result.verdict == SKIPPED:
        pytest.skip(result.message.split("skipped: ", 1)[-1])
    if failing is not None:
        pytest.fail(text, pytrace=False)
    if result.verdict in (OOM, NO_BASELINE, NOT_COMPARABLE, INCONCLUSIVE, HOST_UNFIT,
                          IMPROVEMENT, SHARED_DEVICES):
        context.warn(result.case_id, text)
    else:
        assert result.verdict == PASS, result.verdict
        # within the band, beyond it below an earlier entry
        if isinstance(result.row, ThroughputRow) and result.row.drift:
            context.warn(result.case_id, text)
        blind = blind_pass_warning(result.case_id, result.row)
        if blind:
            context.warn(result.case_id, blind)


def unjudged_cases(cases: Mapping[str, Row | dict]) -> dict[str, str]:
    """{case id: verdict} of the results rows whose slowdown could not be judged (host-unfit,
    inconclusive); a baseline update's old verdict is no such case."""
    return {case_id: row.verdict for case_id, row in rows_of(cases).items()
            if row.verdict in UNJUDGED and not row.baseline_update}


def unjudged_line(unjudged: dict[str, str], settings) -> str:
    """The summary's line on the cases a session could not judge, and what becomes of them."""
    named = ", ".join(f"{case_id} {verdict}" for case_id, verdict in unjudged.items())
    cases = f"{len(unjudged)} case{'s' if len(unjudged) > 1 else ''}"
    if settings.strict:
        return f"could not judge {cases} ({named}): they fail (--perf-strict)"
    if settings.require_baseline:
        return (f"could not judge {cases} ({named}): the session exits {UNJUDGED_EXIT_STATUS}, "
                "not 0 (--perf-require-baseline); rerun on a quiet host, or with more runs "
                "(--perf-set max-runs)")
    return (f"could not judge {cases} ({named}): they pass with a warning; under "
            f"--perf-require-baseline the session exits {UNJUDGED_EXIT_STATUS}, under "
            "--perf-strict they fail")


def not_comparable_cases(cases: Mapping[str, Row | dict]) -> list[str]:
    """The results rows judged `not-comparable`: their baseline entry is another machine's."""
    return [case_id for case_id, row in rows_of(cases).items() if row.verdict == NOT_COMPARABLE]


def not_comparable_line(not_comparable: list[str], settings) -> str:
    """The summary's line on the cases whose baseline is another machine's."""
    cases = f"{len(not_comparable)} case{'s' if len(not_comparable) > 1 else ''}"
    what = (f"{cases} ({', '.join(not_comparable)}) not compared: the baseline is another "
            "machine's (each line says what differs); ")
    if settings.require_baseline:
        return what + (f"they fail (--perf-require-baseline), and a session that failed only "
                       f"them exits {NOT_COMPARABLE_EXIT_STATUS}, not 1: point the gate at this "
                       "machine's baseline file")
    return what + ("they pass with a warning; under --perf-require-baseline they fail, exit "
                   f"status {NOT_COMPARABLE_EXIT_STATUS}")
