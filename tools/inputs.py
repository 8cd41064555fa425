"""The files a tool reads from its user, and how it refuses a bad one: `InputError`, one line
that names the file and what to do, printed as `<tool>: error: ...` with exit status 2, as a bad
option is (tools/cli.py)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from perf_tests.results.document import ResultsFileError, results_document

SUITE_RESULTS = "a results.json the suite wrote"


class InputError(Exception):
    """An input a tool cannot use; one line naming the file and what to do."""


def refused(prog: str, error: Exception) -> int:
    """Says why on one line of stderr; the exit status of a bad input."""
    print(f"{prog}: error: {error}", file=sys.stderr)
    return 2


def read_json(path: Path, what: str = "input", expected: str = SUITE_RESULTS) -> dict:
    """The JSON object in `path`, or InputError saying why not (`expected`: what to pass)."""
    if not path.exists():
        raise InputError(f"{what} {path} does not exist; check the path")
    if path.is_dir():
        raise InputError(f"{what} {path} is a directory; pass the JSON file in it "
                         "(e.g. results.json)")
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"{what} {path} cannot be read ({error}); check its permissions") \
            from None
    try:
        document = json.loads(text)
    except ValueError as error:
        raise InputError(f"{what} {path} is not valid JSON ({error}); pass {expected}") from None
    if not isinstance(document, dict):
        raise InputError(f"{what} {path} does not hold a JSON object; pass {expected}")
    return document


def read_results_file(path: Path, what: str = "input") -> dict:
    """A results.json through the suite's one reader (perf_tests/results/document.py): its
    version checked, an older file's rows given their kind; InputError saying why not."""
    return checked_results(path, read_json(path, what))


def checked_results(path: Path, document) -> dict:
    """A parsed results.json, checked and migrated by the suite's reader; InputError where the
    reader refuses it."""
    try:
        return results_document(document, path)
    except ResultsFileError as error:
        raise InputError(str(error)) from None


def check_rows(path: Path, cases) -> dict[str, dict]:
    """A results file's `cases`, checked for what every reader relies on: whole-number shape
    and batch, numeric figures."""
    if not isinstance(cases, dict):
        raise InputError(f"input {path} has 'cases' that is not an object; pass {SUITE_RESULTS}")
    for case_id, row in cases.items():
        def fail(problem: str, case_id: str = case_id) -> None:
            raise InputError(f"input {path} case {case_id} {problem}; fix the file or "
                             "regenerate it")
        if not isinstance(row, dict):
            fail("is not an object")
        for name in ("nodes", "gpus_per_node", "batch_per_device"):
            value = row.get(name)
            if not (isinstance(value, int) and not isinstance(value, bool) and value > 0):
                fail(f"has {name} {value!r}, not a whole number above 0")
        for name in ("median_ips", "speedup", "baseline_ips", "baseline_speedup", "delta", "cv"):
            value = row.get(name)
            if value is not None and (isinstance(value, bool)
                                      or not isinstance(value, (int, float))):
                fail(f"has {name} {value!r}, not a number")
    return cases
