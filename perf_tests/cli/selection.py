"""Case selection by pytest's own `-k` expressions (substrings joined by and/or/not), for the
tools that take `-k` as pytest does; and what to say when `-k` selects no case: the cases this
session has, and the ones the full profile would have, so `pytest perf_tests -k 1n8g_amp` on a
CPU host does not end in a bare '4 deselected'."""
from __future__ import annotations

from collections.abc import Callable

# pytest's -k parser: private, but the one `pytest -k` itself uses (pytest 8 and 9 alike), so a
# tool's -k selects exactly what pytest's would.
from _pytest.mark.expression import Expression

from perf_tests.core.cases import FULL, Case

SHOWN = 8   # case ids named in one line at most


class KeywordError(ValueError):
    """A -k expression pytest would refuse; the message says where, as pytest does."""


def keyword_selector(expression: str) -> Callable[[list[str]], bool]:
    """A predicate on an item's names for pytest's -k `expression`: true where it selects an
    item with those names (a word matches a case-insensitive substring of any of them), as
    pytest's KeywordMatcher decides; KeywordError where pytest would not parse it."""
    try:
        compiled = Expression.compile(expression)
    except Exception as error:   # SyntaxError from pytest 9, its own ParseError before
        column = getattr(error, "offset", None) or getattr(error, "column", "?")
        problem = getattr(error, "msg", None) or getattr(error, "message", str(error))
        raise KeywordError(f"-k {expression!r}: at column {column}: {problem}") from None

    def selects(names: list[str]) -> bool:
        lowered = [name.lower() for name in names]

        def matcher(word: str, /, **kwargs) -> bool:
            if kwargs:
                raise KeywordError(f"-k {expression!r}: keyword expressions do not support "
                                   "call parameters")
            return any(word.lower() in name for name in lowered)
        return compiled.evaluate(matcher)
    return selects


def matches(expression: str, names: list[str]) -> bool | None:
    """Whether pytest's -k `expression` selects an item with these names; None where it does
    not parse."""
    try:
        return keyword_selector(expression)(names)
    except KeywordError:
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
