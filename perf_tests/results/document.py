"""results.json as a document: the schema version its one writer (results/folder.py) stamps, and
the one reader every reader after the session goes through (the history band, the report,
promote, history, publish, calibrate, bisect, the GPU hour's steps).

`read_results` checks the version (a newer one is refused in one line: update this checkout),
brings an older file to the current shape in one place (`migrated`: each row gets its `kind`,
read with `row_kind` where a file predates the field), and refuses a file it cannot use in one
line that names it and what to do (`ResultsFileError`). A change of the schema bumps
`SCHEMA_VERSION` and adds its step to `migrated`, so that no reader learns the old shape.
"""
from __future__ import annotations

import json
from pathlib import Path

from perf_tests.core.cases import row_kind

SCHEMA_VERSION = 1
RESULTS_FILE = "results.json"
# What a reader is told to pass instead of a file it cannot use.
PASS_RESULTS = "pass a results.json the suite wrote"


class ResultsFileError(Exception):
    """A results.json that cannot be read; one line naming the file and what to do."""


def new_document(header: dict, cases: dict | None = None) -> dict:
    """results.json as the session writes it: the version, the header's fields, the cases."""
    return {"schema_version": SCHEMA_VERSION, **header, "cases": dict(cases or {})}


def read_results(path: Path, advice: str = PASS_RESULTS) -> dict:
    """The document in `path`, checked and migrated (`results_document`); ResultsFileError,
    ending with `advice`, where it cannot be read."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise ResultsFileError(f"results file {path} cannot be read "
                               f"({getattr(error, 'strerror', None) or error}); {advice}") \
            from None
    try:
        document = json.loads(text)
    except ValueError as error:
        raise ResultsFileError(f"results file {path} does not read as JSON ({error}); "
                               f"{advice}") from None
    return results_document(document, path, advice)


def results_document(document, path: Path, advice: str = PASS_RESULTS) -> dict:
    """A parsed results.json checked (an object whose `cases` are objects, a version this
    checkout reads) and brought to the current schema; the file's own object is left as it is."""
    def refused(problem: str, then: str = advice) -> ResultsFileError:
        return ResultsFileError(f"results file {path} {problem}; {then}")
    if not isinstance(document, dict):
        raise refused("does not hold a JSON object")
    version = document.get("schema_version", SCHEMA_VERSION)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise refused(f"has schema_version {version!r}, not one the suite writes")
    if version > SCHEMA_VERSION:
        raise refused(f"has schema_version {version}, newer than this checkout reads "
                      f"({SCHEMA_VERSION})", "update this checkout to read it")
    cases = document.get("cases")
    if not isinstance(cases, dict):
        raise refused("has no 'cases' object")
    for case_id, row in cases.items():
        if not isinstance(row, dict):
            raise refused(f"case {case_id} is not an object")
    return migrated(document)


def migrated(document: dict) -> dict:
    """`document` in the current schema, a copy: every row names its `kind` (files from before
    the field: a `_ttt` case id is time-to-train, a row with a `candidate` is A/B)."""
    cases = {case_id: row if "kind" in row else {"kind": row_kind(case_id, row), **row}
             for case_id, row in document["cases"].items()}
    return {**document, "schema_version": SCHEMA_VERSION, "cases": cases}
