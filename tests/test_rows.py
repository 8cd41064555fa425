"""The row types of results.json (perf_tests/core/rows.py): one per kind, read from a row as
results.json holds it, old files among them, and written back as read."""
import dataclasses

from perf_tests.core.rows import ABRow, DOC, ROW_TYPES, Side, ThroughputRow, TimeToTrainRow
from perf_tests.core.row_values import row_of, rows_of

ROW = {"kind": "throughput", "nodes": 1, "gpus_per_node": 2, "batch_per_device": 8,
       "precision": "fp32", "image_size": 64, "data_backend": "synthetic",
       "runs_ips": [30.1, 31.0], "median_ips": 30.55, "verdict": "pass", "message": "ok",
       "settings": {"threads": 2}, "marked_runs": {}, "repro": None,
       "runs_peak_memory_bytes": [800, None], "peak_memory_bytes": 800}


def test_a_row_reads_as_its_kinds_type_and_writes_back_as_read():
    row = row_of("1n2g_fp32_b8", ROW)
    assert isinstance(row, ThroughputRow) and row.devices == 2
    assert (row.median_ips, row.runs_ips, row.runs_peak_memory_bytes) == (
        30.55, (30.1, 31.0), (800, None))
    assert row.baseline_ips is None and row.unknown == {}
    # written back as read: a null as null (`nulls`), an empty mapping as no key
    assert row.to_dict() == {key: value for key, value in ROW.items() if value != {}}


def test_a_key_no_type_declares_is_kept_as_read():
    row = row_of("1n2g_fp32_b8", {**ROW, "from_a_newer_suite": [1, 2]})
    assert dict(row.unknown) == {"from_a_newer_suite": [1, 2]}
    assert row.to_dict()["from_a_newer_suite"] == [1, 2]


def test_old_files_without_kind_get_theirs():
    rows = rows_of({"1n1g_fp32_b8_ttt": {"time_to_train_s": 12.0, "runs_top1": [0.8]},
                    "1n1g_fp32_b8": {"candidate": {"median_ips": 20.0, "runs_ips": [20.0]},
                                     "ratio": 0.98}})
    ttt, ab = rows.values()
    assert isinstance(ttt, TimeToTrainRow) and ttt.runs_top1 == (0.8,)
    assert isinstance(ab, ABRow) and ab.ratio == 0.98
    assert ab.candidate == Side(runs_ips=(20.0,), median_ips=20.0)
    assert ab.reference == Side() and "reference" not in ab.to_dict()


def test_a_null_that_states_something_is_kept():
    """`min_detectable_slowdown: null` (no slowdown detectable) is not a row without the figure."""
    stated = row_of("1n1g_fp32_b8", {**ROW, "min_detectable_slowdown": None})
    assert stated.min_detectable_slowdown is None and stated.detects_no_slowdown
    assert stated.to_dict() == {**row_of("1n1g_fp32_b8", ROW).to_dict(),
                                "min_detectable_slowdown": None}
    assert not row_of("1n1g_fp32_b8", {**ROW, "min_detectable_slowdown": 0.1}).detects_no_slowdown


def test_every_field_of_every_row_type_says_what_it_holds():
    """docs/formats.md's tables of a row's fields are the fields' descriptions (issue 65)."""
    types = {*ROW_TYPES.values(), Side}
    undescribed = [f"{row_type.__name__}.{declared.name}" for row_type in types
                   for declared in dataclasses.fields(row_type)
                   if not declared.metadata.get(DOC)]
    assert not undescribed, f"declare them with described(default, text): {undescribed}"
