"""What to say when `-k` selects no case: the cases this session has, and the ones the full
profile would have, so `pytest perf_tests -k 1n8g_amp` on a CPU host does not end in a bare
'4 deselected'. The expression is pytest's own (-k: substrings joined by and/or/not)."""
from __future__ import annotations

from .cases import FULL, Case

SHOWN = 8   # case ids named in one line at most


def matches(expression: str, names: list[str]) -> bool | None:
    """Whether pytest's -k `expression` selects an item with these names; None where this
    pytest does not expose its expression parser."""
    try:
        from _pytest.mark.expression import Expression
        compiled = Expression.compile(expression)
    except Exception:   # a private module: another pytest may not have it
        return None

    def matcher(part: str, /, **kwargs) -> bool:
        return any(part.lower() in name.lower() for name in names)
    try:
        return compiled.evaluate(matcher)
    except Exception:
        return None


def listed(case_ids: list[str]) -> str:
    more = len(case_ids) - SHOWN
    return ", ".join(case_ids[:SHOWN]) + (f" and {more} more" if more > 0 else "")


def empty_selection_hint(expression: str, here: list[Case], profile: str,
                         module: str = "test_resnet50_training.py") -> str:
    """One line: which cases the session has, and which of the full profile's `expression`
    would select, with what they need."""
    line = (f"-k '{expression}' selects none of this session's cases: the {profile} profile "
            f"here has {listed([case.case_id for case in here]) or 'no case'}")
    if profile == FULL.name:
        return line + "."
    full = [case for case in FULL.cases()
            if matches(expression, [case.case_id, module, "perf_tests"])]
    if not full:
        return line + (f"; the full profile has none either (case ids read like "
                       f"{FULL.cases()[0].case_id}).")
    largest = max(full, key=lambda case: (case.devices, case.nodes))
    per_node = (f"{largest.gpus_per_node} on each of {largest.nodes} nodes" if largest.nodes > 1
                else f"{largest.gpus_per_node} on one host")
    found = listed([case.case_id for case in full])
    return line + (f"; the full profile (--perf-profile full) has {found}, measured on CUDA "
                   f"devices ({largest.case_id} needs {per_node}).")
