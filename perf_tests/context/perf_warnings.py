"""The suite's warnings and how pytest shows them: a case that passed but needs attention
(`PerfWarning`, located at its case's results folder), and a command line that works but not as it
reads (`PerfCommandLineWarning`)."""
from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path


class PerfWarning(UserWarning):
    """A case that passed but needs attention: no baseline, an improvement, an unclear result."""


class PerfCommandLineWarning(UserWarning):
    """The command line works, but not as it reads: pytest took an option's value for a test
    path (perf_tests/plugin.py `user_project`)."""


def perf_warning_format(original: Callable[..., str]) -> Callable[..., str]:
    """`warnings.formatwarning` for a session: a PerfWarning's location is its case's results
    folder (`Context.warn`), which reads as 'PerfWarning: <line> (runs in <folder>)' rather than
    as a source line '<folder>:0:'; a PerfCommandLineWarning is its
    line alone (it is about the command line, not about a line of the plugin); every other
    warning as `original` formats it."""
    def formatted(message, category, filename, lineno, line=None) -> str:
        if isinstance(category, type) and issubclass(category, PerfWarning):
            return f"{category.__name__}: {message} (runs in {filename})\n"
        if isinstance(category, type) and issubclass(category, PerfCommandLineWarning):
            return f"{category.__name__}: {message}\n"
        return original(message, category, filename, lineno, line)
    formatted.original = original
    return formatted


def warn_case(results: Path, case_id: str, text: str) -> None:
    """A `PerfWarning` about `case_id`, located at its results folder, so pytest's summary shows
    where the runs are, not the source line of the call (the same for every warning):
    perf_warning_format."""
    warnings.warn_explicit(PerfWarning(text), PerfWarning, str(results / case_id), 0)
