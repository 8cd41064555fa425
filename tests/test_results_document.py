"""The one reader of results.json (perf_tests/results/document.py): an older file's rows get
their kind, a newer version and a file it cannot use are each refused in one line, and the
readers after the session (the history band, the tools, the session's own shared folder) go
through it."""
from __future__ import annotations

import json

import pytest

from perf_tests.core.cases import AB, MAX_BATCH, THROUGHPUT, TIME_TO_TRAIN
from perf_tests.results.document import (SCHEMA_VERSION, ResultsFileError, new_document,
                                         read_results)
from perf_tests.results.folder import ResultsFolder, ResultsFolderError
from perf_tests.results.history import read_session
from tools.inputs import InputError, read_results_file

ROW = {"nodes": 1, "gpus_per_node": 1, "batch_per_device": 8, "median_ips": 30.0}
# A file from before `kind` (and before `schema_version`): a time-to-train case told by its id,
# an A/B row by its candidate, a throughput row by neither; a max batch row always had `kind`.
OLD = {"hardware": "cpu", "cases": {
    "1n1g_fp32_b8": dict(ROW),
    "1n1g_fp32_ttt": {**ROW, "time_to_train_s": 90.0},
    "1n1g_bf16_b8": {**ROW, "candidate": {"runs_ips": [31.0]}},
    "1n1g_fp32_max": {**ROW, "kind": MAX_BATCH, "max_batch": 64}}}


def written(tmp_path, document, name="results.json"):
    path = tmp_path / name
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


def test_an_old_files_rows_are_read_with_their_kinds(tmp_path):
    path = written(tmp_path, OLD)
    document = read_results(path)
    assert {case_id: row["kind"] for case_id, row in document["cases"].items()} == {
        "1n1g_fp32_b8": THROUGHPUT, "1n1g_fp32_ttt": TIME_TO_TRAIN, "1n1g_bf16_b8": AB,
        "1n1g_fp32_max": MAX_BATCH}
    assert document["schema_version"] == SCHEMA_VERSION
    assert document["cases"]["1n1g_bf16_b8"]["candidate"] == {"runs_ips": [31.0]}
    assert json.loads(path.read_text()) == OLD   # read, never rewritten


def test_the_writers_document_reads_back_as_written(tmp_path):
    document = new_document({"hardware": "cpu"}, {"1n1g_fp32_b8": {**ROW, "kind": THROUGHPUT}})
    assert document["schema_version"] == SCHEMA_VERSION
    assert read_results(written(tmp_path, document)) == document


@pytest.mark.parametrize("content, words", [
    ({**OLD, "schema_version": SCHEMA_VERSION + 1},
     f"has schema_version {SCHEMA_VERSION + 1}, newer than this checkout reads "
     f"({SCHEMA_VERSION}); update this checkout to read it"),
    ("{\"cases\": ", "does not read as JSON (Expecting value: line 1 column 11 (char 10)); "
                     "pass a results.json the suite wrote"),
    ("[1, 2]", "does not hold a JSON object; pass a results.json the suite wrote"),
    ({"hardware": "cpu"}, "has no 'cases' object; pass a results.json the suite wrote"),
    ({"cases": {"1n1g_fp32_b8": [1]}},
     "case 1n1g_fp32_b8 is not an object; pass a results.json the suite wrote"),
    ({**OLD, "schema_version": "1"},
     "has schema_version '1', not one the suite writes; pass a results.json the suite wrote"),
])
def test_a_file_the_reader_cannot_use_is_one_line_naming_it(tmp_path, content, words):
    path = written(tmp_path, content)
    with pytest.raises(ResultsFileError) as refused:
        read_results(path)
    assert str(refused.value) == f"results file {path} {words}"
    with pytest.raises(InputError) as tool_refused:   # a tool's input: the same line
        read_results_file(path)
    assert "\n" not in str(tool_refused.value) and str(path) in str(tool_refused.value)


def test_every_reader_goes_through_it(tmp_path):
    old = written(tmp_path, OLD)
    assert read_session(old).cases["1n1g_bf16_b8"]["kind"] == AB   # the history band
    assert read_results_file(old)["cases"]["1n1g_fp32_ttt"]["kind"] == TIME_TO_TRAIN
    newer = written(tmp_path, {**OLD, "schema_version": SCHEMA_VERSION + 1}, "newer.json")
    assert read_session(newer) is None   # not a session the band learns from
    folder = tmp_path / "session"
    written(folder if folder.mkdir() is None else folder, "{broken")
    with pytest.raises(ResultsFolderError, match=r"^results file .*results\.json does not read "
                       r"as JSON .*measure again into a new folder \(--perf-results\)$"):
        ResultsFolder(folder, shared=True).load()
